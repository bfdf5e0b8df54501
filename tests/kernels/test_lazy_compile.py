"""What a run compiles, and when: each dtype of a kernel on its first use (``per_dtype``),
nothing at import, and ``on_compile`` reporting a compile but not a disk-cache load."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from minipt import kernels

needs_numba = pytest.mark.skipif(not kernels.ENABLED, reason="MINIPT_NUMBA=0")


@needs_numba
def test_per_dtype_compiles_each_dtype_at_its_first_request_only():
    import numba

    def twice(x, out):
        for i in range(x.shape[0]):
            out[i] = 2 * x[i]
    get = kernels.per_dtype(twice, lambda t: numba.void(t[:], t[::1]))
    assert get.compiled == {}                                   # nothing at creation
    x = np.arange(5, dtype=np.float32)[::-1]                    # a strided view: the one 'A' version serves it
    out = np.empty(5, np.float32)
    get(x.dtype)(x, out)
    assert np.array_equal(out, 2 * x) and list(get.compiled) == [np.dtype(np.float32)]
    assert len(get(np.dtype(np.float32)).signatures) == 1 and get(np.dtype(np.float32)) is get.compiled[x.dtype]
    y = np.arange(3.0)
    get(y.dtype)(y, out64 := np.empty(3))
    assert np.array_equal(out64, 2 * y) and sorted(map(str, get.compiled)) == ["float32", "float64"]


@needs_numba
def test_a_float32_attention_call_compiles_no_float64_code():
    code = textwrap.dedent("""
        import numpy as np
        from minipt.kernels import fused_attention as fa
        print(len(fa._forward_jit.compiled), len(fa._backward_jit.compiled))   # after import
        q = np.ones((1, 2, 4, 8), np.float32)
        out, p = fa.fused_attention_forward(q, q, q, 0.5, True)
        fa.fused_attention_backward(out, q, q, q, p, 0.5, True)
        print(sorted(map(str, fa._forward_jit.compiled)), sorted(map(str, fa._backward_jit.compiled)))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["0 0", "['float32'] ['float32']"]


@needs_numba
def test_on_compile_reports_a_compile_once_and_a_cache_load_never(tmp_path):
    (tmp_path / "probe.py").write_text(textwrap.dedent("""
        import numba

        @numba.njit(cache=True)
        def add(a, b):
            return a + b

        @numba.njit(cache=True)
        def mul(a, b):
            return a * b
    """))
    code = textwrap.dedent("""
        import probe
        from minipt import kernels
        calls = []
        with kernels.on_compile(lambda: calls.append(1)):
            probe.add(1.0, 2.0)
            probe.mul(1.0, 2.0)
            probe.add(3.0, 4.0)
        probe.add(1, 2)                      # an int64 version, compiled outside the block
        print(len(calls))
    """)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    runs = [subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                           check=True).stdout.strip() for _ in range(2)]
    assert runs == ["1", "0"]                # cold: two kernels compiled, one call; warm: loaded, none
