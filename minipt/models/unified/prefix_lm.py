"""The prefix LM: one decoder stack whose first ``prefix_len`` positions see each other
fully and whose rest is causal (Raffel et al. 2020, "Exploring the Limits of Transfer
Learning with a Unified Text-to-Text Transformer", T5, Sec. 3.2.1 and Fig. 3-4; the
sequence-to-sequence mask of UniLM, Dong et al. 2019, made an architecture).

A decoder-only Transformer (GPT-2's layout: token + learned position embeddings, pre-LN
blocks, a final LayerNorm, output tied to the token embedding; ``models/decoder/gpt.py``)
whose may-attend mask is, for a row with prefix length p,

    M_ij = 1  if j < p  or  j <= i,

so the prefix (the input of a text-to-text task) is read bidirectionally, like an
encoder, by the same parameters that then continue it left to right. Training puts the
loss on the positions after the prefix (``objectives.unified.prefix_lm``); with
``prefix_len`` 0 it is GPT. With a KV cache the prompt is fed once as the prefix and each
new token attends to everything before it: the mask's rows for positions P..P+t-1 over
keys 0..P+t-1 are the same formula, so cached decoding equals re-reading (tested).

Parameters: GPT-2's (``models/decoder/gpt.py``'s table): wte.weight (V, C), wpe.weight
(T, C), h.blocks.i.* (pre-LN blocks), h.ln_f.* (C,).
"""
from __future__ import annotations

import numpy as np

from ...core.checks import check_ids, check_ndim
from ...nn.kv_cache import KVCache
from ...ops.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ...ops.linear import linear_forward
from ..decoder.gpt import GPT, GPTConfig, perturbed
from ..protocol import IGNORE
from ..registry import GradcheckCase, ModelEntry, register
from .common import HiddenProbe


def prefix_mask(prefix_len, B: int, T: int, start: int = 0) -> np.ndarray:
    """prefix_len: an int or (B,) ints in [0, start + T] -> may-attend (B, T, start + T) for
    the queries at positions start..start+T-1: key j is seen when j < p or j <= i."""
    p = np.broadcast_to(np.asarray(prefix_len), (B,)) if np.ndim(prefix_len) == 0 else np.asarray(prefix_len)
    if not np.issubdtype(p.dtype, np.integer) or p.shape != (B,):
        raise ValueError(f"prefix_len: expected an int or {B} ints (one per row), got {np.asarray(prefix_len)!r}")
    S = start + T
    if (p < 0).any() or (p > S).any():
        raise ValueError(f"prefix_len {p.tolist()} is longer than the sequence of {S} tokens (or negative): "
                         f"each prefix must be in [0, {S}]")
    i, j = np.arange(start, S)[:, None], np.arange(S)[None, :]                   # (T, 1), (1, S)
    return (j[None] < p[:, None, None]) | (j <= i)[None]                         # (B, T, S)


