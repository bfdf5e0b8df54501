"""Optimisers, learning-rate schedules and gradient clipping."""
from .adam import Adam, AdamW
from .clip import clip_grad_norm, grad_norm
from .schedules import constant, warmup_cosine, warmup_linear
from .sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "clip_grad_norm", "grad_norm", "constant", "warmup_linear", "warmup_cosine"]
