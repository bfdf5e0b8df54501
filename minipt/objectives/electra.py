"""ELECTRA's replaced token detection (Clark et al. 2020).

The generator is a small MLM trained on [MASK]ed positions (``mlm.mask_tokens`` with
replace_prob 1: ELECTRA masks 15 % and always uses [MASK]). Its samples fill those
positions to make the discriminator's input; the discriminator labels every token
1 = replaced, 0 = original. A sample equal to the original counts as original.
"""
from __future__ import annotations

import numpy as np

from .common import IGNORE
from .mlm import mask_tokens


def generator_inputs(ids, rng: np.random.Generator, *, mask_id: int, vocab_size: int, special_ids=(),
                     mask_prob: float = 0.15):
    return mask_tokens(ids, rng, mask_id=mask_id, vocab_size=vocab_size, special_ids=special_ids,
                       mask_prob=mask_prob, replace_prob=1.0, random_prob=0.0)


def discriminator_inputs(ids: np.ndarray, generator_targets: np.ndarray, samples: np.ndarray):
    """ids, generator targets (IGNORE where not masked) and generator samples, all (B, T)
    -> discriminator input ids and is-replaced labels (B, T)."""
    if not (ids.shape == generator_targets.shape == samples.shape):
        raise ValueError(f"shapes differ: ids {ids.shape}, targets {generator_targets.shape}, samples {samples.shape}")
    masked = generator_targets != IGNORE
    corrupted = np.where(masked, samples, ids)
    return corrupted, (corrupted != ids).astype(np.int64)
