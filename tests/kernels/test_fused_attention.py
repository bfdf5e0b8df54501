"""The two fast paths of attention, the whole-attention Numba kernel
(minipt.kernels.fused_attention) and BLAS products around a Numba softmax in parts on
threads (minipt.kernels.attention), against each other and the NumPy op: forward and
backward, causal and not, padding masks and biases, float32 and float64, on strided views
laid out as the GPT block hands them over."""
import math

import numpy as np
import pytest

from minipt import kernels
from minipt.ops import attention as A

pytestmark = [pytest.mark.skipif(not kernels.ENABLED, reason="MINIPT_NUMBA=0"), pytest.mark.usefixtures("two_threads")]
TOL = {np.float32: 2e-6, np.float64: 1e-12}


def rel(a, b):
    return np.abs(a.astype(np.float64) - b.astype(np.float64)).max() / max(np.abs(b).max(), 1e-30)


def qkv_views(B, H, T, S, D, dtype, seed=0):
    """q (B,H,T,D) a strided view of a (B, T, 3, H, D) block as MultiHeadAttention makes it;
    k, v (B,H,S,D) views of another; dout a transposed (B, T, H, D) array."""
    r = np.random.default_rng(seed)
    qkv = r.standard_normal((B, T, 3, H, D)).astype(dtype)
    kv = r.standard_normal((B, S, 2, H, D)).astype(dtype)
    dout = r.standard_normal((B, T, H, D)).astype(dtype).transpose(0, 2, 1, 3)
    return qkv[:, :, 0].transpose(0, 2, 1, 3), kv[:, :, 0].transpose(0, 2, 1, 3), \
        kv[:, :, 1].transpose(0, 2, 1, 3), dout


PATHS = ("fused", "blas")


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("T,S,D", [(1, 1, 8), (5, 5, 8), (2, 6, 4), (17, 17, 19), (9, 20, 16), (24, 24, 32),
                                   (70, 150, 8), (130, 130, 12)])   # several row tiles and key blocks
def test_fast_paths_match_numpy_twin(T, S, D, causal, dtype, path):
    q, k, v, dout = qkv_views(2, 3, T, S, D, dtype)
    scale = 1 / math.sqrt(D)
    out, p = kernels.get(f"{path}_attention_forward")(q, k, v, scale, causal)
    want, twin = A.attention_forward_numpy(q, k, v, None, causal, None, 0.0, None, True, scale)
    assert out.dtype == dtype and p.dtype == dtype
    assert rel(out, want) <= TOL[dtype] and rel(p, twin["p"]) <= TOL[dtype]
    if causal:   # the masked half is exactly zero
        assert not np.triu(p, 1 + S - T).any()
    grads = kernels.get(f"{path}_attention_backward")(dout, q, k, v, p, scale, causal)
    for name, g, w in zip("q k v".split(), grads, A.attention_backward_numpy(dout, twin)[:3]):
        assert g.dtype == dtype and rel(g, w) <= TOL[dtype], name


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernel_and_blas_paths_agree(dtype, monkeypatch):
    """The two fast paths of the op, each the twin of the other, at a GPT-like size."""
    q, k, v, dout = qkv_views(2, 2, 40, 40, 16, dtype, seed=1)
    res = {}
    for path in PATHS:
        monkeypatch.setattr(A, "FAST_PATH", path)
        out, cache = A.attention_forward(q, k, v, causal=True)
        assert cache["path"] == path
        res[path] = (out, *A.attention_backward(dout, cache)[:3])
    for a, b in zip(res["fused"], res["blas"]):
        assert a.dtype == dtype and rel(a, b) <= TOL[dtype]


def test_default_fast_path_is_blas():
    q, k, v, _ = qkv_views(1, 2, 8, 8, 8, np.float32)
    assert A.attention_forward(q, k, v, causal=True)[1]["path"] == "blas"


