"""A stack of Transformer blocks, with optional cross-layer parameter sharing (ALBERT,
Lan et al. 2020), per-layer masks (GPT-3's alternating dense and locally banded layers,
Brown et al. 2020) and a final norm (GPT-2's ln_f)."""
from __future__ import annotations

import numpy as np

from ..core.module import Module
from .block import TransformerBlock, make_norm


class TransformerStack(Module):
    def __init__(self, n_layers: int, *, share: bool = False, final_norm: bool = False, **block_kwargs):
        super().__init__()
        if n_layers < 1:
            raise ValueError(f"n_layers must be >= 1, got {n_layers}")
        self.blocks = [TransformerBlock(**block_kwargs) for _ in range(n_layers)]
        self.has_cross = self.blocks[0].has_cross
        if share:                         # every block uses block 0's arrays: gradients add up
            for block in self.blocks[1:]:
                for (_, mine), (_, first) in zip(block.named_modules(), self.blocks[0].named_modules()):
                    for key in mine.params:
                        mine.tie(key, first, key)
        self.ln_f = make_norm(block_kwargs.get("norm", "layer"), block_kwargs["d_model"],
                              block_kwargs.get("eps", 1e-5), block_kwargs.get("dtype", np.float32)) \
            if final_norm else None

    def forward(self, x: np.ndarray, memory: np.ndarray | None = None, *, layer_masks=None, cache=None,
                **kwargs) -> np.ndarray:
        """x (B, T, C) [, memory (B, S, C) for decoder stacks] -> (B, T, C). ``layer_masks[i]``, when not None, is layer i's mask
        (combined with ``causal``); ``cache`` is a KVCache with one slot per layer."""
        if layer_masks is not None and len(layer_masks) != len(self.blocks):
            raise ValueError(f"layer_masks has {len(layer_masks)} entries for {len(self.blocks)} layers")
        for i, block in enumerate(self.blocks):
            kw = dict(kwargs)
            if layer_masks is not None and layer_masks[i] is not None:
                kw["mask"] = layer_masks[i]
            if self.has_cross:
                kw["memory"] = memory
            x = block(x, cache=None if cache is None else cache[i], **kw)
        return self.ln_f(x) if self.ln_f is not None else x

    def backward(self, dy: np.ndarray):
        """dy (B, T, C) -> dx, or (dx, dmemory summed over layers) with cross-attention."""
        if self.ln_f is not None:
            dy = self.ln_f.backward(dy)
        dmem = None
        for block in reversed(self.blocks):
            out = block.backward(dy)
            if self.has_cross:
                dy, dm = out
                dmem = dm if dmem is None else dmem + dm
            else:
                dy = out
        return (dy, dmem) if self.has_cross else dy
