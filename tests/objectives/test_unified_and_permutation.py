import numpy as np
import pytest

from minipt.objectives import IGNORE
from minipt.objectives.permutation import glm_blank_infilling, permutation_lm
from minipt.objectives.unified import UNILM_MODES, mass, prefix_lm, unilm_example

MASK, SOS, EOS, START, END = 1, 2, 3, 4, 5


def within(count, n, p):
    return abs(count - n * p) <= 5 * np.sqrt(n * p * (1 - p))


def test_prefix_lm_mask_and_targets():
    x, y, m = prefix_lm(np.arange(10, 20), np.random.default_rng(0))
    split = int(m[0].sum())                         # the first row sees exactly the prefix
    assert m[:split, :split].all() and not m[:split, split:].any()
    assert (y[: split - 1] == IGNORE).all() and np.array_equal(y[split - 1:], np.arange(10, 20)[split:])


def test_unilm_mode_proportions_and_masks():
    rng = np.random.default_rng(0)
    counts = dict.fromkeys(UNILM_MODES, 0)
    for _ in range(3000):
        ex = unilm_example(np.arange(10, 14), np.arange(20, 23), rng, sos_id=SOS, eos_id=EOS, mask_id=MASK,
                           vocab_size=30)
        counts[ex["mode"]] += 1
        m = ex["mask"]
        if ex["mode"] == "seq2seq":
            assert not m[:6, 6:].any() and m[6:, :6].all()              # source never sees target
            assert (ex["targets"][:6] == IGNORE).all()
        elif ex["mode"] == "left_to_right":
            assert not np.triu(m, 1).any()
    for mode, p in zip(UNILM_MODES, (1 / 3, 1 / 3, 1 / 6, 1 / 6)):
        assert within(counts[mode], 3000, p), (mode, counts)


def test_mass_fragment():
    enc, dec, tgt, start = mass(np.arange(10, 20), np.random.default_rng(0), MASK)
    assert len(tgt) == 5 and (enc[start:start + 5] == MASK).all()
    assert dec[0] == MASK and np.array_equal(dec[1:], tgt[:-1])


def test_xlnet_masks_follow_the_sampled_order():
    out = permutation_lm(np.arange(10, 22), np.random.default_rng(0), K=4)
    rank = np.argsort(out["order"])
    for i in range(12):
        for j in range(12):
            assert out["content_mask"][i, j] == (rank[j] <= rank[i])
            assert out["query_mask"][i, j] == (rank[j] < rank[i])
    predicted = np.flatnonzero(out["targets"] != IGNORE)
    assert sorted(rank[predicted]) == [9, 10, 11]                     # the last 1/K of the order


def test_glm_parts_positions_and_mask():
    rng = np.random.default_rng(0)
    ids = np.arange(10, 50)
    for _ in range(50):
        ex = glm_blank_infilling(ids, rng, mask_id=MASK, start_id=START, end_id=END)
        n_a, seq, pos = ex["n_a"], ex["ids"], ex["positions"]
        assert (pos[1, :n_a] == 0).all() and np.array_equal(pos[0, :n_a], np.arange(n_a))
        starts = np.flatnonzero(seq[n_a:] == START) + n_a
        for s in starts:
            assert seq[pos[0, s]] == MASK and pos[1, s] == 1           # points at its [MASK]
        # filling each [MASK] with its span gives back the text
        spans = {}
        for k, s in enumerate(starts):
            e = starts[k + 1] if k + 1 < len(starts) else len(seq)
            spans[pos[0, s]] = seq[s + 1:e].tolist()
        rebuilt = [t for i, tok in enumerate(seq[:n_a]) for t in (spans[i] if tok == MASK else [tok])]
        assert rebuilt == ids.tolist()
        m = ex["mask"]
        assert m[:, :n_a].all() and not m[:n_a, n_a:].any() and not np.triu(m[n_a:, n_a:], 1).any()


def test_bad_input():
    with pytest.raises(ValueError, match="at least 3 tokens"):
        prefix_lm(np.arange(2), np.random.default_rng(0))
    with pytest.raises(ValueError, match="K must be"):
        permutation_lm(np.arange(5), np.random.default_rng(0), K=0)
