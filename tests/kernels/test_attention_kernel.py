"""Both fast paths of the attention op (the softmax kernels between BLAS matmuls, and the
whole-attention kernel) against the NumPy twin, forward and backward, causal and not,
float32 and float64."""
import math

import numpy as np
import pytest

from minipt import kernels
from minipt.ops import attention as A
from minipt.ops.attention import (
    attention_backward,
    attention_backward_numpy,
    attention_forward,
    attention_forward_numpy,
)

pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="MINIPT_NUMBA=0")
TOL = {np.float32: 1e-5, np.float64: 1e-12}


def rel(a, b):
    return np.abs(a.astype(np.float64) - b.astype(np.float64)).max() / max(np.abs(b).max(), 1e-30)


@pytest.mark.parametrize("path", ["kernel", "blas"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("T,S", [(5, 5), (2, 6), (1, 1), (17, 17)])
def test_fused_path_matches_twin(T, S, causal, dtype, path, monkeypatch):
    monkeypatch.setattr(A, "FAST_PATH", path)
    r = np.random.default_rng(0)
    q = r.standard_normal((2, 3, T, 8)).astype(dtype)
    k, v = (r.standard_normal((2, 3, S, 8)).astype(dtype) for _ in range(2))
    dout = r.standard_normal((2, 3, T, 8)).astype(dtype)
    out, cache = attention_forward(q, k, v, causal=causal)
    assert cache.get("fused"), "the op should take the Numba path here"
    want, twin = attention_forward_numpy(q, k, v, None, causal, None, 0.0, None, True, 1 / math.sqrt(8))
    assert out.dtype == dtype and rel(out, want) <= TOL[dtype] and rel(cache["p"], twin["p"]) <= TOL[dtype]
    for g, w in zip(attention_backward(dout, cache)[:3], attention_backward_numpy(dout, twin)[:3]):
        assert g.dtype == dtype and rel(g, w) <= TOL[dtype]
