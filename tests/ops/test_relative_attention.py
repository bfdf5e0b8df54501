"""Transformer-XL relative attention: the shift against a gather, the sinusoids against
their formula, float64 gradchecks of the shift and of the whole op (segments included)."""
import numpy as np
import pytest

from minipt.core.gradcheck import check_op
from minipt.ops.relative_attention import (
    rel_shift_backward,
    rel_shift_forward,
    relative_attention_backward,
    relative_attention_forward,
    relative_sinusoid,
)


@pytest.mark.parametrize("T, S", [(4, 4), (3, 5), (1, 6)])
def test_rel_shift_puts_distance_i_minus_j_in_column_j(T, S):
    x = np.random.default_rng(0).standard_normal((2, 3, T, S + T))
    y, _ = rel_shift_forward(x, S)
    for i in range(T):
        for j in range(S):
            # column r of x holds distance S - r; row i, key j needs distance i - j + (S - T)
            np.testing.assert_array_equal(y[:, :, i, j], x[:, :, i, S - (i - j + S - T)])


def test_rel_shift_gradcheck():
    x = np.random.default_rng(1).standard_normal((2, 2, 4, 9))
    assert check_op(rel_shift_forward, rel_shift_backward, {"x": x}, S=5).passed


def test_rel_shift_refuses_too_few_distances():
    with pytest.raises(ValueError, match="distances cannot cover 6 keys"):
        rel_shift_forward(np.zeros((1, 1, 3, 6)), 6)


def test_relative_sinusoid_formula():
    table = relative_sinusoid(3, 4, 6, np.float64)                   # distances 4 .. -2
    assert table.shape == (7, 6)
    for r, m in enumerate(range(4, -3, -1)):
        for k in range(3):
            f = 10000.0 ** (-2 * k / 6)
            assert table[r, k] == pytest.approx(np.sin(m * f), abs=1e-15)
            assert table[r, 3 + k] == pytest.approx(np.cos(m * f), abs=1e-15)
    with pytest.raises(ValueError, match="even width"):
        relative_sinusoid(2, 2, 5)


def _inputs(seed=0, B=2, T=4, H=2, D=3):
    r = np.random.default_rng(seed)
    n = lambda *s: r.standard_normal(s)
    return dict(q=n(B, T, H, D), k=n(B, T, H, D), v=n(B, T, H, D), kr=n(2 * T, H, D), r_w=n(H, D), r_r=n(H, D),
                r_s=n(H, D), seg_embed=n(2, H, D))


@pytest.mark.parametrize("segments", [False, True])
def test_relative_attention_gradcheck(segments):
    a = _inputs()
    r = np.random.default_rng(3)
    mask = r.random((2, 4, 4)) < 0.7
    mask[0, 2] = False                                               # an empty row: zero output, zero gradient
    seg = r.random((2, 4, 4)) < 0.5 if segments else None
    names = ["q", "k", "v", "kr", "r_w", "r_r"] + (["r_s", "seg_embed"] if segments else [])

    def fwd(*xs):
        d = dict(zip(names, xs))
        return relative_attention_forward(d["q"], d["k"], d["v"], d["kr"], d["r_w"], d["r_r"], mask, seg,
                                          d.get("r_s"), d.get("seg_embed"))

    result = check_op(fwd, lambda dy, c: relative_attention_backward(dy, c)[:len(names)], {n: a[n] for n in names})
    assert result.passed, str(result)


def test_segment_term_is_what_the_formula_says():
    """One query, one head: the score against key j gains (q + b) . seg_embed[s_ij] / sqrt(D)."""
    a = _inputs(B=1, T=2, H=1, D=2)
    seg = np.array([[[False, True], [True, False]]])
    with_seg, c1 = relative_attention_forward(a["q"], a["k"], a["v"], a["kr"], a["r_w"], a["r_r"], None, seg,
                                              a["r_s"], a["seg_embed"])
    without, c0 = relative_attention_forward(a["q"], a["k"], a["v"], a["kr"], a["r_w"], a["r_r"])
    p1, p0 = c1[0]["p"][0, 0], c0[0]["p"][0, 0]                       # (T, S) attention weights
    extra = np.log(p1 / p0)                                          # score differences, up to a row constant
    qs = a["q"][0, :, 0] + a["r_s"][0]                               # (T, D)
    e = np.stack([qs @ a["seg_embed"][0, 0], qs @ a["seg_embed"][1, 0]], 1) / np.sqrt(2)   # (T, 2)
    want = np.where(seg[0], e[:, 1:2], e[:, 0:1])
    np.testing.assert_allclose(extra - extra[:, :1], want - want[:, :1], atol=1e-12)
    assert not np.allclose(with_seg, without)
