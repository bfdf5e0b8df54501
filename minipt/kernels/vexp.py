"""exp(x - shift) over a float32 row, 16 lanes at a time, written as LLVM IR (built with
llvmlite, Numba's code generator, and compiled on first use); its twin is the loop
``e[v] = _exp(x[v] - shift)`` Numba compiles from ``gelu._exp32``, which it equals bit for
bit. One user: the fused cross-entropy (``minipt.kernels.cross_entropy``), whose forward
and backward are bound by their exponentials.

Why. On this CPU LLVM vectorises Numba's loops 8 lanes wide (it prefers 256-bit vectors
on Intel's AVX-512 parts), and the exponential is about twenty instructions a vector.
Here the same instructions run on 16 lanes (512-bit registers). Alone, one thread, in
cache: the cross-entropy forward over 512 x 512 logits (T5 L's) took 138 us against 174,
its backward 81 against 112; over 1024 x 250, 165 against 182 and 84 against 112; over
2048 x 65 (GPT M's), 124-133 against 134-146 and 53 against 61. Inside a T5 L step
(profiled) the forward took 212 us against 228 and the backward 126 against 138.

Why the same bits. Every lane is computed on its own, by the operations Numba's loop
compiles to with ``fastmath={"reassoc", "contract"}`` (read off its machine code): the
subtraction, the clamp to [-87, 88] (NaN passes through), n = floor(fma(z, log2 e, 1/2)),
r = fma(-n, ln2_lo, fma(-n, ln2_hi, z)), the polynomial by Horner's rule in six fused
multiply-adds, and 2^n from n's bits; the backward's form subtracts its offset in the
fused multiply-add that makes exp's last product, as Numba's loop does. A lane does not
see its neighbours, so the width changes no result. The first call checks both functions
against the loop on [-88, 1] in steps of 2^-10, in rows of 61 (so the last 13 lanes go
under a mask), with two shifts (``_agrees``); tests/kernels/test_vexp.py checks all 2^31
float32 up to zero (slow), and the cross-entropy tests the kernels' bits both ways.

Only with AVX-512 (``avx512f``); ``addresses()`` is (0, 0) without it, when ``MINIPT_TILES=0``,
or when the first check finds a bit apart, and the callers keep Numba's loop.

Editing this file: cross_entropy.py compiles ``exp_row`` into its kernels and records
this file's hash (``INLINED_SOURCES``; tests/kernels/test_kernel_cache.py).
"""
from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.extending import overload

from . import calls, prefetch
from .attention_rows import _exp
from .gelu import _C2, _C3, _C4, _C5, _C6, _LN2_HI, _LN2_LO, _LOG2E, _ZMAX, _ZMIN

# Numba's disk cache checks only this file's date; these files' code is compiled into
# its kernels, so their hashes are kept here (tests/kernels/test_kernel_cache.py).
INLINED_SOURCES = {"attention_rows.py": "c8c5e41590ab0410", "calls.py": "7c924b4ecd3fa4b0", "gelu.py": "abdd7eb1a7e88395", "prefetch.py": "90f74125a24a6dd9"}

LANES = 16
_state: dict = {"address": None}


class Lanes:
    """LANES float32 lanes on an ``ir.IRBuilder`` (``.b``): constants, splats, fused
    multiply-adds, and the steps of ``gelu._exp32`` as Numba's loops compile them."""

    def __init__(self, module: ir.Module, builder: ir.IRBuilder):
        self.b = builder
        self.vec = ir.VectorType(ir.FloatType(), LANES)
        self.ivec = ir.VectorType(ir.IntType(32), LANES)
        self._fma = ir.Function(module, ir.FunctionType(self.vec, [self.vec] * 3), name="llvm.fma.v16f32")
        self._floor = ir.Function(module, ir.FunctionType(self.vec, [self.vec]), name="llvm.floor.v16f32")
        self.fabs = ir.Function(module, ir.FunctionType(self.vec, [self.vec]), name="llvm.fabs.v16f32")

    def const(self, v, ty=None):
        return ir.Constant(ty or self.vec, [v] * LANES)

    def splat(self, value, ty=None):                                   # a scalar in every lane
        ty, i32 = ty or self.vec, ir.IntType(32)
        one = self.b.insert_element(ir.Constant(ty, ir.Undefined), value, ir.Constant(i32, 0))
        return self.b.shuffle_vector(one, ir.Constant(ty, ir.Undefined), ir.Constant(self.ivec, [0] * LANES))

    def fma(self, a, x, c):                                            # a x + c, rounded once
        return self.b.call(self._fma, [a, x, c])

    def exp(self, z):
        """(p, 2^n), exp(z) = p 2^n: z clamped to [-87, 88] (NaN passes), n = floor(fma(z,
        log2 e, 1/2)), r = fma(-n, ln2_lo, fma(-n, ln2_hi, z)), p by Horner's rule in six
        fused multiply-adds, 2^n from n's bits. The caller makes the last product."""
        b, const = self.b, self.const
        z = b.select(b.fcmp_ordered(">", const(float(_ZMIN)), z), const(float(_ZMIN)), z)
        z = b.select(b.fcmp_ordered("<", const(float(_ZMAX)), z), const(float(_ZMAX)), z)
        nf = b.call(self._floor, [self.fma(z, const(float(_LOG2E)), const(0.5))])
        r = self.fma(nf, const(-float(_LN2_HI)), z)
        r = self.fma(nf, const(-float(_LN2_LO)), r)
        p = self.fma(r, const(float(_C6)), const(float(_C5)))
        for c in (_C4, _C3, _C2, 1.0, 1.0):
            p = self.fma(r, p, const(float(c)))
        two_n = b.bitcast(b.shl(b.add(b.fptosi(nf, self.ivec), const(127, self.ivec)), const(23, self.ivec)), self.vec)
        return p, two_n


