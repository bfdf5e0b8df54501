"""Modules that own parameters and call the ops (``minipt.ops``)."""
from . import masks
from .activations import GELU, Activation, ReLU, Sigmoid, Tanh
from .attention import MultiHeadAttention
from .block import TransformerBlock
from .dropout import Dropout
from .embedding import Embedding
from .feedforward import FeedForward
from .kv_cache import KVCache
from .linear import Linear
from .norms import LayerNorm, RMSNorm
from .positions import LearnedPositions, SinusoidalPositions, T5RelativeBias
from .sequential import Sequential
from .stack import TransformerStack

__all__ = ["Linear", "Embedding", "LayerNorm", "RMSNorm", "Dropout", "FeedForward", "Sequential",
           "Activation", "GELU", "ReLU", "Tanh", "Sigmoid", "MultiHeadAttention", "TransformerBlock",
           "TransformerStack", "KVCache", "LearnedPositions", "SinusoidalPositions", "T5RelativeBias", "masks"]
