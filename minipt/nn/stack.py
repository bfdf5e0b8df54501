"""A stack of N Transformer blocks, the body of GPT, BERT and T5.

- ``share=True`` (or ``"all"``): cross-layer parameter sharing (ALBERT, Lan et al. 2020):
  every layer uses one set of weights. The N blocks hold the *same* arrays
  (``Module.tie``), each keeps its own forward cache, and the backward of every use adds
  into the one gradient, so dL/dW = sum over layers of that layer's contribution.
  ``"attention"`` shares only the attention sub-layer (``attn.*``), ``"ffn"`` only the
  feed-forward one (``mlp.*``): ALBERT's ablation (table 4); the LayerNorms stay per
  layer in those two modes. ``tie_layers(mode)`` does it after construction too.
- ``layer_masks``: a mask per layer, AND-ed with the stack's ``mask`` (GPT-3, Brown et
  al. 2020: layers alternate dense and locally banded sparse attention, after Child et
  al. 2019). A list with one entry (or None) per layer, or a callable
  ``(layer_index, T, S) -> mask or None`` for masks that depend on the lengths.
- ``final_norm``: a norm after the last block (GPT-2's ``ln_f``, T5's final RMSNorm).
- Scaled residual init (GPT-2: c_proj std 0.02 / sqrt(2 N)) is the ``out_std`` the
  model passes through ``block_kwargs``.

A shared additive bias (T5's relative position bias, one table for all layers) gets the
sum of every layer's gradient: ``backward`` returns a ``BlockGrads`` whose ``dattn_bias``
(and ``dcross_bias``) are summed over layers, as ``dmemory`` is.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..core.checks import check_positive_int
from ..core.module import Module
from ..kernels.threads import cut
from . import batch_parts, masks
from .attention import MultiHeadAttention
from .block import BlockGrads, TransformerBlock, make_norm
from .dropout import Dropout

LayerMasks = Sequence[np.ndarray | None] | Callable[[int, int, int], np.ndarray | None] | None


class TransformerStack(Module):
    def __init__(self, n_layers: int, *, share: bool | str = False, final_norm: bool = False,
                 layer_masks: LayerMasks = None, **block_kwargs):
        super().__init__()
        check_positive_int("n_layers", n_layers)
        if "d_model" not in block_kwargs:
            raise TypeError("TransformerStack needs the block arguments d_model, n_heads, d_ff and rng")
        self._check_layer_masks(layer_masks, n_layers)
        self.n_layers, self.share, self.layer_masks = n_layers, share, layer_masks
        self.blocks = [TransformerBlock(**block_kwargs) for _ in range(n_layers)]
        self.has_cross = self.blocks[0].has_cross
        if share:
            self.tie_layers(share)
        if final_norm:
            self.ln_f = make_norm(block_kwargs.get("norm", "layer"), block_kwargs["d_model"],
                                  block_kwargs.get("eps", 1e-5), block_kwargs.get("dtype", np.float32))
        else:
            self.ln_f = None
        self._cached = False
        self._replicas: dict = {}             # parts (threads) or ("processes", parts) -> replicas of parts 1..;
                                              # not children (batch_parts.replicas)
        self._drawers = None                  # name -> Dropout or attention module, on first use (a dict:
                                              # not children)
        self._split = None                    # the last forward's parts: (slices, replicas, batched bias, memory)

    SHARE_MODES = {"all": "", "attention": "attn", "ffn": "mlp"}   # mode -> module-name prefix shared

    def tie_layers(self, mode: bool | str = "all") -> None:
        """Make blocks 1..N-1 hold block 0's arrays (all of them, or those of ``attn`` or
        ``mlp``), so every layer's backward adds into one gradient."""
        mode = "all" if mode is True else mode
        if mode not in self.SHARE_MODES:
            raise ValueError(f"share must be one of {', '.join(self.SHARE_MODES)} (or True), got {mode!r}")
        prefix = self.SHARE_MODES[mode]
        first = dict(self.blocks[0].named_modules())
        for block in self.blocks[1:]:      # every block holds block 0's arrays: gradients add up
            for name, mod in block.named_modules():
                if name == prefix or name.startswith(prefix + ".") or not prefix:
                    for key in mod.params:
                        mod.tie(key, first[name], key)
        self.share = mode

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
        self._cached, self._split = cache is not None, None
        parts = self._parts(x.shape[0], cache, layer_masks)
        kw = dict(mask=mask, causal=causal, attn_bias=attn_bias, positions=positions, memory_mask=memory_mask,
                  cross_bias=cross_bias, layer_masks=layer_masks)
        if parts > 1:
            return self._forward_parts(parts, x, memory, **kw)
        return self._forward_blocks(x, memory, cache=cache, **kw)

    def _forward_blocks(self, x, memory, *, mask, layer_masks, cache=None, **kw) -> np.ndarray:
        """The blocks (and the final norm) in turn on the whole of x (B, T, C)."""
        T = x.shape[1]
        S = T + (0 if cache is None else cache.length)
        for i, block in enumerate(self.blocks):
            layer_mask = masks.combine(mask, self._layer_mask(layer_masks, i, T, S))
            x = block(x, memory, mask=layer_mask, cache=None if cache is None else cache[i], **kw)
        return x if self.ln_f is None else self.ln_f(x)

    def backward(self, dy: np.ndarray) -> BlockGrads:
        """dy (B, T, C) -> BlockGrads(dx, dmemory, dattn_bias, dcross_bias), the last three
        summed over layers (None where no layer has them)."""
        if self._cached:
            raise RuntimeError("TransformerStack.backward after a KV-cached forward: the cache is for "
                               "inference only; run forward without a cache to train")
        if self._split is not None:
            return self._backward_parts(dy)
        return self._backward_blocks(dy)

    def _backward_blocks(self, dy: np.ndarray) -> BlockGrads:
        """The backward of ``_forward_blocks``."""
        if self.ln_f is not None:
            dy = self.ln_f.backward(dy)
        add = lambda total, g: g if total is None else (total if g is None else total + g)
        dmem = dbias = dcross = None
        for block in reversed(self.blocks):
            g = block.backward(dy)
            dy = g.dx
            dmem, dbias, dcross = add(dmem, g.dmemory), add(dbias, g.dattn_bias), add(dcross, g.dcross_bias)
        return BlockGrads(dy, dmem, dbias, dcross)

    # -- the batch in parts on threads (minipt.nn.batch_parts) ----------------------------
    def _parts(self, B: int, cache, layer_masks: LayerMasks) -> int:
        """How many parts this forward's batch is cut into: 1 (whole) unless the setting
        asks for more and nothing ties the rows together or draws random numbers."""
        parts = batch_parts.batch_parts()
        if parts == 1 or B < parts or cache is not None:
            return 1
        if layer_masks is not None and not callable(layer_masks) and any(
                m is not None and m.ndim >= 3 for m in layer_masks):
            return 1
        if self._drawers is None:             # the modules that may draw random numbers or record
            self._drawers = {n: m for n, m in self.named_modules() if isinstance(m, (Dropout, MultiHeadAttention))}
        for mod in self._drawers.values():
            if isinstance(mod, MultiHeadAttention) and (mod.record or (self.training and mod.dropout > 0)) or (
                    self.training and isinstance(mod, Dropout) and mod.p > 0):
                return 1
        return parts

    def _forward_parts(self, parts: int, x, memory, **kw) -> np.ndarray:
        """x (B, T, C) [, memory (B, S, C)] in ``parts`` row slices, part 0 on this stack and
        the others on its replicas (threads or processes, ``batch_parts.replicas``), side
        by side -> (B, T, C)."""
        B = x.shape[0]
        slices, reps = cut(B, parts), batch_parts.replicas(self, parts)
        ys = reps.forward(self, x, memory, kw, slices)
        self._split = (slices, reps, batch_parts.batched("attn_bias", kw["attn_bias"], B),
                       batch_parts.batched("cross_bias", kw["cross_bias"], B))
        return np.concatenate(ys, axis=0)                                   # (B, T, C)

    def _backward_parts(self, dy: np.ndarray) -> BlockGrads:
        """The backward of ``_forward_parts``: each part's on its replica, side by side; the
        replicas' parameter gradients are added into this stack's."""
        (slices, reps, bias_rows, cross_rows), self._split = self._split, None
        grads = reps.backward(self, dy, slices)
        return BlockGrads(np.concatenate([g.dx for g in grads], axis=0),          # (B, T, C)
                          batch_parts.join([g.dmemory for g in grads], True),
                          batch_parts.join([g.dattn_bias for g in grads], bias_rows),
                          batch_parts.join([g.dcross_bias for g in grads], cross_rows))
