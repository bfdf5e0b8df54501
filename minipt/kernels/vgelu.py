"""Exact GELU's float32 forward and backward (``gelu_erf.py``) 16 lanes at a time, written as
LLVM IR with ``vexp``'s lanes; their twins are ``gelu_erf._forward32`` and ``_backward32``,
which they equal bit for bit. BERT's activation: ``gelu_forward`` and ``gelu_backward``
here are the ops' kernels, gelu_erf's functions with float32 on the lanes when
``addresses()`` gives them.

Why. LLVM vectorises Numba's loops 8 lanes wide on this CPU (it prefers 256-bit vectors
on Intel's AVX-512 parts), and a lane of Abramowitz & Stegun's erf with its exponential
is about forty instructions, a division among them: the loops are bound by arithmetic,
not memory (1024 x 512 floats alone, one thread: 377 us forward against 150 for a copy).

Why the same bits. Each lane makes the operations Numba's loop compiles to with
``fastmath={"contract"}``, read off its machine code:
    z = |x| / sqrt 2 (a product),  t = 1 / fma(p, z, 1),  e = exp(-z z) (``Lanes.exp``),
    q = fma(fma(fma(fma(a5, t, a4), t, a3), t, a2), t, a1),  h = ((q t) / 2) e,
    Phi = 1 - h where 0 <= x (NaN: h), else h;
    forward y = x Phi;  backward dx = fma(x e, 1/sqrt(2 pi), Phi) dy.
No lane sees another, so the width changes no result. The first call checks both against
the loops on [-12, 12] in steps of 2^-12 and special values, in arrays of 61 (16 lanes
and a tail) (``_agrees``); tests/kernels/test_vgelu.py checks every float32 (slow).

Each step of 16 lanes also asks for the lines 4 KiB on in every array (``prefetch.py``):
the backward reads the input its forward saved long before. In BERT M steps (two parts,
benchmarks/kernels_in_step.py) the caller's thread spent 2.19 ms a step in the forward and
2.64 in the backward, against 2.66 and 3.86 without the hints.

Only with AVX-512 and ``MINIPT_TILES`` not 0 (``calls.ir_on``); ``addresses()`` is (0, 0)
otherwise, or when the first check finds a bit apart, and gelu_erf's loops run.
"""
from __future__ import annotations

import numba
import numpy as np

from . import calls, gelu_erf, threads
from .prefetch import AHEAD_BYTES
from .vexp import lanes_function

# Numba's disk cache checks only this file's date; these files' code is compiled into
# its kernels, so their hashes are kept here (tests/kernels/test_kernel_cache.py).
INLINED_SOURCES = {"calls.py": "7c924b4ecd3fa4b0", "gelu_erf.py": "3780934415a6df3e", "prefetch.py": "90f74125a24a6dd9", "vexp.py": "aa7633403da82a40"}

_state: dict = {"address": None}


def _phi(lanes, x):
    """(Phi(x), exp(-x^2 / 2)) on the lanes, as ``gelu_erf._phi32``."""
    b, const, g = lanes.b, lanes.const, gelu_erf
    z = b.fmul(b.call(lanes.fabs, [x]), const(float(g._R2F)))
    t = b.fdiv(const(1.0), lanes.fma(const(float(g._P)), z, const(1.0)))
    p, two_n = lanes.exp(b.fmul(b.fneg(z), z))
    e = b.fmul(p, two_n)
    q = lanes.fma(const(float(g._A5)), t, const(float(g._A4)))
    for a in (g._A3, g._A2, g._A1):
        q = lanes.fma(q, t, const(float(a)))
    h = b.fmul(b.fmul(b.fmul(q, t), const(0.5)), e)
    return b.select(b.fcmp_ordered("<=", const(0.0), x), b.fsub(const(1.0), h), h), e


def _forward_op(lanes, x):
    return lanes.b.fmul(x, _phi(lanes, x)[0])


def _backward_op(lanes, dy, x):
    cdf, e = _phi(lanes, x)
    b = lanes.b
    return b.fmul(lanes.fma(b.fmul(x, e), lanes.const(float(gelu_erf._RPIF)), cdf), dy)


def _compile() -> tuple[int, int]:
    ahead = AHEAD_BYTES // 4                                           # float32
    engine = calls.machine_code([lanes_function("gelu_erf_forward", 1, 0, _forward_op, ahead),
                                 lanes_function("gelu_erf_backward", 2, 0, _backward_op, ahead)])
    return engine.get_function_address("gelu_erf_forward"), engine.get_function_address("gelu_erf_backward")


def addresses() -> tuple[int, int]:
    """The addresses of the forward and the backward, made and checked at the first call;
    (0, 0) when they are off. Two threads asking at once wait for one build."""
    return calls.built_once(_state, "address", _compile, lambda built: _agrees(*built), (0, 0))


def gelu_forward(x: np.ndarray) -> np.ndarray:
    """x (N,) float32 or float64, C-contiguous -> y (N,): ``gelu_erf.gelu_forward``, float32
    on the lanes when they are on (in parts on threads as there)."""
    lanes = addresses()[0] if x.dtype == np.float32 else 0
    if not lanes:
        return gelu_erf.gelu_forward(x)
    return threads.elementwise(lambda x, y: forward_lanes(lanes, x, y), x, min_part=gelu_erf.PART_MIN)


def gelu_backward(dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    """dy, x (N,) -> dx (N,): ``gelu_erf.gelu_backward``, as ``gelu_forward``."""
    lanes = addresses()[1] if x.dtype == np.float32 else 0
    if not lanes:
        return gelu_erf.gelu_backward(dy, x)
    return threads.elementwise(lambda dy, x, dx: backward_lanes(lanes, dy, x, dx), dy, x,
                               min_part=gelu_erf.PART_MIN)


@numba.njit(cache=True, nogil=True)
def forward_lanes(address, x, y):
    """y[:] = gelu(x) for contiguous float32 x, y (N,) through ``addresses()[0]``."""
    calls.call_c(address, (x.ctypes.data, y.ctypes.data, x.shape[0]))


@numba.njit(cache=True, nogil=True)
def backward_lanes(address, dy, x, dx):
    """dx[:] = dy gelu'(x) for contiguous float32 dy, x, dx (N,) through ``addresses()[1]``."""
    calls.call_c(address, (dy.ctypes.data, x.ctypes.data, dx.ctypes.data, x.shape[0]))


def _agrees(forward: int, backward: int) -> bool:
    """Every float32 in [-12, 12] in steps of 2^-12 and 0, -0, NaN, +-inf, +-1e30, +-1e-40
    (subnormal), in arrays of 61, forward and backward (dy from -2 to 3): equal bits."""
    x = np.concatenate([np.arange(-12.0, 12.0, 2.0 ** -12),
                        [0.0, -0.0, np.nan, np.inf, -np.inf, 1e30, -1e30, 1e-40, -1e-40]]).astype(np.float32)
    dy = np.linspace(-2.0, 3.0, x.size).astype(np.float32)
    for a in range(0, x.size, 61):
        xs, ds = x[a:a + 61], dy[a:a + 61]
        got, want = np.empty_like(xs), np.empty_like(xs)
        forward_lanes(forward, xs, got)
        gelu_erf._forward32(xs, want)
        if not np.array_equal(got.view(np.int32), want.view(np.int32)):
            return False
        backward_lanes(backward, ds, xs, got)
        gelu_erf._backward32(ds, xs, want)
        if not np.array_equal(got.view(np.int32), want.view(np.int32)):
            return False
    return True