def lanes_function(name: str, inputs: int, floats: int, op, ahead: int = 0) -> ir.Module:
    """A module with void name(i64 in_1 .. in_k, i64 out, i64 n, float f_1 .. f_m):
    out[v] = op(lanes, x_1 .. x_k, f_1 .. f_m) for v < n, LANES at a time, the last ones
    under a mask (their loads read 0, their stores are not made). The x are vectors of
    LANES floats from the float32 arrays at in_1 .. in_k, ``lanes`` a ``Lanes``. With
    ``ahead`` > 0 each step of LANES also prefetches every array's line ``ahead`` floats
    on (``minipt.kernels.prefetch``: for arrays that may have left the cache)."""
    f32, i32, i64 = ir.FloatType(), ir.IntType(32), ir.IntType(64)
    module = ir.Module(name=name)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [i64] * (inputs + 2) + [f32] * floats), name=name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    lanes = Lanes(module, b)
    vec, vb = lanes.vec, ir.VectorType(ir.IntType(1), LANES)
    pv = vec.as_pointer()
    load = ir.Function(module, ir.FunctionType(vec, [pv, i32, vb, vec]), name="llvm.masked.load.v16f32.p0v16f32")
    store = ir.Function(module, ir.FunctionType(ir.VoidType(), [vec, pv, i32, vb]),
                        name="llvm.masked.store.v16f32.p0v16f32")
    *ins, out = (b.inttoptr(a, f32.as_pointer()) for a in fn.args[:inputs + 1])
    n, extra = fn.args[inputs + 1], fn.args[inputs + 2:]
    wide = b.and_(n, ir.Constant(i64, -LANES))                         # n rounded down to LANES

    head, work, done = (fn.append_basic_block(f"lanes.{s}") for s in ("head", "body", "done"))
    before = b.block
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), before)
    b.cbranch(b.icmp_signed("<", i, wide), work, done)
    b.position_at_end(work)                                            # LANES at a time
    if ahead:
        on = b.add(i, ir.Constant(i64, ahead))
        for p, write in [(p, 0) for p in ins] + [(out, 1)]:
            prefetch.hint(module, b, b.gep(p, [on]), write)
    xs = [b.load(b.bitcast(b.gep(p, [i]), pv), align=4) for p in ins]
    b.store(op(lanes, *xs, *extra), b.bitcast(b.gep(out, [i]), pv), align=4)
    i.add_incoming(b.add(i, ir.Constant(i64, LANES)), b.block)
    b.branch(head)
    b.position_at_end(done)

    rest = b.trunc(b.sub(n, wide), i32)                                # 0 .. LANES - 1 left
    with b.if_then(b.icmp_signed(">", rest, ir.Constant(i32, 0))):     # the last ones under a mask
        mask = b.icmp_signed("<", ir.Constant(lanes.ivec, list(range(LANES))), lanes.splat(rest, lanes.ivec))
        four = ir.Constant(i32, 4)
        xs = [b.call(load, [b.bitcast(b.gep(p, [wide]), pv), four, mask, lanes.const(0.0)]) for p in ins]
        b.call(store, [op(lanes, *xs, *extra), b.bitcast(b.gep(out, [wide]), pv), four, mask])
    b.ret_void()
    return module


