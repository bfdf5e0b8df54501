"""Objectives: rates checked over many seeded draws against 5-sigma binomial bounds,
reconstruction checked exactly."""
import numpy as np
import pytest

from minipt.objectives import (
    IGNORE,
    DynamicMasking,
    mask_tokens,
    pack_documents,
    random_spans_noise_mask,
    span_corruption,
    static_masks,
)

V, MASK, CLS, SEP = 100, 3, 1, 2


def within(count, n, p):
    return abs(count - n * p) <= 5 * np.sqrt(n * p * (1 - p))


def test_mlm_rates_and_80_10_10():
    rng = np.random.default_rng(0)
    ids = rng.integers(4, V, (500, 64))
    ids[:, 0], ids[:, -1] = CLS, SEP
    inputs, targets = mask_tokens(ids, rng, mask_id=MASK, vocab_size=V, special_ids=(0, CLS, SEP))
    chosen = targets != IGNORE
    ordinary = ids.size - 2 * 500
    assert within(chosen.sum(), ordinary, 0.15)
    assert not chosen[:, [0, -1]].any()                       # specials never chosen
    assert np.array_equal(targets[chosen], ids[chosen])       # targets are the originals
    n = int(chosen.sum())
    as_mask = (inputs[chosen] == MASK).sum()
    unchanged = (inputs[chosen] == ids[chosen]).sum()
    n_random_ids = V - 4                                      # ids 4..99 (0, 1, 2 special, 3 mask)
    p_unchanged = 0.1 + 0.1 / n_random_ids                    # kept, or a random draw of itself
    assert within(as_mask, n, 0.8) and within(unchanged, n, p_unchanged)
    assert not np.isin(inputs[chosen & (inputs != MASK)], [0, CLS, SEP]).any()   # random ids are ordinary
    assert np.array_equal(inputs[~chosen], ids[~chosen])


def test_static_copies_differ_dynamic_redraws_and_seed_replays():
    ids = np.random.default_rng(1).integers(4, V, (4, 32))
    kw = dict(mask_id=MASK, vocab_size=V, special_ids=(0, CLS, SEP))
    copies = static_masks(ids, np.random.default_rng(2), dup_factor=3, **kw)
    assert len(copies) == 3 and not np.array_equal(copies[0][1], copies[1][1])
    dyn = DynamicMasking(MASK, V, (0, CLS, SEP))
    rng = np.random.default_rng(3)
    a, b = dyn.batch(ids, rng), dyn.batch(ids, rng)
    assert not np.array_equal(a[1], b[1])
    again = mask_tokens(ids, np.random.default_rng(3), **kw)
    assert np.array_equal(again[0], a[0]) and np.array_equal(again[1], a[1])


def reconstruct(inputs, targets, sentinels):
    """Put each sentinel's span back where the sentinel stands in the input."""
    spans, current = {}, None
    for t in targets:
        if t in sentinels:
            current = t
            spans[current] = []
        else:
            spans[current].append(t)
    out = []
    for t in inputs:
        out.extend(spans[t] if t in sentinels else [t])
    return out


def test_t5_span_corruption_reconstructs_and_has_the_rates():
    rng = np.random.default_rng(0)
    sentinels = list(range(1000, 1100))
    lengths, noise = [], []
    for _ in range(300):
        ids = rng.integers(0, 500, 100)
        inputs, targets = span_corruption(ids, rng, sentinels)
        assert reconstruct(inputs, targets, set(sentinels)) == ids.tolist()
        used = [t for t in targets if t in sentinels]
        assert used == sentinels[:len(used)] and targets[-1] == used[-1]
        mask = random_spans_noise_mask(100, rng)
        starts = np.flatnonzero(mask & ~np.concatenate([[False], mask[:-1]]))
        lengths.append(mask.sum() / len(starts))
        noise.append(mask.mean())
    assert np.allclose(noise, 0.15) and abs(np.mean(lengths) - 3.0) < 0.01   # 15 tokens in 5 spans


def test_pack_documents():
    x, y = pack_documents([[5, 6, 7], [8, 9]], eot_id=0, block_size=3)
    assert x.tolist() == [[5, 6, 7], [0, 8, 9]] and y.tolist() == [[6, 7, 0], [8, 9, 0]]


def test_bad_input():
    with pytest.raises(ValueError, match="empty"):
        mask_tokens(np.zeros((0,), np.int64), np.random.default_rng(0), mask_id=MASK, vocab_size=V)
    with pytest.raises(ValueError, match="mask_prob"):
        mask_tokens(np.ones(5, np.int64), np.random.default_rng(0), mask_id=MASK, vocab_size=V, mask_prob=1.5)
    with pytest.raises(ValueError, match="mask_id 100"):
        mask_tokens(np.ones(5, np.int64), np.random.default_rng(0), mask_id=100, vocab_size=V)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        span_corruption(np.ones(1, np.int64), np.random.default_rng(0), [7, 8])
    with pytest.raises(ValueError, match="sentinel ids"):
        span_corruption(np.arange(200), np.random.default_rng(0), [1000, 1001])
    with pytest.raises(ValueError, match="one block needs 11"):
        pack_documents([[1, 2]], eot_id=0, block_size=10)
    with pytest.raises(TypeError, match="integer"):
        pack_documents([[1.0, 2.0]], eot_id=0, block_size=1)
