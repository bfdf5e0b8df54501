"""The fused cross-entropy kernels against their NumPy twins in minipt.ops.cross_entropy
(per-row loss, log-sum-exp and the logits' gradient), float32 and float64, with and without
label smoothing, vocabularies below and off the unrolling width; the same bits in parts on
two threads as in one part; through the op, a non-finite logit still gives a NaN loss."""
import numpy as np
import pytest

from minipt import kernels
from minipt.kernels import cross_entropy as K
from minipt.kernels import threads
from minipt.kernels.attention_rows import _exp, _row_max
from minipt.ops import cross_entropy as C

pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="MINIPT_NUMBA=0")
TOL = {np.float32: 2e-6, np.float64: 1e-12}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("N,V", [(1, 1), (3, 5), (7, 37), (64, 512)])
def test_rows_match_twins(N, V, eps, dtype):
    r = np.random.default_rng(V)
    z = (r.standard_normal((N, V)) * 4).astype(dtype)
    t = r.integers(0, V, N)
    w = r.random(N)
    nll, lse = kernels.get("cross_entropy_rows")(z, t, np.ones(N, bool), eps)
    want, logp = C._rows_numpy(z, t, eps)
    assert lse.dtype == dtype and np.abs(nll - want).max() <= TOL[dtype] * max(1.0, np.abs(want).max())
    assert np.abs(lse - (z - logp)[:, 0]).max() <= TOL[dtype] * max(1.0, np.abs(lse).max())
    dz = kernels.get("cross_entropy_rows_backward")(z, t, lse, w, eps)
    assert dz.dtype == dtype and np.abs(dz - C._rows_backward_numpy(logp, t, w, eps)).max() <= TOL[dtype]


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_non_finite_logit_gives_a_nan_loss(bad):
    z = np.zeros((2, 3, 9), np.float32)
    z[1, 2, 4] = bad
    loss, _ = C.cross_entropy_forward(z, np.zeros((2, 3), np.int64))
    assert np.isnan(loss)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_skipped_rows_cost_nothing_and_leave_the_kept_rows_as_they_were(dtype):
    """Rows with keep False (ignore_index) get nll 0 and, with weight 0, a zero gradient row;
    the kept rows' nll, lse and gradient are the same bits as with every row kept."""
    r = np.random.default_rng(3)
    N, V = 12, 37
    z = (r.standard_normal((N, V)) * 4).astype(dtype)
    t = r.integers(0, V, N)
    keep = r.random(N) < 0.4
    keep[0], keep[1] = True, False
    w = keep * 0.5
    rows, back = kernels.get("cross_entropy_rows"), kernels.get("cross_entropy_rows_backward")
    nll_all, lse_all = rows(z, t, np.ones(N, bool), 0.1)
    nll, lse = rows(z, t, keep, 0.1)
    assert np.array_equal(nll[keep], nll_all[keep]) and np.array_equal(lse[keep], lse_all[keep])
    assert not nll[~keep].any()
    dz = back(z, t, lse, w, 0.1)
    assert np.array_equal(dz[keep], back(z, t, lse_all, w, 0.1)[keep]) and not dz[~keep].any()
    loss, cache = C.cross_entropy_forward(z, np.where(keep, t, -100), label_smoothing=0.1)    # the op
    want = nll_all[keep].sum() / keep.sum()                     # float64 runs the twin: equal to 1e-12
    assert loss == np.asarray(want, dtype=dtype) if dtype == np.float32 else abs(loss - want) <= 1e-12 * want


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_in_parts_on_two_threads_are_the_bits_of_one_part(dtype, monkeypatch):
    r = np.random.default_rng(11)
    N, V = 301, 37
    z = (r.standard_normal((N, V)) * 4).astype(dtype)
    t, keep, w = r.integers(0, V, N), r.random(N) < 0.8, r.random(N)
    monkeypatch.setattr(K, "PART_MIN", 10 * V)                   # parts of 10 rows and more
    seen, real = [], threads.in_parts

    def spy(work, n, min_part):
        real(lambda sl: seen.append((sl.start, sl.stop)) or work(sl), n, min_part)
    monkeypatch.setattr(threads, "in_parts", spy)
    out = {}
    for n in (1, 2):
        with threads.limit(blas=1, numba=n):
            nll, lse = kernels.get("cross_entropy_rows")(z, t, keep, 0.1)
            out[n] = (nll, lse, kernels.get("cross_entropy_rows_backward")(z, t, lse, w * keep, 0.1))
    if threads.available_cpus() >= 2:
        assert sorted(seen) == sorted([(0, N)] + [(0, 150), (150, N)] * 2)     # one part's backward: a direct call
    assert all(np.array_equal(a, b) for a, b in zip(out[1], out[2]))
    want, logp = C._rows_numpy(z, t, 0.1)                        # and right, row by row
    assert np.abs(out[2][0][keep] - want[keep]).max() <= TOL[dtype] * np.abs(want).max()
    assert not out[2][0][~keep].any()


