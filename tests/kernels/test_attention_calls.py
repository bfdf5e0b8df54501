"""Attention's part kernels, which call NumPy's GEMM and the softmax kernels by address from
inside Numba (minipt.kernels.calls): the GEMM against ``@``, a compiled kernel called by
address against the kernel called from Python; the part kernels against the ``np.matmul`` route they replace,
bit for bit, over masks, biases, the causal rule and cross-attention (float32); and the
cases that must stay on ``np.matmul``: float64, and where NumPy itself would not call GEMM."""
import itertools

import numba
import numpy as np
import pytest

from minipt import kernels
from minipt.kernels import attention as A
from minipt.kernels import attention_rows as R
from minipt.kernels import calls

GEMM = calls.gemm_address                                         # before any test patches it

pytestmark = pytest.mark.skipif(not kernels.ENABLED or not calls.gemm_address(np.float32),
                                reason="no Numba, or NumPy's BLAS is not its own OpenBLAS")


@numba.njit
def _gemm(fn, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    calls.gemm(fn, ta, tb, m, n, k, alpha, a.ctypes.data, lda, b.ctypes.data, ldb, beta, c.ctypes.data, ldc)


@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
def test_gemm_computes_alpha_op_a_op_b_plus_beta_c(ta, tb):
    dtype = np.float32
    r = np.random.default_rng(1)
    m, n, k = 5, 7, 3
    a = r.standard_normal((k, m) if ta else (m, k)).astype(dtype)
    b = r.standard_normal((n, k) if tb else (k, n)).astype(dtype)
    c0 = r.standard_normal((m, n)).astype(dtype)
    big = np.zeros((m, n + 4), dtype)                             # C inside wider rows: ldc n + 4
    big[:, :n] = c0
    want = 0.5 * (a.T if ta else a).astype(np.float64) @ (b.T if tb else b) + 2.0 * c0
    flag = {False: calls.NO_TRANS, True: calls.TRANS}
    _gemm(calls.gemm_address(dtype), flag[ta], flag[tb], m, n, k, dtype(0.5), a, a.shape[1], b, b.shape[1],
          dtype(2.0), big, n + 4)
    assert np.allclose(big[:, :n], want, rtol=1e-5)
    assert not big[:, n:].any()                                    # nothing past each row's n columns


def test_no_address_for_float64_other_dtypes_or_a_missing_symbol(monkeypatch):
    assert calls.gemm_address(np.float64) == calls.gemm_address(np.float16) == calls.gemm_address(np.int64) == 0
    monkeypatch.setattr(calls, "_found", {})
    monkeypatch.setattr(calls, "SYMBOLS", {np.dtype(np.float32): "no_such_gemm"})
    assert calls.gemm_address(np.float32) == 0


def test_a_kernel_called_by_address_is_that_kernel():
    sig = R._softmax_signature(numba.float32)
    address = calls.compiled_address(R._softmax_jit(np.dtype(np.float32)), sig)

    @numba.njit
    def by_address(address, s, sc, mask, bias):
        for b in range(s.shape[0]):
            calls.call_compiled(address, (s[b:b + 1], sc, False, mask, bias, np.int64(b)))
    r = np.random.default_rng(0)
    s = (r.standard_normal((3, 2, 64, 64)) * 3).astype(np.float32)
    mask, bias = r.random((3, 64)) < 0.8, r.standard_normal((3, 2, 64, 64)).astype(np.float32)
    want = s.copy()
    R._softmax_jit(np.dtype(np.float32))(want, np.float32(0.3), False, mask, bias, 0)
    got = s.copy()
    by_address(address, got, np.float32(0.3), mask, bias)
    assert np.array_equal(got, want) and not np.array_equal(got, s)
    with pytest.raises(TypeError, match="one compiled signature"):
        calls.compiled_address(R._softmax_jit(np.dtype(np.float32)), R._softmax_signature(numba.float64))


def views(B, H, T, S, D, dtype, seed):
    """q, dout (B, H, T, D) and k, v (B, H, S, D) as views of (B, T, H, D) / (B, S, 2, H, D)
    arrays, as attention's fused projections give them."""
    r = np.random.default_rng(seed)
    q = r.standard_normal((B, T, H, D)).astype(dtype).transpose(0, 2, 1, 3)
    kv = r.standard_normal((B, S, 2, H, D)).astype(dtype)
    dout = r.standard_normal((B, T, H, D)).astype(dtype).transpose(0, 2, 1, 3)
    return q, kv[:, :, 0].transpose(0, 2, 1, 3), kv[:, :, 1].transpose(0, 2, 1, 3), dout


def both_routes(monkeypatch, q, k, v, dout, causal, mask, bias):
    """[out, p, dq, dk, dv (, dbias)] by the part kernels, then by np.matmul."""
    results = []
    for route in (GEMM, lambda dtype: 0):
        monkeypatch.setattr(calls, "gemm_address", route)
        out, p = A.blas_attention_forward(q, k, v, 0.3, causal, mask, bias)
        grads = A.blas_attention_backward(dout, q, k, v, p, 0.3, causal, mask, bias is not None)
        results.append([out, p, *[g for g in grads if g is not None]])
    return results


@pytest.mark.parametrize("B,H,T,S,D", [(3, 2, 17, 17, 8), (2, 3, 16, 40, 8), (2, 2, 64, 64, 16),
                                       (1, 2, 256, 256, 32), (2, 1, 130, 300, 40)])   # the last two: tiles
def test_the_part_kernels_give_the_bits_of_np_matmul(monkeypatch, B, H, T, S, D):
    dtype = np.float32
    r = np.random.default_rng(T + S)
    q, k, v, dout = views(B, H, T, S, D, dtype, seed=T)
    used = []
    real = A._forward_part_jit
    monkeypatch.setattr(A, "_forward_part_jit", lambda dt: used.append(dt) or real(dt))
    for causal, mask_kind, bias_kind in itertools.product([False, True], [None, "padding", "holes"],
                                                          [None, "shared", "batched"]):
        mask = {None: None, "padding": np.arange(S)[None, :] < r.integers(1, S + 1, (B, 1)),
                "holes": r.random((B, S)) < 0.7}[mask_kind]
        bias = {None: None, "shared": r.standard_normal((1, H, T, S)),
                "batched": r.standard_normal((B, H, T, S))}[bias_kind]
        new, old = both_routes(monkeypatch, q, k, v, dout, causal, mask, None if bias is None else bias.astype(dtype))
        assert len(new) == len(old) == (6 if bias is not None else 5)
        for a, b in zip(new, old):
            assert a.dtype == dtype and np.array_equal(a, b), (causal, mask_kind, bias_kind)
    assert len(used) == 18                                         # every case ran the part kernel


def test_float64_stays_on_np_matmul(monkeypatch):
    q, k, v, dout = views(2, 2, 8, 8, 4, np.float64, seed=0)
    monkeypatch.setattr(A, "_forward_part_jit", None)             # a call to it would fail
    monkeypatch.setattr(A, "_backward_part_jit", None)
    out, p = A.blas_attention_forward(q, k, v, 0.3, True)
    A.blas_attention_backward(dout, q, k, v, p, 0.3, True)


@pytest.mark.parametrize("case", ["one query", "one key", "q is k", "strided head"])
def test_cases_numpy_would_not_send_to_gemm_stay_on_np_matmul(case):
    q, k, v, dout = views(2, 2, 8, 8, 4, np.float32, seed=0)
    least = A._blocks(8, 8, False)[4]
    assert A._gemm_for(np.float32, least, 4, [q, k, v], [(q, k)]) != 0
    if case == "one query":                                       # NumPy: GEMV
        least = A._blocks(1, 8, True)[4]
        q = q[:, :, :1]
    elif case == "one key":
        least = A._blocks(8, 1, False)[4]
    elif case == "q is k":                                        # NumPy: SYRK for Q Q^T
        k = q
    else:                                                         # NumPy: its own loop
        q = np.repeat(q, 2, axis=3)[..., ::2]
    assert A._gemm_for(np.float32, least, 4, [q, k, v], [(q, k)]) == 0
