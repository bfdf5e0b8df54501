"""Position modules: learned table (offsets, gradient rows, too-long sequences),
sinusoidal table, T5 relative bias (values, scatter-add backward, cached offsets)."""
import numpy as np
import pytest

from minipt.nn.positions import LearnedPositions, SinusoidalPositions, T5RelativeBias
from minipt.ops.positions import relative_position_bucket

H = 3


def test_learned_positions_rows_and_gradient():
    wpe = LearnedPositions(8, 4, rng=np.random.default_rng(0), dtype=np.float64)
    W = wpe.params["weight"]
    np.testing.assert_array_equal(wpe(3, offset=2), W[2:5])
    dy = np.random.default_rng(1).standard_normal((5, 3, 4))                 # (B, T, C)
    wpe.backward(dy)
    np.testing.assert_allclose(wpe.grads["weight"][2:5], dy.sum(0), rtol=0, atol=1e-15)
    assert not np.any(wpe.grads["weight"][[0, 1, 5, 6, 7]])
    wpe.backward(dy[0])                                                      # (T, C) also accepted; accumulates
    np.testing.assert_allclose(wpe.grads["weight"][2:5], dy.sum(0) + dy[0], rtol=0, atol=1e-15)
    out = wpe(2)
    out[...] = 0                                                             # a copy: the table is untouched
    assert np.any(W[:2])


def test_learned_positions_is_an_undecayed_embedding():
    wpe = LearnedPositions(8, 4, rng=np.random.default_rng(0))
    assert list(wpe.parameters()) == ["weight"] and wpe.no_weight_decay


def test_sequence_longer_than_the_table():
    wpe = LearnedPositions(8, 4, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"sequence length 9 exceeds the position table \(8\)"):
        wpe(9)
    with pytest.raises(ValueError, match=r"sequence length 10 exceeds the position table \(8\)"):
        wpe(3, offset=7)
    with pytest.raises(ValueError, match=r"sequence length 6 exceeds the position table \(5\)"):
        SinusoidalPositions(5, 4)(2, offset=4)
    with pytest.raises(ValueError, match="T >= 1"):
        wpe(0)
    wpe(2)
    with pytest.raises(ValueError, match=r"dy: expected \(B, 2, 4\)"):
        wpe.backward(np.zeros((1, 3, 4), np.float32))


def test_sinusoidal_positions_have_no_parameters_and_match_the_formula():
    pe = SinusoidalPositions(10, 6, dtype=np.float64)
    assert pe.num_parameters() == 0
    out = pe(4, offset=3)
    t, i = 5, 1                                                              # row 2 is position 5
    np.testing.assert_allclose(out[2, 2 * i], np.sin(t / 10000 ** (2 * i / 6)), atol=1e-15)
    np.testing.assert_allclose(out[2, 2 * i + 1], np.cos(t / 10000 ** (2 * i / 6)), atol=1e-15)
    assert pe.backward(np.ones((4, 6))) is None


def test_t5_bias_values_are_table_rows_by_bucket():
    rel = T5RelativeBias(H, bidirectional=True, num_buckets=8, max_distance=12, rng=np.random.default_rng(0),
                         dtype=np.float64)
    bias = rel(4, 6)
    assert bias.shape == (H, 4, 6)
    table = rel.params["weight"]                                             # (buckets, H)
    for i in range(4):
        for j in range(6):
            bucket = relative_position_bucket(np.array(j - i), True, 8, 12)
            np.testing.assert_array_equal(bias[:, i, j], table[bucket])


def test_t5_bias_backward_scatter_adds_by_bucket():
    rel = T5RelativeBias(H, bidirectional=False, num_buckets=6, max_distance=10, rng=np.random.default_rng(0),
                         dtype=np.float64)
    rel(5)
    d = np.random.default_rng(1).standard_normal((2, H, 5, 5))               # (B, H, T, S): summed over B
    rel.backward(d)
    want = np.zeros((6, H))
    for i in range(5):
        for j in range(5):
            want[relative_position_bucket(np.array(j - i), False, 6, 10)] += d[:, :, i, j].sum(0)
    np.testing.assert_allclose(rel.grads["weight"], want, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match=r"dbias: expected \(\.\.\., 3, 5, 5\)"):
        rel.backward(np.zeros((H, 4, 5)))


def test_t5_bias_with_offset_is_the_last_rows_of_the_full_bias():
    rel = T5RelativeBias(H, bidirectional=False, num_buckets=8, max_distance=16, rng=np.random.default_rng(0))
    full = rel(7)
    np.testing.assert_array_equal(rel(2, 7, offset=5), full[:, 5:])
    np.testing.assert_array_equal(rel(1, offset=6), full[:, 6:])             # S defaults to offset + T


def test_t5_bias_bad_hyper_parameters():
    with pytest.raises(ValueError, match="num_buckets too small"):
        T5RelativeBias(H, num_buckets=2, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="max_distance 4 must exceed"):
        T5RelativeBias(H, num_buckets=32, max_distance=4, rng=np.random.default_rng(0))
    with pytest.raises(RuntimeError, match="needs a forward"):
        T5RelativeBias(H, rng=np.random.default_rng(0)).backward(np.zeros((H, 1, 1)))
