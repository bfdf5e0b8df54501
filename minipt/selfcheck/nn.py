"""Gradcheck cases: the modules of ``minipt.nn`` (inputs and parameters)."""
import numpy as np

from ..core.gradcheck import check_module
from ..nn import (
    GELU,
    Dropout,
    Embedding,
    FeedForward,
    LayerNorm,
    Linear,
    RMSNorm,
    Sequential,
    Tanh,
)
from . import Case


def _x(shape=(2, 3, 6), seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _randomise(m, seed=1):
    """Non-trivial gains and biases (ones and zeros would hide bugs)."""
    rng = np.random.default_rng(seed)
    for _, p in m.named_parameters():
        p[...] = rng.standard_normal(p.shape)
    return m


def _check(make, *inputs):
    return lambda: check_module(_randomise(make().to(np.float64)), *inputs)


rng = np.random.default_rng
CASES = [
    Case("nn.Embedding", "ids (2,3) -> (2,3,4)",
         _check(lambda: Embedding(5, 4, rng=rng(0)), np.array([[1, 3, 1], [0, 3, 3]]))),
    Case("nn.LayerNorm", "x (2,3,6)", _check(lambda: LayerNorm(6), _x())),
    Case("nn.RMSNorm", "x (2,3,6)", _check(lambda: RMSNorm(6), _x())),
    Case("nn.Dropout", "x (2,3,6) p 0.5", _check(lambda: Dropout(0.5, rng=rng(0)), _x())),
    Case("nn.FeedForward gelu", "x (2,3,6) d_ff 8",
         _check(lambda: FeedForward(6, 8, rng=rng(0), activation="gelu", dropout=0.2), _x())),
    Case("nn.FeedForward swiglu", "x (2,3,6) d_ff 8",
         _check(lambda: FeedForward(6, 8, rng=rng(0), activation="swiglu", bias=False), _x())),
    Case("nn.Sequential", "x (2,3,6) -> (2,3,4)",
         _check(lambda: Sequential(Linear(6, 5, rng=rng(0)), Tanh(), LayerNorm(5),
                                   GELU("tanh"), Linear(5, 4, rng=rng(1))), _x())),
]
