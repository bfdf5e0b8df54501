"""Gradcheck cases: multi-head attention, Transformer blocks and stacks (float64)."""
import numpy as np

from ..core.gradcheck import check_module
from ..core.module import Module
from ..nn import masks
from ..nn.attention import MultiHeadAttention
from ..nn.block import TransformerBlock
from ..nn.positions import T5RelativeBias
from ..nn.stack import TransformerStack
from . import Case

B, T, S, C, H = 2, 4, 3, 8, 2
rng = np.random.default_rng


def _x(shape=(B, T, C), seed=0):
    return rng(seed).standard_normal(shape)


def _randomise(m, seed=1):
    """Non-trivial gains and biases, and weights large enough to make attention peaky."""
    r = rng(seed)
    for _, p in m.named_parameters():
        p[...] = r.standard_normal(p.shape) * 0.5
    return m


def _check(make, *inputs, **forward_kwargs):
    return lambda: check_module(_randomise(make().to(np.float64)), *inputs, forward_kwargs=forward_kwargs)


def _block(**kw):
    return lambda: TransformerBlock(C, H, 12, rng=rng(0), **kw)


class T5Block(Module):
    """A T5 relative bias table feeding a block: the table's gradient flows back."""
    def __init__(self):
        super().__init__()
        self.rel = T5RelativeBias(H, bidirectional=False, num_buckets=6, max_distance=8, rng=rng(0))
        self.block = TransformerBlock(C, H, 12, rng=rng(1), norm="rms", bias=False, activation="relu")

    def forward(self, x):
        return self.block(x, causal=True, attn_bias=self.rel(x.shape[1]))

    def backward(self, dy):
        dx = self.block.backward(dy)
        self.rel.backward(self.block.attn.dbias)
        return dx


_pad = masks.padding(np.array([4, 2]), T)
CASES = [
    Case("nn.MHA self causal", "x (2,4,8) H 2", _check(lambda: MultiHeadAttention(C, H, rng=rng(0)), _x(), causal=True)),
    Case("nn.MHA self padding", "key padding (B,1,T)", _check(lambda: MultiHeadAttention(C, H, rng=rng(0)), _x(), mask=_pad)),
    Case("nn.MHA rope", "causal, RoPE", _check(lambda: MultiHeadAttention(C, H, rng=rng(0), rope=True, bias=False),
                                              _x(), causal=True, positions=np.arange(T))),
    Case("nn.MHA cross", "x (2,4,8) memory (2,3,8)",
         _check(lambda: MultiHeadAttention(C, H, rng=rng(0), cross=True), _x(), _x((B, S, C), 1))),
    Case("nn.Block pre-LN gelu", "GPT-2 style, causal", _check(_block(), _x(), causal=True)),
    Case("nn.Block post-LN gelu", "GPT-1/BERT style",
         _check(_block(prenorm=False, activation="gelu"), _x(), mask=_pad)),
    Case("nn.Block rms swiglu rope", "LLaMA style", _check(_block(norm="rms", activation="swiglu", bias=False, rope=True),
                                                          _x(), causal=True, positions=np.arange(T))),
    Case("nn.Block dropout", "residual + attention p 0.2", _check(_block(dropout=0.2), _x(), causal=True)),
    Case("nn.Block decoder", "self + cross, memory (2,3,8)",
         _check(_block(cross_attention=True), _x(), _x((B, S, C), 1), causal=True)),
    Case("nn.Block decoder post-LN", "self + cross",
         _check(_block(cross_attention=True, prenorm=False), _x(), _x((B, S, C), 1), causal=True)),
    Case("nn.Stack shared (ALBERT)", "3 layers, one set of weights",
         _check(lambda: TransformerStack(3, share=True, d_model=C, n_heads=H, d_ff=12, rng=rng(0), prenorm=False), _x())),
    Case("nn.Stack GPT-3 banded", "2 layers, dense + window 2, ln_f",
         _check(lambda: TransformerStack(2, final_norm=True, d_model=C, n_heads=H, d_ff=12, rng=rng(0)), _x(),
                causal=True, layer_masks=[None, masks.banded(T, 2)])),
    Case("nn.T5RelativeBias", "through an RMSNorm block", _check(T5Block, _x())),
]
