"""Embedding scatter-add kernel against its NumPy twin (np.add.at) in minipt.ops.embedding:
repeated ids sum, an existing non-zero dw is accumulated into, float32 within 1e-5 and
float64 within 1e-12, dw keeps its dtype, bad ids raise before any write.
Also two checks of the kernels package itself: MINIPT_NUMBA=0 turns every kernel off, and
a serial and a parallel version of one function (``per_dtype(..., parallel=True)``) stay
distinct through Numba's disk cache."""
import os
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest

from minipt import kernels
from minipt.ops.embedding import embedding_backward_numpy

TOL = {np.float32: 1e-5, np.float64: 1e-12}
needs_numba = pytest.mark.skipif(not kernels.ENABLED, reason="MINIPT_NUMBA=0")


def rel_err(got, want):
    return np.abs(got.astype(np.float64) - want.astype(np.float64)).max() / max(np.abs(want).max(), 1e-30)


@needs_numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("N,V,C", [(1, 1, 1), (1, 5, 13), (300, 7, 11), (2048, 65, 64), (4096, 8192, 24)])
def test_scatter_add_into_existing_rows_matches_twin(N, V, C, dtype):
    r = np.random.default_rng(N + V + C)
    ids = r.integers(0, V, N).astype(np.int64)           # (N,), repeats whenever N > V
    dy = r.standard_normal((N, C)).astype(dtype)         # (N, C)
    start = r.standard_normal((V, C)).astype(dtype)      # (V, C), not zero
    got, want = start.copy(), start.copy()
    assert kernels.get("embedding_backward")(ids, dy, got) is None
    embedding_backward_numpy(ids, dy, want)
    assert got.dtype == dtype and rel_err(got, want) <= TOL[dtype]


@needs_numba
def test_one_id_repeated_gets_the_sum_of_its_rows():
    dy = np.arange(12, dtype=np.float64).reshape(4, 3)  # (N, C)
    dw = np.ones((3, 3))                                 # (V, C)
    kernels.get("embedding_backward")(np.array([2, 2, 0, 2]), dy, dw)
    np.testing.assert_array_equal(dw, [[7, 8, 9], [1, 1, 1], [1 + 0 + 3 + 9, 1 + 1 + 4 + 10, 1 + 2 + 5 + 11]])


@needs_numba
@pytest.mark.parametrize("bad", [-1, 5])
def test_id_outside_vocabulary_raises_before_writing(bad):
    dw = np.zeros((5, 4), np.float32)
    with pytest.raises(IndexError, match="outside"):
        kernels.get("embedding_backward")(np.array([0, 1, bad], np.int64), np.ones((3, 4), np.float32), dw)
    assert not dw.any(), "rows before the bad id were written"


def test_minipt_numba_0_turns_every_kernel_off():
    code = ("from minipt import kernels; "
            "print(kernels.ENABLED, sorted(k for k in kernels.KERNELS if kernels.get(k) is not None))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "MINIPT_NUMBA": "0"}).stdout
    assert out.split() == ["False", "[]"]
    mine = {"embedding_backward", "layer_norm_forward", "layer_norm_backward", "gelu_tanh_forward",
            "gelu_tanh_backward", "softmax_backward"}
    assert mine <= set(kernels.KERNELS)


@needs_numba
@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs 2 Numba threads")
def test_serial_and_parallel_versions_do_not_share_a_cache_entry(tmp_path):
    # Numba's disk cache ignores `parallel`: the serial version must still be serial when
    # both come from the cache in a new process (the first run compiles, the second loads)
    (tmp_path / "probe.py").write_text(textwrap.dedent("""
        import numba
        from minipt.kernels import per_dtype

        def _ids(out):
            for i in numba.prange(out.shape[0]):
                out[i] = numba.get_thread_id()

        ids_s = numba.njit(cache=True)(_ids)
        ids_p = per_dtype(_ids, lambda t: numba.void(t[::1]), parallel=True, cache=True)
    """))
    code = ("import numpy as np, numba, probe; numba.set_num_threads(2); "
            "a, b = np.zeros(1 << 14), np.zeros(1 << 14); probe.ids_p(a.dtype)(a); probe.ids_s(b); "
            "print(int(b.max()), int(a.max()))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    for run in ("compile", "from cache"):
        out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                             text=True, check=True).stdout.split()
        assert out == ["0", "1"], f"{run}: highest thread id serial {out[0]}, parallel {out[1]}"
    assert sorted(p.name.split("-")[0] for p in (tmp_path / "__pycache__").glob("*.nbi")) == \
        ["probe._ids", "probe._ids_parallel"]
