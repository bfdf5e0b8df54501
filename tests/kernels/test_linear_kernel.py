"""minipt/kernels/linear.py against its twin, NumPy's ``@`` in minipt.ops.linear: the same
bits, on one BLAS thread and on two, with and without a bias; the op keeps to ``@`` where
NumPy would call something else, and says which way it went by its result."""
import numpy as np
import pytest

from minipt import kernels
from minipt.kernels import calls, threads
from minipt.kernels import linear as K
from minipt.ops import linear as op

pytestmark = pytest.mark.skipif(not kernels.ENABLED or not calls.gemm_address(np.float32),
                                reason="no Numba kernels or no float32 GEMM in NumPy's BLAS")
SHAPES = [(2, 2, 2), (7, 5, 3), (64, 33, 65), (512, 64, 192), (300, 192, 768), (1024, 128, 65)]


def operands(N, C_in, C_out, seed=0):
    rng = np.random.default_rng(seed)
    f = lambda *s: rng.standard_normal(s, dtype=np.float32)
    return f(N, C_in), f(C_out, C_in), f(C_out), f(N, C_out)


@pytest.mark.parametrize("blas", [1, 2])
@pytest.mark.parametrize("N,C_in,C_out", SHAPES)
def test_forward_and_backward_are_numpys_bits(N, C_in, C_out, blas):
    x, w, b, dy = operands(N, C_in, C_out)
    with threads.limit(blas=blas):
        for bias in (b, None):
            want = x @ w.T
            if bias is not None:
                want += bias
            assert np.array_equal(K.linear_forward(x, w, bias), want)
        dx, dw, db = K.linear_backward(dy, w, x, True)
        assert np.array_equal(dx, dy @ w)
        assert np.array_equal(dw, dy.T @ x)
        assert np.array_equal(db, np.ones(N, dtype=np.float32) @ dy)
        dx0, dw0, _ = K.linear_backward(dy, w, x, False)
        assert np.array_equal(dx0, dx) and np.array_equal(dw0, dw)


def test_the_products_against_sums_written_out():
    """Not only NumPy's bits: the values of y = x W^T + b and its gradients, in float64 sums."""
    x, w, b, dy = operands(9, 6, 4, seed=3)
    X, W, B, DY = (a.astype(np.float64) for a in (x, w, b, dy))
    y = K.linear_forward(x, w, b)
    want = np.array([[sum(X[n, i] * W[j, i] for i in range(6)) + B[j] for j in range(4)] for n in range(9)])
    assert np.allclose(y, want, rtol=1e-5, atol=1e-5)
    dx, dw, db = K.linear_backward(dy, w, x, True)
    assert np.allclose(dx, [[sum(DY[n, j] * W[j, i] for j in range(4)) for i in range(6)] for n in range(9)], atol=1e-5)
    assert np.allclose(dw, [[sum(DY[n, j] * X[n, i] for n in range(9)) for i in range(6)] for j in range(4)], atol=1e-5)
    assert np.allclose(db, DY.sum(axis=0), atol=1e-5)


def test_none_where_numpy_makes_other_calls():
    x, w, b, dy = operands(8, 6, 4)
    assert K.linear_forward(x, w, b) is not None and K.linear_backward(dy, w, x, True) is not None
    x64, w64, dy64 = (a.astype(np.float64) for a in (x, w, dy))
    assert K.linear_forward(x64, w64, None) is None and K.linear_backward(dy64, w64, x64, False) is None
    for xx, ww in [(np.asfortranarray(x), w), (x[:1], w), (x[:, :1], w[:, :1]), (x, w[:1]), (x[:, ::2], w[:, :3])]:
        assert K.linear_forward(xx, ww, None) is None
    assert K.linear_backward(np.asfortranarray(dy), w, x, True) is None
    assert K.linear_backward(dy[:1], w, x[:1], True) is None
    sq = operands(6, 6, 6)[0]
    assert K.linear_forward(sq, sq, None) is None                     # x @ x.T: NumPy's SYRK
    assert K.linear_forward(sq, sq.copy(), None) is not None
    assert K.linear_backward(sq, sq.copy(), sq, False) is None        # dy^T x with dy x: SYRK
    assert K.linear_backward(sq, sq.copy(), sq.copy(), False) is not None


def _both_ways(monkeypatch, x, w, b, dy):
    """The op's forward and backward with its kernels, then with kernels.get finding none."""
    out = []
    for found in (kernels.get, lambda name: None):
        monkeypatch.setattr(op.kernels, "get", found)
        y, cache = op.linear_forward(x, w, b)
        out.append([y, *(g for g in op.linear_backward(dy, cache) if g is not None)])
    return out


@pytest.mark.parametrize("bias", [True, False])
def test_the_op_gives_the_same_bits_either_way(monkeypatch, bias):
    x, w, b, dy = operands(4 * 16, 48, 80)
    x, dy = x.reshape(4, 16, 48), dy.reshape(4, 16, 80)
    fused, plain = _both_ways(monkeypatch, x, w, b if bias else None, dy)
    assert [a.shape for a in fused] == [a.shape for a in plain]
    assert all(np.array_equal(a, c) for a, c in zip(fused, plain))


def test_the_op_gives_numpys_results_where_the_kernels_step_aside():
    rng = np.random.default_rng(1)
    f32 = lambda *s: rng.standard_normal(s, dtype=np.float32)
    sq = f32(5, 5)
    for x, w in [(rng.standard_normal((5, 5)), rng.standard_normal((5, 5))),          # float64
                 (f32(1, 5), f32(3, 5)), (f32(5, 7)[:, ::2], f32(3, 4)), (sq, sq)]:   # 1 row, strided, SYRK
        y, cache = op.linear_forward(x, w, None)
        assert np.array_equal(y, x @ w.T)
        dy = np.ones_like(y)
        dx, dw, db = op.linear_backward(dy, cache)
        assert db is None and np.array_equal(dx, dy @ w) and np.array_equal(dw, dy.T @ x)