def _exp_ir(scaled: bool) -> ir.Module:
    """void exp_shift(i64 src, i64 dst, i64 n, float shift): dst[v] = exp(src[v] - shift),
    v < n; or (``scaled``) exp_shift_scaled(..., float shift, float off, float scale):
    dst[v] = (exp(src[v] - shift) - off) scale, with exp's last product and the
    subtraction of off in one fused multiply-add, as Numba's loop has them."""
    def op(lanes, x, shift, *off_scale):
        p, two_n = lanes.exp(lanes.b.fsub(x, lanes.splat(shift)))
        if not scaled:
            return lanes.b.fmul(p, two_n)
        off, scale = off_scale
        return lanes.b.fmul(lanes.fma(p, two_n, lanes.b.fneg(lanes.splat(off))), lanes.splat(scale))
    return lanes_function("exp_shift_scaled" if scaled else "exp_shift", 1, 3 if scaled else 1, op)


def _compile() -> tuple[int, int]:
    engine = calls.machine_code([_exp_ir(False), _exp_ir(True)])
    return engine.get_function_address("exp_shift"), engine.get_function_address("exp_shift_scaled")


def addresses() -> tuple[int, int]:
    """The addresses of ``exp_shift`` and ``exp_shift_scaled``, made and checked at the
    first call; (0, 0) when they are off (see the module docstring). Two threads asking at
    once wait for one build."""
    return calls.built_once(_state, "address", _compile, lambda built: _agrees(*built), (0, 0))


def exp_row(ex, x, shift, out):
    """out[:] = exp(x - shift) through ``ex`` (``addresses()[0]``, not 0), for contiguous
    float32 rows x, out of one length. Numba-only; the callers keep their own loop for
    ex 0 and for float64, for which this raises."""
    raise NotImplementedError("exp_row is for Numba kernels")


def exp_row_scaled(ex, x, shift, off, scale, out):
    """out[:] = (exp(x - shift) - off) scale through ``ex`` (``addresses()[1]``), as
    ``exp_row``."""
    raise NotImplementedError("exp_row_scaled is for Numba kernels")


@overload(exp_row, inline="always")
def _exp_row_impl(ex, x, shift, out):
    if x.dtype == numba.types.float32:
        return lambda ex, x, shift, out: calls.call_c(ex, (x.ctypes.data, out.ctypes.data, x.shape[0], shift))

    def float64(ex, x, shift, out):
        raise ValueError("exp_row: float32 only")
    return float64


@overload(exp_row_scaled, inline="always")
def _exp_row_scaled_impl(ex, x, shift, off, scale, out):
    if x.dtype == numba.types.float32:
        return lambda ex, x, shift, off, scale, out: calls.call_c(
            ex, (x.ctypes.data, out.ctypes.data, x.shape[0], shift, off, scale))

    def float64(ex, x, shift, off, scale, out):
        raise ValueError("exp_row_scaled: float32 only")
    return float64


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"}, error_model="numpy")
def exp_rows(ex, x, shift, out):
    """out = exp(x - shift[:, None]) for x (N, V) float32: through ``ex``, or for ex 0 by
    Numba's loop (the twin). The first check and the tests call both through this."""
    for i in range(x.shape[0]):
        if ex != 0:
            exp_row(ex, x[i], shift[i], out[i])
        else:
            for v in range(x.shape[1]):
                out[i, v] = _exp(x[i, v] - shift[i])


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"}, error_model="numpy")
def exp_rows_scaled(ex, x, shift, off, scale, out):
    """out = (exp(x - shift[:, None]) - off) scale[:, None], as ``exp_rows``."""
    for i in range(x.shape[0]):
        if ex != 0:
            exp_row_scaled(ex, x[i], shift[i], off, scale[i], out[i])
        else:
            for v in range(x.shape[1]):
                out[i, v] = (_exp(x[i, v] - shift[i]) - off) * scale[i]


def _agrees(ex: int, ex_scaled: int) -> bool:
    """Every float32 in [-88, 1] in steps of 2^-10 (and 0, -0, NaN, the clamps' edges), in
    rows of 61 (16 lanes and a tail), shifted by 0 and by 1.5, plain and scaled: equal
    bits both ways."""
    x = np.concatenate([np.arange(-88.0, 1.0, 2.0 ** -10), [0.0, -0.0, np.nan, -87.0, 88.0, -1e30, 1e30]])
    x = x.astype(np.float32)
    x = np.resize(x, (-(-x.size // 61), 61))
    for s in (0.0, 1.5):
        shift = np.full(x.shape[0], s, dtype=np.float32)
        got, want = np.empty_like(x), np.empty_like(x)
        exp_rows(ex, x, shift, got)
        exp_rows(0, x, shift, want)
        if not np.array_equal(got.view(np.int32), want.view(np.int32)):
            return False
        scale = np.linspace(-2.0, 3.0, x.shape[0]).astype(np.float32)
        exp_rows_scaled(ex_scaled, x, shift, np.float32(0.001), scale, got)
        exp_rows_scaled(0, x, shift, np.float32(0.001), scale, want)
        if not np.array_equal(got.view(np.int32), want.view(np.int32)):
            return False
    return True
