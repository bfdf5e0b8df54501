"""A stack of N Transformer blocks, the body of GPT, BERT and T5.

- ``share=True``: cross-layer parameter sharing (ALBERT, Lan et al. 2020): every layer
  uses one set of weights. The N blocks hold the *same* arrays (``Module.tie``), each
  keeps its own forward cache, and the backward of every use adds into the one
  gradient, so dL/dW = sum over layers of that layer's contribution.
- ``layer_masks``: a mask per layer, AND-ed with the stack's ``mask`` (GPT-3, Brown et
  al. 2020: layers alternate dense and locally banded sparse attention, after Child et
  al. 2019). A list with one entry (or None) per layer, or a callable
  ``(layer_index, T, S) -> mask or None`` for masks that depend on the lengths.
- ``final_norm``: a norm after the last block (GPT-2's ``ln_f``, T5's final RMSNorm).
- Scaled residual init (GPT-2: c_proj std 0.02 / sqrt(2 N)) is the ``out_std`` the
  model passes through ``block_kwargs``.

A shared additive bias (T5's relative position bias, one table for all layers) gets the
sum of every layer's gradient on ``dattn_bias`` (and ``dcross_bias``) after backward.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..core.checks import check_positive_int
from ..core.module import Module
from .block import TransformerBlock, make_norm

LayerMasks = Sequence[np.ndarray | None] | Callable[[int, int, int], np.ndarray | None] | None


def _and(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    """AND two may-attend masks of shape (T, S), (B, T, S) or (B, 1, T, S)."""
    if a is None or b is None:
        return b if a is None else a
    if {a.ndim, b.ndim} == {3, 4}:                     # (B, T, S) vs (B, 1, T, S): align the head axis
        a, b = (a[:, None] if a.ndim == 3 else a), (b[:, None] if b.ndim == 3 else b)
    return a & b


class TransformerStack(Module):
    def __init__(self, n_layers: int, *, share: bool = False, final_norm: bool = False,
                 layer_masks: LayerMasks = None, **block_kwargs):
        super().__init__()
        check_positive_int("n_layers", n_layers)
        if "d_model" not in block_kwargs:
            raise TypeError("TransformerStack needs the block arguments d_model, n_heads, d_ff and rng")
        self._check_layer_masks(layer_masks, n_layers)
        self.n_layers, self.share, self.layer_masks = n_layers, share, layer_masks
        self.blocks = [TransformerBlock(**block_kwargs) for _ in range(n_layers)]
        self.has_cross = self.blocks[0].has_cross
        if share:                         # every block holds block 0's arrays: gradients add up
            first = dict(self.blocks[0].named_modules())
            for block in self.blocks[1:]:
                for name, mod in block.named_modules():
                    for key in mod.params:
                        mod.tie(key, first[name], key)
        if final_norm:
            self.ln_f = make_norm(block_kwargs.get("norm", "layer"), block_kwargs["d_model"],
                                  block_kwargs.get("eps", 1e-5), block_kwargs.get("dtype", np.float32))
        else:
            self.ln_f = None
        self.dattn_bias: np.ndarray | None = None
        self.dcross_bias: np.ndarray | None = None
        self._cached = False

    @staticmethod
    def _check_layer_masks(layer_masks: LayerMasks, n_layers: int) -> None:
        if layer_masks is None or callable(layer_masks):
            return
        if len(layer_masks) != n_layers:
            raise ValueError(f"layer_masks has {len(layer_masks)} entries for {n_layers} layers")

    def _layer_mask(self, layer_masks: LayerMasks, i: int, T: int, S: int) -> np.ndarray | None:
        if layer_masks is None:
            return None
        return layer_masks(i, T, S) if callable(layer_masks) else layer_masks[i]

    def forward(self, x: np.ndarray, memory: np.ndarray | None = None, *, mask: np.ndarray | None = None,
                causal: bool = False, attn_bias: np.ndarray | None = None, positions: np.ndarray | None = None,
                memory_mask: np.ndarray | None = None, cross_bias: np.ndarray | None = None, cache=None,
                layer_masks: LayerMasks = None) -> np.ndarray:
        """x (B, T, C) [, memory (B, S, C) for a decoder stack] -> (B, T, C).

        ``layer_masks`` here overrides the one given at construction (a model whose masks
        depend on T passes them per call); ``cache`` is a KVCache with one slot per layer.
        """
        if layer_masks is None:
            layer_masks = self.layer_masks
        self._check_layer_masks(layer_masks, self.n_layers)
        if cache is not None and len(cache) != self.n_layers:
            raise ValueError(f"cache has {len(cache)} layer slots for {self.n_layers} layers")
        if memory is not None and not self.has_cross:
            raise ValueError("this stack has no cross-attention; build it with cross_attention=True to pass memory")
        self._cached = cache is not None
        T = x.shape[1]
        S = T + (0 if cache is None else cache.length)
        kw = dict(causal=causal, attn_bias=attn_bias, positions=positions, memory_mask=memory_mask,
                  cross_bias=cross_bias)
        for i, block in enumerate(self.blocks):
            layer_mask = _and(mask, self._layer_mask(layer_masks, i, T, S))
            x = block(x, memory, mask=layer_mask, cache=None if cache is None else cache[i], **kw)
        return x if self.ln_f is None else self.ln_f(x)

    def backward(self, dy: np.ndarray):
        """dy (B, T, C) -> dx, or (dx, dmemory summed over layers) for a decoder stack."""
        if self._cached:
            raise RuntimeError("TransformerStack.backward after a KV-cached forward: the cache is for "
                               "inference only; run forward without a cache to train")
        if self.ln_f is not None:
            dy = self.ln_f.backward(dy)
        dmem = dbias = dcross = None
        add = lambda total, g: g if total is None else (total if g is None else total + g)
        for block in reversed(self.blocks):
            out = block.backward(dy)
            if self.has_cross:
                dy, dm = out
                dmem = add(dmem, dm)
            else:
                dy = out
            dbias, dcross = add(dbias, block.dattn_bias), add(dcross, block.dcross_bias)
        self.dattn_bias, self.dcross_bias = dbias, dcross
        return (dy, dmem) if self.has_cross else dy
