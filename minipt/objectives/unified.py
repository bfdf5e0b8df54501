"""Objectives chosen by the attention mask: prefix LM (Raffel et al. 2020, T5 section
3.2.1), UniLM's mixture (Dong et al. 2019) and MASS (Song et al. 2019).

Masks are boolean "may attend" (T, T) arrays (minipt.nn.masks).
UniLM, per example: bidirectional (1/3), sequence-to-sequence (1/3), left-to-right
(1/6), right-to-left (1/6); cloze ([MASK]) prediction in every mode. The seq2seq layout
is ``[SOS] S [EOS] T [EOS]``: source tokens see the source, target tokens see the source
and the target to their left; only target tokens are masked for prediction.
"""
from __future__ import annotations

import numpy as np

from ..nn import masks
from .common import IGNORE, check_ids_array
from .mlm import mask_tokens

UNILM_MODES = ("bidirectional", "seq2seq", "left_to_right", "right_to_left")
UNILM_WEIGHTS = (1 / 3, 1 / 3, 1 / 6, 1 / 6)


def prefix_lm(ids, rng: np.random.Generator, min_prefix: int = 1):
    """ids (T,) -> inputs (T - 1,), targets with IGNORE on the prefix, (T - 1, T - 1) mask.
    The split point is uniform in [min_prefix, T - 1)."""
    ids = check_ids_array("ids", ids, 1)
    if len(ids) < min_prefix + 2:
        raise ValueError(f"prefix LM needs at least {min_prefix + 2} tokens, got {len(ids)}")
    split = int(rng.integers(min_prefix, len(ids) - 1))
    x, y = ids[:-1], ids[1:].copy()
    y[: split - 1] = IGNORE                               # predictions start at the first suffix token
    return x, y, masks.prefix(len(x), split)


def unilm_mask(mode: str, T: int, n_src: int | None = None) -> np.ndarray:
    """The (T, T) may-attend mask of a UniLM mode; ``n_src`` (the length of ``[SOS] S
    [EOS]``) is needed by seq2seq only."""
    if mode not in UNILM_MODES:
        raise ValueError(f"unknown mask mode {mode!r}; UniLM's modes are {', '.join(UNILM_MODES)}")
    if mode == "seq2seq":
        if n_src is None or not 0 < n_src < T:
            raise ValueError(f"seq2seq mask: the source length must be in [1, {T - 1}] for {T} tokens, got {n_src}")
        return masks.seq2seq(n_src, T - n_src)
    return {"bidirectional": masks.bidirectional, "left_to_right": masks.causal,
            "right_to_left": masks.right_to_left}[mode](T)


def unilm_mode(rng: np.random.Generator) -> str:
    """A mode drawn with UniLM's batch mix: 1/3 bidirectional, 1/3 seq2seq, 1/6 each way."""
    return UNILM_MODES[int(rng.choice(4, p=UNILM_WEIGHTS))]


def unilm_example(source, target, rng: np.random.Generator, *, sos_id: int, eos_id: int, mask_id: int,
                  vocab_size: int, special_ids=(), mask_prob: float = 0.15, mode: str | None = None):
    """One UniLM training example. Returns dict(mode, ids, segments, targets, mask).
    ``mode`` None draws one (``unilm_mode``); fine-tuning for generation gives "seq2seq"."""
    source = check_ids_array("source", source, 1)
    target = check_ids_array("target", target, 1)
    if mode is not None and mode not in UNILM_MODES:
        raise ValueError(f"unknown mask mode {mode!r}; UniLM's modes are {', '.join(UNILM_MODES)}")
    mode = unilm_mode(rng) if mode is None else mode
    ids = np.concatenate([[sos_id], source, [eos_id], target, [eos_id]]).astype(np.int64)
    n_src = len(source) + 2
    segments = np.concatenate([np.zeros(n_src), np.ones(len(target) + 1)]).astype(np.int64)
    T = len(ids)
    mask = unilm_mask(mode, T, n_src)
    specials = tuple(special_ids) + (sos_id, eos_id)
    inputs, targets = mask_tokens(ids, rng, mask_id=mask_id, vocab_size=vocab_size, special_ids=specials,
                                  mask_prob=mask_prob)
    if mode == "seq2seq":                                # predict target tokens only, [EOS] included
        keep = np.arange(T) >= n_src
        inputs = np.where(keep, inputs, ids)
        targets = np.where(keep, targets, IGNORE)
        final = T - 1
        if rng.random() < mask_prob:                     # the final [EOS] can be masked too
            inputs[final], targets[final] = mask_id, eos_id
    return {"mode": mode, "ids": inputs, "segments": segments, "targets": targets, "mask": mask}


def mass(ids, rng: np.random.Generator, mask_id: int, fragment: float = 0.5):
    """MASS: mask a contiguous fragment (``fragment`` of the length) in the encoder input;
    the decoder input is the fragment shifted right (its first token a [MASK]), and the
    target is the fragment. Returns encoder input, decoder input, target, start."""
    ids = check_ids_array("ids", ids, 1)
    if len(ids) < 2:
        raise ValueError(f"MASS needs at least 2 tokens, got {len(ids)}")
    k = max(1, int(round(len(ids) * fragment)))
    start = int(rng.integers(0, len(ids) - k + 1))
    enc = ids.copy()
    enc[start:start + k] = mask_id
    frag = ids[start:start + k]
    dec = np.concatenate([[mask_id], frag[:-1]]).astype(np.int64)
    return enc, dec, frag.copy(), start
