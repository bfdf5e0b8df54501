"""BERT's masked language model (Devlin et al. 2019, section 3.1 and appendix A.1).

15 % of the (non-special) positions are chosen; of those, 80 % become [MASK], 10 % a
random token, 10 % stay unchanged; the model predicts the original token at every chosen
position (targets elsewhere are IGNORE). BERT computed masks once and reused each of
``dup_factor`` copies (static masking); RoBERTa (Liu et al. 2019) draws a new mask every
time a sequence is served (dynamic masking).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.checks import check_positive_int
from .common import IGNORE, check_ids_array, check_probability


def mask_tokens(ids, rng: np.random.Generator, *, mask_id: int, vocab_size: int, special_ids=(),
                mask_prob: float = 0.15, replace_prob: float = 0.8, random_prob: float = 0.1,
                random_ids=None) -> tuple[np.ndarray, np.ndarray]:
    """ids (B, T) or (T,) -> (inputs, targets) of the same shape. ``random_ids`` are the
    ids a random replacement draws from (default: every id that is not special)."""
    ids = check_ids_array("ids", ids)
    check_probability("mask_prob", mask_prob)
    check_probability("replace_prob", replace_prob)
    check_probability("random_prob", random_prob)
    if replace_prob + random_prob > 1.0:
        raise ValueError(f"replace_prob + random_prob must be <= 1, got {replace_prob + random_prob}")
    if not 0 <= mask_id < vocab_size:
        raise ValueError(f"mask_id {mask_id} is outside the vocabulary [0, {vocab_size})")
    special = np.isin(ids, np.asarray(list(special_ids) + [mask_id], dtype=np.int64))
    if random_ids is None:
        random_ids = np.setdiff1d(np.arange(vocab_size), list(special_ids) + [mask_id])
    random_ids = np.asarray(random_ids, dtype=np.int64)
    if random_prob and random_ids.size == 0:
        raise ValueError("no ordinary ids to draw random replacements from")
    chosen = (rng.random(ids.shape) < mask_prob) & ~special                    # (B, T)
    action = rng.random(ids.shape)                                             # which of 80/10/10
    to_mask = chosen & (action < replace_prob)
    to_random = chosen & (action >= replace_prob) & (action < replace_prob + random_prob)
    inputs = ids.copy()
    inputs[to_mask] = mask_id
    if to_random.any():
        inputs[to_random] = random_ids[rng.integers(0, random_ids.size, int(to_random.sum()))]
    targets = np.where(chosen, ids, IGNORE)
    return inputs, targets


def static_masks(ids, rng: np.random.Generator, dup_factor: int = 10, **kw) -> list[tuple[np.ndarray, np.ndarray]]:
    """BERT's static masking: ``dup_factor`` differently masked copies, made once."""
    check_positive_int("dup_factor", dup_factor)
    return [mask_tokens(ids, rng, **kw) for _ in range(dup_factor)]


@dataclass
class DynamicMasking:
    """RoBERTa's dynamic masking: ``batch(ids, rng)`` masks afresh on every call."""
    mask_id: int
    vocab_size: int
    special_ids: tuple = ()
    mask_prob: float = 0.15

    def batch(self, ids, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return mask_tokens(ids, rng, mask_id=self.mask_id, vocab_size=self.vocab_size,
                           special_ids=self.special_ids, mask_prob=self.mask_prob)
