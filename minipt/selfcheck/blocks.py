"""Gradcheck cases: multi-head attention, Transformer blocks, stacks and position modules
(float64, tiny sizes: C 8, H 2, T 4, S 3, so ``minipt gradcheck`` stays fast)."""
import numpy as np

from ..core.gradcheck import check_module
from ..core.module import Module
from ..nn import masks
from ..nn.attention import MultiHeadAttention
from ..nn.block import TransformerBlock
from ..nn.positions import LearnedPositions, T5RelativeBias
from ..nn.stack import TransformerStack
from . import Case

B, T, S, C, H, F = 2, 4, 3, 8, 2, 12
rng = np.random.default_rng


def _x(shape=(B, T, C), seed=0):
    return rng(seed).standard_normal(shape)


def _randomise(m, seed=1):
    """Non-trivial gains and biases, and weights large enough to make attention peaky."""
    r = rng(seed)
    for _, p in m.named_parameters():
        p[...] = r.standard_normal(p.shape) * 0.5
    return m


def _check(make, *inputs, max_checks=None, **forward_kwargs):
    """``max_checks`` nudges that many random elements per array (the bigger cases)."""
    return lambda: check_module(_randomise(make().to(np.float64)), *inputs, forward_kwargs=forward_kwargs,
                                max_checks=max_checks)


def _mha(**kw):
    return lambda: MultiHeadAttention(C, H, rng=rng(0), **kw)


def _block(**kw):
    return lambda: TransformerBlock(C, H, F, rng=rng(0), **kw)


def _stack(n, **kw):
    return lambda: TransformerStack(n, d_model=C, n_heads=H, d_ff=F, rng=rng(0), **kw)


class BiasedAttention(Module):
    """MHA with its additive (H, T, T) bias as a second input: checks ``dbias``."""

    def __init__(self):
        super().__init__()
        self.attn = MultiHeadAttention(C, H, rng=rng(0))

    def forward(self, x, bias):
        return self.attn(x, causal=True, bias=bias)

    def backward(self, dy):
        g = self.attn.backward(dy)
        return g.dx, g.dbias


class T5Stack(Module):
    """One T5 relative-bias table shared by two RMSNorm blocks: the table's gradient is
    the sum of both layers' bias gradients, scattered back by bucket."""

    def __init__(self):
        super().__init__()
        self.rel = T5RelativeBias(H, bidirectional=False, num_buckets=6, max_distance=8, rng=rng(0))
        self.stack = TransformerStack(2, d_model=C, n_heads=H, d_ff=F, rng=rng(1), norm="rms", bias=False,
                                      activation="relu", final_norm=True)

    def forward(self, x):
        return self.stack(x, causal=True, attn_bias=self.rel(x.shape[1]))

    def backward(self, dy):
        g = self.stack.backward(dy)
        self.rel.backward(g.dattn_bias)
        return g.dx


class PositionsBlock(Module):
    """Learned positions (a table longer than T, read at an offset) feeding a block."""

    def __init__(self):
        super().__init__()
        self.wpe = LearnedPositions(7, C, rng=rng(0))
        self.block = TransformerBlock(C, H, F, rng=rng(1))

    def forward(self, x):
        return self.block(x + self.wpe(x.shape[1], offset=2), causal=True)

    def backward(self, dy):
        dx = self.block.backward(dy).dx
        self.wpe.backward(dx)
        return dx


_pad = masks.padding(np.array([4, 2]), T)                              # (B, 1, T)
_mem = _x((B, S, C), 1)
_alternate = lambda i, T, S: masks.banded(T, 2, S) if i % 2 else None  # GPT-3: dense, banded, ...
CASES = [
    Case("nn.MHA self causal", "x (2,4,8) H 2", _check(_mha(), _x(), causal=True)),
    Case("nn.MHA self padding", "key padding (B,1,T)", _check(_mha(), _x(), mask=_pad)),
    Case("nn.MHA rope", "causal, RoPE, positions 3..6",
         _check(_mha(rope=True, bias=False), _x(), causal=True, positions=np.arange(3, 3 + T))),
    Case("nn.MHA bias", "causal + (H,T,T) bias, dbias", _check(BiasedAttention, _x(), _x((H, T, T), 2))),
    Case("nn.MHA attention dropout", "p 0.3, fixed Generator", _check(_mha(dropout=0.3), _x(), causal=True)),
    Case("nn.MHA cross", "x (2,4,8) memory (2,3,8)", _check(_mha(cross=True), _x(), _mem)),
    Case("nn.MHA cross masked", "memory padding (B,1,S)",
         _check(_mha(cross=True), _x(), _mem, mask=masks.padding(np.array([3, 1]), S))),
    Case("nn.Block pre-LN gelu_tanh", "GPT-2 style, causal", _check(_block(), _x(), causal=True)),
    Case("nn.Block post-LN gelu", "BERT style (exact GELU), padding",
         _check(_block(prenorm=False, activation="gelu"), _x(), mask=_pad)),
    Case("nn.Block rms swiglu rope", "LLaMA style",
         _check(_block(norm="rms", activation="swiglu", bias=False, rope=True), _x(), causal=True,
                positions=np.arange(T))),
    Case("nn.Block post-LN rms relu", "RMSNorm after the residual", _check(_block(prenorm=False, norm="rms",
                                                                                 activation="relu"), _x())),
    Case("nn.Block dropout", "residual p 0.2 + attention p 0.1",
         _check(_block(dropout=0.2, attn_dropout=0.1), _x(), causal=True)),
    Case("nn.Block decoder pre-LN", "self + cross, dmemory", _check(_block(cross_attention=True), _x(), _mem,
                                                                    causal=True, max_checks=64)),
    Case("nn.Block decoder post-LN", "self + cross, memory mask",
         _check(_block(cross_attention=True, prenorm=False, dropout=0.2), _x(), _mem, causal=True,
                memory_mask=masks.padding(np.array([2, 3]), S), max_checks=48)),
    Case("nn.Stack shared (ALBERT)", "3 layers, one set of weights",
         _check(_stack(3, share=True, prenorm=False, activation="gelu"), _x(), max_checks=48)),
    Case("nn.Stack GPT-3 banded", "2 layers: dense, window 2; ln_f",
         _check(_stack(2, final_norm=True, layer_masks=_alternate), _x(), causal=True, max_checks=32)),
    Case("nn.Stack decoder", "2 layers, dmemory summed", _check(_stack(2, cross_attention=True, final_norm=True),
                                                               _x(), _mem, causal=True, max_checks=24)),
    Case("nn.T5RelativeBias", "one table, 2 RMSNorm layers", _check(T5Stack, _x(), max_checks=32)),
    Case("nn.LearnedPositions", "offset 2 into a block", _check(PositionsBlock, _x())),
]
