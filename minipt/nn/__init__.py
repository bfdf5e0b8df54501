"""Modules that own parameters and call the ops (``minipt.ops``)."""
from .activations import GELU, Activation, ReLU, Sigmoid, Tanh
from .dropout import Dropout
from .embedding import Embedding
from .feedforward import FeedForward
from .linear import Linear
from .norms import LayerNorm, RMSNorm
from .sequential import Sequential

__all__ = ["Linear", "Embedding", "LayerNorm", "RMSNorm", "Dropout", "FeedForward", "Sequential",
           "Activation", "GELU", "ReLU", "Tanh", "Sigmoid"]
