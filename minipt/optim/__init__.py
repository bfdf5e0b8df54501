"""Optimisers (SGD with momentum, AdaGrad, Adam, AdamW), learning-rate schedules and gradient
clipping. Each optimiser takes a Module, updates its parameter arrays in place and saves
its state as arrays keyed by dotted parameter name (see ``minipt.core.checkpoint``)."""
from .adagrad import AdaGrad
from .adam import Adam, AdamW, default_no_decay
from .base import Optimizer
from .clip import clip_grad_norm, grad_norm
from .schedules import constant, schedule, warmup_cosine, warmup_linear
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "AdaGrad", "Adam", "AdamW", "default_no_decay", "clip_grad_norm", "grad_norm",
           "constant", "warmup_linear", "warmup_cosine", "schedule"]