def _one_loop_rows(z, t, keep, eps, nll, lse):
    """The forward as it was before its exponentials got a loop of their own: exp and the
    two float64 row sums in one loop (the bits of every float32 loss to date)."""
    N, V = z.shape
    for i in range(N):
        if not keep[i]:
            nll[i], lse[i] = 0.0, 0.0
            continue
        m = _row_max(z[i], V)
        s = 0.0
        total = 0.0
        for v in range(V):
            s += _exp(z[i, v] - m)
            total += z[i, v]
        ls = m + np.log(s)
        lse[i] = ls
        nll[i] = (1.0 - eps) * (ls - z[i, t[i]]) + eps * (ls - total / V) if np.isfinite(total) else np.nan


def _exp_addresses():
    """(forward, backward) addresses of vexp's functions, (0, 0) first: Numba's loops."""
    from minipt.kernels import vexp
    return [(0, 0)] + ([vexp.addresses()] if vexp.addresses()[0] else [])


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_the_exponentials_in_their_own_loop_keep_the_bits_of_one_loop(eps):
    """The float64 row sums keep LLVM's order (4 lanes, 4 accumulators, an epilogue of 4,
    then one at a time) once the exponentials are a loop of their own, Numba's or vexp's
    16 lanes: equal bits on vocabularies off every one of those widths."""
    import numba
    one_loop = numba.njit(nogil=True, fastmath={"reassoc", "contract"}, error_model="numpy")(_one_loop_rows)
    r = np.random.default_rng(5)
    for V in (1, 3, 4, 7, 15, 16, 17, 33, 63, 65, 250, 256, 257, 512, 1003):
        N = 200
        z = (r.standard_normal((N, V)) * 6).astype(np.float32)
        t, keep = r.integers(0, V, N), r.random(N) < 0.9
        want = (np.empty(N), np.empty(N, np.float32))
        one_loop(z, t, keep, eps, *want)
        for ex, _ in _exp_addresses():
            got = (np.empty(N), np.empty(N, np.float32))
            K._rows(ex, z, t, keep, eps, *got)
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), (V, ex)


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_the_backward_on_vexp_lanes_keeps_the_bits_of_numbas_loop(eps):
    """dz through vexp's exp_shift_scaled (16 lanes, exp's last product and - eps/V in one
    fused multiply-add) equals Numba's loop bit for bit, skipped rows and one-hot included."""
    if len(_exp_addresses()) == 1:
        pytest.skip("no AVX-512 (or MINIPT_TILES=0): the backward keeps Numba's loop only")
    (_, loop), (_, lanes) = _exp_addresses()
    r = np.random.default_rng(6)
    for V in (1, 3, 15, 16, 17, 33, 65, 250, 512, 1003):
        N = 120
        z = (r.standard_normal((N, V)) * 6).astype(np.float32)
        t, w = r.integers(0, V, N), r.random(N) * (r.random(N) < 0.9)
        lse = K.cross_entropy_rows(z, t, np.ones(N, bool), eps)[1]
        want, got = np.empty_like(z), np.empty_like(z)
        K._rows_backward(loop, z, t, lse, w, eps, want)
        K._rows_backward(lanes, z, t, lse, w, eps, got)
        assert np.array_equal(got.view(np.int32), want.view(np.int32)), V


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])
def test_the_target_pass_matches_its_twin(dtype):
    """Kept rows, their count, class 0 for ignored rows and the first kept id outside
    [0, V), against ``_targets_numpy``, with and without such an id."""
    r = np.random.default_rng(7)
    V = 37
    for trial in range(20):
        t = r.integers(0, V, 200).astype(dtype)
        if dtype != np.uint8:
            t[r.random(200) < 0.2] = -100
        if trial % 2:
            t[r.integers(50, 200)] = V if dtype != np.int32 or trial % 4 == 1 else -5
        got = K.cross_entropy_targets(t, -100, V)
        want = C._targets_numpy(t, -100, V)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), trial
        assert got[2:] == want[2:] and (got[3] >= 0) == bool(trial % 2), (got[2:], want[2:])


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_targets_and_rows_in_one_call_equal_the_two_kernels_in_parts(eps, monkeypatch):
    """``cross_entropy`` in one part (one Numba call for the target pass, the rows and their
    gradient) gives what the target pass and ``cross_entropy_rows`` give in parts on two
    threads, and the gradient ``cross_entropy_rows_backward`` gives for dloss = 1; a kept
    id outside [0, V) is reported at its first row."""
    r = np.random.default_rng(12)
    N, V = 301, 37
    z = (r.standard_normal((N, V)) * 4).astype(np.float32)
    t = np.where(r.random(N) < 0.2, -100, r.integers(0, V, N))
    monkeypatch.setattr(K, "PART_MIN", 10 * V)
    out = {}
    for n in (1, 2):
        with threads.limit(blas=1, numba=n):
            assert threads.part_count(N, K._min_rows(V)) == min(n, threads.available_cpus())
            out[n] = K.cross_entropy(z, t, -100, eps)
    for a, b in zip(out[1][:6], out[2][:6]):
        assert np.array_equal(a, b)
    assert out[2][6] is None                          # in parts the backward makes the gradient
    nll, lse = K.cross_entropy_rows(z, np.where(t < 0, 0, t), t != -100, eps)
    keep = t != -100
    dz = K.cross_entropy_rows_backward(z, np.where(keep, t, 0), lse, keep * (1.0 / keep.sum()), eps)
    assert np.array_equal(out[1][6], dz) and not dz[~keep].any()
    assert np.array_equal(out[1][0], nll) and np.array_equal(out[1][1], lse) and out[1][4] == (t != -100).sum()
    for wrong in (V, 10**9):
        bad = t.copy()
        bad[[40, 90]] = wrong
        assert K.cross_entropy(z, bad, -100, eps)[5] == 40


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_the_forward_s_gradient_is_the_backward_s_for_dloss_1(eps, monkeypatch):
    """The op hands over the gradient its forward's kernel made when dloss is 1, and makes
    one for any other dloss: both with the bits of the backward kernel, and near the
    softmax minus the target written out in float64."""
    r = np.random.default_rng(13)
    z = (r.standard_normal((3, 50, 29)) * 3).astype(np.float32)
    t = np.where(r.random((3, 50)) < 0.25, -100, r.integers(0, 29, (3, 50)))
    with threads.limit(blas=1, numba=1):                        # one part: the kernel makes dz
        loss, cache = C.cross_entropy_forward(z, t, label_smoothing=eps)
        assert cache[-1] is not None
        got = {d: C.cross_entropy_backward(d, cache) for d in (1.0, 0.5)}
        real = kernels.get("cross_entropy")
        monkeypatch.setattr(kernels, "get", lambda name, real_get=kernels.get: (
            (lambda *a: (*real(*a)[:6], None)) if name == "cross_entropy" else real_get(name)))
        _, without = C.cross_entropy_forward(z, t, label_smoothing=eps)
        assert without[-1] is None
        for d, dz in got.items():
            assert np.array_equal(dz, C.cross_entropy_backward(d, without)), d
    keep = t != -100
    p = np.exp(z - z.max(-1, keepdims=True).astype(np.float64))
    p /= p.sum(-1, keepdims=True)
    want = p - eps / 29
    want[keep, t[keep]] -= 1.0 - eps
    want *= keep[..., None] / keep.sum()
    np.testing.assert_allclose(got[1.0], want, atol=2e-7)
    np.testing.assert_allclose(got[0.5], 0.5 * want, atol=2e-7)
