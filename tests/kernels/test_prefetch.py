"""Software prefetch (minipt/kernels/prefetch.py): the row kernels and GELU's lanes carry
the hints in their compiled code, a hint past an array's end (the last rows ask for lines
that are not the array's) never faults, and a hint changes no value (the kernels' own
tests compare them with their twins; here the bits against the same loop without hints)."""
import re
import subprocess
import sys

import numba
import numpy as np
import pytest

from minipt import kernels
from minipt.kernels import calls, cross_entropy, layernorm, prefetch, vexp

pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="MINIPT_NUMBA=0")

F32_2D = numba.float32[:, ::1]


def _hints(dispatcher, signature) -> tuple[int, int]:
    """(read hints, write hints) in the optimised LLVM IR of the kernel's function, compiled
    afresh with its options (code loaded from Numba's disk cache cannot be inspected)."""
    options = {k: v for k, v in dispatcher.targetoptions.items() if k not in ("cache", "nopython")}
    fresh = numba.njit(signature, **options)(dispatcher.py_func)
    kinds = re.findall(r"call void @llvm\.prefetch\.p0\([^)]*, i32 (\d), i32 3, i32 1\)", fresh.inspect_llvm(signature))
    return kinds.count("0"), kinds.count("1")


@pytest.mark.parametrize("kernel, signature, reads, writes", [
    (layernorm.layer_norm_forward, (F32_2D, numba.float32[::1], numba.float32[::1], numba.float64), 1, 1),
    (layernorm.layer_norm_backward, (F32_2D, F32_2D) + (numba.float32[::1],) * 3, 2, 1),
    (layernorm.rms_norm_forward, (F32_2D, numba.float32[::1], numba.float64), 1, 1),
    (layernorm.rms_norm_backward, (F32_2D, F32_2D) + (numba.float32[::1],) * 2, 2, 1),
    (cross_entropy._rows,
     (numba.int64, F32_2D, numba.int64[::1], numba.boolean[::1], numba.float64, numba.float64[::1],
      numba.float32[::1]), 1, 0),
], ids=lambda v: getattr(v, "__name__", None))
def test_row_kernels_prefetch_the_rows_they_read_and_write(kernel, signature, reads, writes):
    got_reads, got_writes = _hints(kernel, signature)
    assert got_reads >= reads, f"a read hint is missing: {got_reads} in the IR"
    assert got_writes >= writes, f"a write hint is missing: {got_writes} in the IR"
    assert writes or not got_writes


def test_lanes_prefetch_only_when_asked():
    def op(lanes, x):
        return x
    assert "llvm.prefetch" in str(vexp.lanes_function("with", 1, 0, op, ahead=1024))
    assert "llvm.prefetch" not in str(vexp.lanes_function("without", 1, 0, op))


@pytest.mark.skipif(not calls.ir_on(), reason="GELU's lanes need AVX-512")
def test_gelu_lanes_carry_the_hints():
    from minipt.kernels import vgelu
    assert vgelu.addresses() != (0, 0), "the lanes failed their first check"
    # the module vgelu compiles, rebuilt here: its IR asks for the lines ahead
    ir_text = str(vexp.lanes_function("gelu_erf_forward", 1, 0, vgelu._forward_op, prefetch.AHEAD_BYTES // 4))
    assert ir_text.count("llvm.prefetch") >= 2                    # the declaration and one call per array


@numba.njit
def _copy_rows(x, y, hinted):
    for n in range(x.shape[0]):
        if hinted:
            prefetch.read_ahead(x[n])
            prefetch.write_ahead(y[n])
        for c in range(x.shape[1]):
            y[n, c] = x[n, c] * np.float32(2.0) + np.float32(1.0)


def test_hints_change_no_value():
    x = np.random.default_rng(0).standard_normal((300, 37)).astype(np.float32)
    with_hints, without = np.empty_like(x), np.empty_like(x)
    _copy_rows(x, with_hints, True)
    _copy_rows(x, without, False)
    assert np.array_equal(with_hints.view(np.int32), without.view(np.int32))


CHILD = """
import ctypes, mmap, sys
import numpy as np
sys.path.insert(0, {tests!r})
from test_prefetch import _copy_rows
from minipt.kernels import layernorm
page = mmap.PAGESIZE
buf = mmap.mmap(-1, 2 * page)
libc = ctypes.CDLL(None)
libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
base = ctypes.addressof(ctypes.c_char.from_buffer(buf))
assert libc.mprotect(base + page, page, 0) == 0          # the second page: no access at all
rows = np.frombuffer(buf, dtype=np.float32, count=page // 4).reshape(-1, 16)   # the first page, to its end
rows[:] = 1.0
out = np.empty_like(rows)
_copy_rows(rows, out, True)                               # its last rows ask for lines in the second page
y, mean, rstd = layernorm.layer_norm_forward(rows, np.ones(16, np.float32), np.zeros(16, np.float32), 1e-5)
layernorm.layer_norm_backward(rows, rows, mean, rstd, np.ones(16, np.float32))
from minipt.kernels import calls, vgelu
if calls.ir_on():                                         # GELU's lanes: a hint every 16 floats, 4 KiB on
    forward, backward = vgelu.addresses()
    flat, out_flat = rows.reshape(-1), np.empty(rows.size, np.float32)
    vgelu.forward_lanes(forward, flat, out_flat)
    vgelu.backward_lanes(backward, flat, flat, out_flat)
print("ok", float(out[-1, -1]))
"""


def test_a_hint_past_the_end_of_readable_memory_does_not_fault():
    """An array that ends where the next page allows no access: the hints of its last rows
    point into that page. A load there would kill the process (SIGSEGV)."""
    from pathlib import Path
    code = CHILD.format(tests=str(Path(__file__).resolve().parent))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.split() == ["ok", "3.0"], (done.returncode, done.stderr[-2000:])