# -- key padding and additive bias (BERT's and T5's attention) -------------------------
def padding_and_bias(kind, B, H, T, S, dtype, bias_shape, seed=2):
    """The may-attend mask and bias of one case: "pad" keys past each row's length (the
    last row all padding), "holes" keys masked anywhere (one row fully, one at its start)."""
    r = np.random.default_rng(seed)
    mask = None
    if kind == "pad":
        lengths = np.array([S, max(S // 2, 1), 0][:B])
        mask = (np.arange(S)[None] < lengths[:, None])[:, None, :]        # (B, 1, S) as BERT passes it
    elif kind == "holes":
        real = r.random((B, S)) < 0.6
        real[-1], real[0, :3] = False, False
        mask = real[:, None, None, :]                                      # (B, 1, 1, S)
    bias = None if bias_shape is None else r.standard_normal(bias_shape).astype(dtype)
    return mask, bias


CASES = [  # (mask kind, causal, bias shape given (H, T, S) as "HTS")
    ("pad", False, None), (None, False, "HTS"), ("pad", False, "HTS"), (None, True, "HTS"),
    ("pad", True, "1HTS"), ("holes", False, "1HTS"), ("holes", True, "BHTS"), ("pad", False, "BHTS"),
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind,causal,bshape", CASES)
@pytest.mark.parametrize("T,S,D", [(5, 5, 8), (17, 17, 19), (70, 150, 8), (130, 130, 12), (40, 24, 16)])
def test_padding_and_bias_match_the_numpy_twin(T, S, D, kind, causal, bshape, dtype, path, monkeypatch):
    """The op's fast paths (forward, dq, dk, dv, dbias) against its NumPy twin, padding keys
    exactly zero-weighted, a batch row with no key at all giving zeros."""
    monkeypatch.setattr(A, "FAST_PATH", path)
    B, H = 3, 2
    q, k, v, dout = qkv_views(B, H, T, S, D, dtype)
    shape = {None: None, "HTS": (H, T, S), "1HTS": (1, H, T, S), "BHTS": (B, H, T, S)}[bshape]
    mask, bias = padding_and_bias(kind, B, H, T, S, dtype, shape)
    out, cache = A.attention_forward(q, k, v, mask, causal=causal, bias=bias)
    assert cache["path"] == path
    scale = 1 / math.sqrt(D)
    want, twin = A.attention_forward_numpy(q, k, v, mask, causal, bias, 0.0, None, True, scale)
    assert out.dtype == dtype and rel(out, want) <= TOL[dtype] and rel(cache["p"], twin["p"]) <= TOL[dtype]
    if mask is not None:
        assert not cache["p"][~np.broadcast_to(mask.reshape(B, 1, 1, S), cache["p"].shape)].any()
        assert not out[-1].any()                                               # the row with no key
    grads = A.attention_backward(dout, cache)
    for name, g, w in zip(("dq", "dk", "dv", "dbias"), grads, A.attention_backward_numpy(dout, twin)):
        if w is None:
            assert g is None, name
        else:
            assert g.shape == w.shape and g.dtype == dtype and rel(g, w) <= TOL[dtype], name


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("kind,causal,bshape", [("pad", False, "HTS"), ("holes", True, "1HTS")])
def test_gradcheck_through_the_fast_paths(kind, causal, bshape, path, monkeypatch):
    from minipt.core.gradcheck import check_op

    monkeypatch.setattr(A, "FAST_PATH", path)
    B, H, T, S, D = 3, 2, 6, 6, 4
    r = np.random.default_rng(5)
    shape = {"HTS": (H, T, S), "1HTS": (1, H, T, S)}[bshape]
    mask, bias = padding_and_bias(kind, B, H, T, S, np.float64, shape)
    inputs = {"q": r.standard_normal((B, H, T, D)), "k": r.standard_normal((B, H, S, D)),
              "v": r.standard_normal((B, H, S, D)), "bias": bias}

    def forward(q, k, v, bias):
        out, cache = A.attention_forward(q, k, v, mask, causal=causal, bias=bias)
        assert cache["path"] == path
        return out, cache
    result = check_op(forward, A.attention_backward, inputs, params=("bias",))
    assert result.passed, str(result)


@pytest.mark.parametrize("mask,fused", [
    (np.ones((1, 6), bool), "blas"), (np.ones((2, 1, 6), bool), "blas"),
    (np.ones((2, 1, 1, 6), bool), "blas"), (np.ones((6, 6), bool), None),
    (np.ones((2, 6, 6), bool), None), (np.ones((2, 1, 6, 6), bool), None)])
def test_dispatcher_takes_a_fast_path_for_key_masks_only(mask, fused):
    q, k, v, _ = qkv_views(2, 2, 6, 6, 8, np.float32)
    bias = np.zeros((2, 6, 6), np.float32)
    assert A.attention_forward(q, k, v, mask, bias=bias)[1].get("path") == fused
    assert A.attention_forward(q, k, v, mask, causal=True)[1].get("path") == fused
    assert A.attention_forward(q, k, v, mask, dropout_p=0.1, rng=np.random.default_rng(0))[1].get("path") is None


def test_blas_path_runs_in_parts_on_threads(monkeypatch):
    """The batch is cut into parts, one per thread, with BLAS held at one thread meanwhile
    and given back after; the parts' results are those of one part over the whole batch."""
    from minipt.kernels import threads
    q, k, v, dout = qkv_views(5, 2, 12, 12, 8, np.float64, seed=3)
    seen = []
    real = threads.in_parts

    def spy(work, n):
        def watched(sl):
            seen.append((sl.start, sl.stop, threads.blas_threads()))
            work(sl)
        real(watched, n)
    monkeypatch.setattr(threads, "in_parts", spy)
    before = threads.blas_threads()
    with threads.limit(blas=2, numba=2):
        out2, p2 = kernels.get("blas_attention_forward")(q, k, v, 0.3, True)
    assert sorted(s[:2] for s in seen) == [(0, 2), (2, 5)] and all(s[2] == 1 for s in seen)
    assert threads.blas_threads() == before
    seen.clear()
    with threads.limit(blas=1, numba=1):
        out1, p1 = kernels.get("blas_attention_forward")(q, k, v, 0.3, True)
    assert [s[:2] for s in seen] == [(0, 5)]
    assert rel(out2, out1) <= 1e-14 and rel(p2, p1) <= 1e-14


def test_an_error_in_a_part_reaches_the_caller():
    from minipt.kernels import threads

    def work(sl):
        if sl.start > 0:
            raise ValueError("part failed")
    with threads.limit(blas=2, numba=2), pytest.raises(ValueError, match="part failed"):
        threads.in_parts(work, 4)


@pytest.mark.parametrize("path", [*PATHS, None])
def test_backward_writes_into_given_arrays(path, monkeypatch):
    """attention_backward(..., out=(dq, dk, dv)) fills strided views (as MultiHeadAttention
    passes views of its fused projection's gradient) with what it returns without out."""
    monkeypatch.setattr(A, "FAST_PATH", path or "blas")
    q, k, v, dout = qkv_views(2, 3, 9, 9, 8, np.float64, seed=4)
    mask = None if path else np.ones((2, 9, 9), bool)               # a full mask: the NumPy twin
    out, cache = A.attention_forward(q, k, v, mask, causal=True)
    assert cache.get("path") == path
    want = A.attention_backward(dout, cache)
    buf = np.full((2, 9, 3, 3, 8), np.nan)                          # (B, T, 3, H, D), as c_attn's gradient
    slots = tuple(buf[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
    got = A.attention_backward(dout, cache, out=slots)
    for w, g, s in zip(want[:3], got[:3], slots):
        assert g is s and np.array_equal(w, s)
    assert not np.isnan(buf).any()
