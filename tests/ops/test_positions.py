import numpy as np
import pytest

from minipt.nn.positions import LearnedPositions, SinusoidalPositions
from minipt.ops.positions import (
    relative_position_bucket,
    rope_forward,
    sinusoidal_table,
    t5_bias_backward,
    t5_bias_forward,
)


def test_t5_buckets_by_hand():
    # bidirectional, 32 buckets: 16 per direction, 8 exact, log-spaced 8..15 up to 128
    rel = np.array([0, -1, -7, -8, -20, -127, -500, 1, 7, 8, 20])
    assert relative_position_bucket(rel, True).tolist() == [0, 1, 7, 8, 10, 15, 15, 17, 23, 24, 26]
    # causal: keys after the query share bucket 0; 16 exact buckets
    assert relative_position_bucket(np.array([3, 0, -1, -15, -16, -200]), False).tolist() == [0, 0, 1, 15, 16, 31]


def test_rope_preserves_norm_and_relative_dot_products():
    x = np.random.default_rng(0).standard_normal((1, 1, 1, 8))
    y = np.random.default_rng(1).standard_normal((1, 1, 1, 8))
    rot = lambda a, t: rope_forward(a, np.array([t]))[0]
    assert np.allclose(np.linalg.norm(rot(x, 5)), np.linalg.norm(x))
    assert np.isclose((rot(x, 7) * rot(y, 3)).sum(), (rot(x, 14) * rot(y, 10)).sum())   # depends on 7 - 3 only


def test_sinusoidal_table_values():
    pe = sinusoidal_table(4, 6, np.float64)
    assert pe[0, 0::2].tolist() == [0, 0, 0] and pe[0, 1::2].tolist() == [1, 1, 1]
    assert np.isclose(pe[3, 2], np.sin(3 / 10000 ** (2 / 6)))


def test_position_table_too_short():
    with pytest.raises(ValueError, match=r"sequence length 9 exceeds the position table \(8\)"):
        LearnedPositions(8, 4, rng=np.random.default_rng(0))(9)
    with pytest.raises(ValueError, match="exceeds"):
        SinusoidalPositions(8, 4)(5, offset=4)


@pytest.mark.parametrize("bidirectional,offset", [(True, 0), (False, 0), (False, 5)])
@pytest.mark.parametrize("kernels_on", [True, False])
def test_t5_bias_is_a_gather_and_its_gradient_a_scatter_add(bidirectional, offset, kernels_on, monkeypatch):
    """bias[h, i, j] = table[bucket(j - i - offset), h] (C-contiguous), and the gradient the
    sum of dbias over the pairs of each bucket, added in order as np.add.at adds them: the
    same bits with the Numba scatter kernel and with NumPy's."""
    from minipt import kernels
    if not kernels_on:
        monkeypatch.setattr(kernels, "get", lambda name: None)
    r = np.random.default_rng(0)
    T, S, H = 7, 11, 3
    table = r.standard_normal((16, H)).astype(np.float32)
    bias, cache = t5_bias_forward(table, T, S, bidirectional, offset, max_distance=20)
    buckets = relative_position_bucket(np.arange(S)[None] - (np.arange(T) + offset)[:, None], bidirectional, 16, 20)
    assert bias.shape == (H, T, S) and bias.flags.c_contiguous
    for h in range(H):
        for i in range(T):
            for j in range(S):
                assert bias[h, i, j] == table[buckets[i, j], h]
    dbias = r.standard_normal((2, H, T, S)).astype(np.float32)
    want = np.zeros_like(table)
    np.add.at(want, buckets, dbias.sum(axis=0).transpose(1, 2, 0))
    got = t5_bias_backward(dbias, cache)
    assert got.dtype == np.float32 and np.array_equal(got, want)
    assert t5_bias_forward(table, T, S, bidirectional, offset, max_distance=20)[1][0] is cache[0]   # computed once
    with pytest.raises(ValueError):
        cache[0][0, 0] = 1                                                # shared, so read-only
