"""Gradcheck cases: whole models, loss to every parameter (tied weights included)."""
import numpy as np

from ..core.gradcheck import check_module
from ..models.gpt import GPT, GPTConfig
from . import Case

SMALL = dict(vocab_size=7, block_size=6, n_layer=2, n_head=2, d_model=8)
IDX = np.array([[1, 2, 3, 4, 5], [6, 0, 1, 1, 2]])
TARGETS = np.array([[2, 3, 4, 5, 6], [0, 1, -100, 2, 3]])


def _gpt(make):
    def run():
        model = GPT(make(**SMALL), rng=np.random.default_rng(0)).to(np.float64)
        r = np.random.default_rng(1)
        for _, p in model.named_parameters():        # larger weights: non-trivial attention
            p[...] += r.standard_normal(p.shape) * 0.3
        return check_module(model, IDX, TARGETS, select=lambda out: out[0], max_checks=12)
    return run


CASES = [
    Case("model GPT-1", "post-LN, tied, V7 T5 d8", _gpt(lambda **k: GPTConfig.gpt1(dropout=0.1, **k))),
    Case("model GPT-2", "pre-LN, ln_f, tied", _gpt(GPTConfig.gpt2)),
    Case("model GPT-3", "dense + banded window 2", _gpt(lambda **k: GPTConfig.gpt3(sparse_window=2, **k))),
    Case("model LLaMA", "RMSNorm, SwiGLU, RoPE, untied", _gpt(GPTConfig.llama)),
]