class PrefixLM(GPT):
    """``loss, logits = model(idx, targets, prefix_len)``; the rest of the protocol is GPT's."""

    def embed(self, idx: np.ndarray, offset: int = 0) -> np.ndarray:
        """ids (B, T) at positions offset.. -> Drop(W_e[idx] + W_p[offset:offset + T]) (B, T, C)."""
        c = self.config
        check_ndim("idx", idx, 2)
        check_ids("idx", idx, c.vocab_size)
        if offset + idx.shape[1] > c.block_size:
            raise ValueError(f"sequence length {offset + idx.shape[1]} exceeds the context (block_size {c.block_size})")
        return self.drop(self.wte(idx) + self.wpe(idx.shape[1], offset))        # (B, T, C)

    def hidden(self, idx: np.ndarray, cache: KVCache | None = None, prefix_len=0) -> np.ndarray:
        offset = 0 if cache is None else cache.length
        x = self.embed(idx, offset)                                              # (B, T, C)
        return self.h(x, mask=prefix_mask(prefix_len, *idx.shape, offset), cache=cache)   # (B, T, C)

    def forward(self, idx: np.ndarray, targets: np.ndarray | None = None, prefix_len=0, *,
                cache: KVCache | None = None):
        """idx (B, T) [, targets (B, T), prefix_len int or (B,)] -> loss (or None), logits (B, T, V)."""
        x = self.embed(idx, 0 if cache is None else cache.length)               # (B, T, C)
        return self.forward_embedded(x, targets, prefix_len, cache=cache)

    def forward_embedded(self, x: np.ndarray, targets=None, prefix_len=0, *, cache: KVCache | None = None):
        """The same from embedded inputs x (B, T, C): the stack, the tied output layer, the loss."""
        B, T, _ = x.shape
        offset = 0 if cache is None else cache.length
        h = self.h(x, mask=prefix_mask(prefix_len, B, T, offset), cache=cache)   # (B, T, C)
        logits, lin_cache = linear_forward(h, self.head_weight()[0], None)       # (B, T, V)
        loss = ce_cache = None
        if targets is not None:
            if np.shape(targets) != (B, T):
                raise ValueError(f"targets: expected shape {(B, T)}, got {np.shape(targets)}")
            loss, ce_cache = cross_entropy_forward(logits, targets)
        self._cache = (lin_cache, ce_cache)
        return loss, logits

    def backward_embedded(self, dloss: float = 1.0) -> np.ndarray:
        """Back through the loss, the output layer and the stack; returns dx (B, T, C)."""
        lin_cache, ce_cache = self._cache
        if ce_cache is None:
            raise RuntimeError("backward needs a forward with targets")
        return self.h.backward(self.backward_head(cross_entropy_backward(dloss, ce_cache), lin_cache)).dx


# -- registry entry -------------------------------------------------------------------
TINY = dict(vocab_size=7, block_size=6, n_layer=2, n_head=2, d_model=8)


def build(*, rng: np.random.Generator, dtype=np.float32, **settings) -> PrefixLM:
    settings = {"positions": "learned", **settings}
    if settings["positions"] != "learned":
        raise ValueError("the prefix LM uses learned positions (GPT-2's layout)")
    return PrefixLM(GPTConfig.gpt2(**settings), rng=rng, dtype=dtype, name="prefixlm")


def tiny_model(seed: int = 0) -> PrefixLM:
    return perturbed(build(rng=np.random.default_rng(seed), dtype=np.float64, **TINY), seed=seed + 1)


def tiny_prefix_batch():
    """idx (2, 6), prefixes of 3 and 2 tokens, targets (the next token) after them."""
    idx = np.array([[1, 2, 3, 4, 5, 6], [6, 0, 1, 1, 2, 5]])
    targets = np.array([[IGNORE, IGNORE, 4, 5, 6, 0], [IGNORE, 1, 1, 2, 5, 3]])
    return idx, targets, np.array([3, 2])


def tiny():
    """A float64 model and (idx, targets): without a prefix it is GPT (the protocol's LM)."""
    idx, targets, _ = tiny_prefix_batch()
    return tiny_model(), (idx, targets)


def check_prefix():
    """Whole model in float64 with per-row prefixes: every parameter (tied output
    included), then the input of the stack."""
    from ...core.gradcheck import check_module
    model, (idx, targets, prefix_len) = tiny_model(seed=2), tiny_prefix_batch()
    result = check_module(model, idx, targets, prefix_len, select=lambda out: out[0], max_checks=8)
    probe = HiddenProbe(model, forward="forward_embedded", backward="backward_embedded")
    inputs = check_module(probe, model.embed(idx), targets, prefix_len, max_checks=8)
    result.arrays.extend(a for a in inputs.arrays if a.kind == "input")
    return result


register(ModelEntry(
    name="prefixlm", title="Prefix LM", paper="Raffel et al. 2020, Exploring the Limits of Transfer Learning "
    "with a Unified Text-to-Text Transformer (Sec. 3.2.1)", objective="LM after a fully visible prefix",
    build=build, tiny=tiny, lesson="21_unilm_prefix_lm", presets="minipt.recipes.unified.PREFIX_PRESETS",
    recipe="minipt.recipes.unified.train_unified",
    gradchecks=(GradcheckCase("Prefix LM with prefixes", "per-row prefix 3 and 2, input + params", check_prefix),)))
