"""Calls from inside a Numba kernel through an address: NumPy's own float32 GEMM and GEMV
(``cblas_sgemm``, ``cblas_sgemv`` of the OpenBLAS inside NumPy's wheel), and another
kernel exactly as it was compiled on its own. Both run without Python's lock.

Why: a kernel that alternates small products with its own loops (attention: per batch row,
S = Q K^T per head, the softmax, O = P V) makes one Python call per product when the
products go through ``np.matmul``. Each call takes and drops Python's lock; beside a
second thread (``threads.in_parts``, the batch in parts) each waits its turn for it, and
each keeps only a slice of P in cache between its product and the next pass. From inside
one ``nogil`` kernel the same GEMM on the same matrices gives the same bits as
``np.matmul`` (which calls this very function), with one Python call per part instead.

``gemm_address(dtype)`` is the address of the GEMM, or 0 when it is not there (float64,
a NumPy built on another BLAS, or an OpenBLAS with 32-bit integers): the caller then
keeps to ``np.matmul``. ``gemm(address, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
beta, c, ldc)`` calls it, row major, with a, b, c the addresses of the first elements
(``array.ctypes.data`` plus an offset) and alpha, beta float32: C (m, n) = alpha op(A)
op(B) + beta C, op(A) (m, k), op(B) (k, n). ``gemv_address`` and ``gemv(address, trans,
m, n, alpha, a, lda, x, incx, beta, y, incy)`` do the same for the GEMV: y = alpha op(A)
x + beta y, A (m, n) (``minipt.kernels.linear``: a bias's gradient).

``pointer_like(address, like)`` makes an address into a pointer to ``like``'s dtype, for
``numba.carray``: a kernel given the addresses of many arrays (AdamW's parameters) walks
them all in one call, without a list of arrays to build and check on every call.

``compiled_address(dispatcher)`` and ``call_compiled(address, args)`` call a kernel with
one compiled signature (``per_dtype``'s) as that very machine code. A kernel called by
name from another is compiled again into its caller, and LLVM optimised the inlined copy
differently: attention's softmax, inlined so, put P 1 ulp away in some rows (the sums of
its exponentials reassociated otherwise), whichever fastmath flags the caller had.

Addresses are arguments, not constants baked into the machine code, so Numba's disk cache
still serves the kernels that call them.
"""
from __future__ import annotations

import ctypes
import os
import threading

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from . import threads

NO_TRANS, TRANS = 111, 112                 # CBLAS_TRANSPOSE
ROW_MAJOR = 101                            # CBLAS_ORDER
# scipy-openblas, the OpenBLAS in NumPy's wheels, with 64-bit integers and its own prefix.
# float32 only, training's dtype: float64 serves gradient checks, where speed does not
# matter, so it keeps np.matmul and compiles no second set of part kernels.
SYMBOLS = {np.dtype(np.float32): "scipy_cblas_sgemm64_"}
GEMV_SYMBOLS = {np.dtype(np.float32): "scipy_cblas_sgemv64_"}
_found: dict = {}
_ENGINES: list = []                        # compiled IR (``machine_code``), never freed
_BUILDING = threading.RLock()              # one IR build at a time (``built_once``)


def gemm_address(dtype) -> int:
    """The address of NumPy's BLAS GEMM for ``dtype`` (float32), or 0 if absent."""
    return _address(SYMBOLS, dtype)


def gemv_address(dtype) -> int:
    """The address of NumPy's BLAS GEMV (``cblas_sgemv``) for ``dtype``, or 0 if absent."""
    return _address(GEMV_SYMBOLS, dtype)


def _address(symbols: dict, dtype) -> int:
    """The address of ``symbols[dtype]`` in NumPy's OpenBLAS, found once; 0 if absent."""
    dtype = np.dtype(dtype)
    name = symbols.get(dtype)
    if (name, dtype) not in _found:
        _found[name, dtype] = 0
        for lib in threads._blas() if name else ():
            fn = getattr(ctypes.CDLL(lib.filepath), name, None) if lib.internal_api == "openblas" else None
            if fn is not None:
                _found[name, dtype] = ctypes.cast(fn, ctypes.c_void_p).value
                break
    return _found[name, dtype]


@intrinsic
def gemm(typingctx, address, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    """Numba-only: the CBLAS GEMM at ``address`` (see the module's docstring)."""
    if alpha != types.float32 or beta != alpha:
        return None
    sig = types.void(address, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)

    def codegen(context, builder, signature, args):
        i32, i64, real = ir.IntType(32), ir.IntType(64), context.get_value_type(alpha)
        ptr = real.as_pointer()
        want = [i32, i32, i32, i64, i64, i64, real, ptr, i64, ptr, i64, real, ptr, i64]
        return _call_blas(context, builder, signature, args, want)
    return sig, codegen


@intrinsic
def gemv(typingctx, address, trans, m, n, alpha, a, lda, x, incx, beta, y, incy):
    """Numba-only: the CBLAS GEMV at ``address`` (``gemv_address``), row major: y = alpha
    op(A) x + beta y for A (m, n) with leading dimension lda, op(A) = A or A^T (``trans``);
    a, x, y addresses, alpha and beta float32."""
    if alpha != types.float32 or beta != alpha:
        return None
    sig = types.void(address, trans, m, n, alpha, a, lda, x, incx, beta, y, incy)

    def codegen(context, builder, signature, args):
        i32, i64, real = ir.IntType(32), ir.IntType(64), context.get_value_type(alpha)
        ptr = real.as_pointer()
        want = [i32, i32, i64, i64, real, ptr, i64, ptr, i64, real, ptr, i64]
        return _call_blas(context, builder, signature, args, want)
    return sig, codegen


@intrinsic
def pointer_like(typingctx, address, like):
    """Numba-only: ``address`` as a pointer to ``like``'s dtype (``like`` an array)."""
    if not isinstance(like, types.Array):
        return None
    sig = types.CPointer(like.dtype)(address, like)

    def codegen(context, builder, signature, args):
        ptr = context.get_value_type(signature.return_type)
        return builder.inttoptr(_int64(context, builder, args[0], signature.args[0]), ptr)
    return sig, codegen


def compiled_address(dispatcher, signature) -> int:
    """The address of ``dispatcher``'s machine code for ``signature``, its one compiled
    signature (a ``per_dtype`` kernel's), for ``call_compiled``."""
    if list(dispatcher.signatures) != [signature.args]:
        raise TypeError(f"expected one compiled signature {signature.args}, found {dispatcher.signatures}")
    result = dispatcher.overloads[signature.args]
    return result.library.get_pointer_to_function(result.fndesc.llvm_func_name)


@intrinsic
def call_compiled(typingctx, address, args):
    """Numba-only: call the kernel at ``address`` (``compiled_address``) with the tuple
    ``args``, which must have its signature's types exactly; it returns nothing."""
    if not isinstance(args, types.BaseTuple):
        return None
    sig = types.void(address, args)

    def codegen(context, builder, signature, llargs):
        argtys = list(signature.args[1].types)
        values = [builder.extract_value(llargs[1], i) for i in range(len(argtys))]
        fnty = context.call_conv.get_function_type(types.void, argtys)
        fn = builder.inttoptr(_int64(context, builder, llargs[0], signature.args[0]), fnty.as_pointer())
        context.call_conv.call_function(builder, fn, types.void, argtys, values)
        return context.get_dummy_value()
    return sig, codegen


@intrinsic
def call_c(typingctx, address, args):
    """Numba-only: call the C function at ``address`` with the tuple ``args`` (integers
    passed as 64-bit, float32 as float); it returns nothing (``minipt.kernels.tiles``)."""
    if not isinstance(args, types.BaseTuple) or any(t not in types.integer_domain and t != types.float32
                                                     for t in args.types):
        return None
    sig = types.void(address, args)

    def codegen(context, builder, signature, llargs):
        values, want = [], []
        for i, ty in enumerate(signature.args[1].types):
            value = builder.extract_value(llargs[1], i)
            values.append(value if ty == types.float32 else _int64(context, builder, value, ty))
            want.append(value.type if ty == types.float32 else ir.IntType(64))
        fnty = ir.FunctionType(ir.VoidType(), want)
        builder.call(builder.inttoptr(_int64(context, builder, llargs[0], signature.args[0]), fnty.as_pointer()), values)
        return context.get_dummy_value()
    return sig, codegen


def ir_on() -> bool:
    """Whether the kernels written as LLVM IR (``tiles``, ``vexp``, ``vgelu``) may run: the CPU
    Numba compiles for has AVX-512 (``avx512f``; they use its 32 vector registers and 16
    lanes) and ``MINIPT_TILES`` is not 0. That CPU is this one, unless ``NUMBA_CPU_NAME``
    names another (``haswell``: the benchmarks' ``--isa avx2``); then only
    ``NUMBA_CPU_FEATURES`` can give it ``+avx512f``."""
    if os.environ.get("MINIPT_TILES", "1") == "0":
        return False
    from numba.core import config
    if config.CPU_NAME and config.CPU_NAME != "host":
        return "+avx512f" in (config.CPU_FEATURES or "").split(",")
    import llvmlite.binding as llvm
    return bool(llvm.get_host_cpu_features().get("avx512f", False))


def built_once(state: dict, key: str, build, agrees, off):
    """``state[key]``: ``build()``'s result (an IR kernel's addresses), made at the first
    call and kept when ``ir_on()`` and ``agrees(built)``, the first check against the
    twin; else ``off``. Two threads asking at once wait for one build."""
    if state[key] is None:
        with _BUILDING:
            if state[key] is None:
                found = off
                if ir_on():
                    built = build()
                    found = built if agrees(built) else off
                state[key] = found
    return state[key]


def machine_code(modules: list):
    """llvmlite IR ``modules`` linked into one and compiled for this CPU (MCJIT, opt 3): an
    engine whose ``get_function_address`` gives their functions. The machine code lives
    as long as the engine, and its addresses are handed out to kernels, so every engine
    is kept here for the life of the process (a test's second compile of the same
    functions once replaced the first engine in its module's state, freeing the code
    the first addresses pointed to: a later cross-entropy crashed)."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    machine = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3)
    module = llvm.parse_assembly(str(modules[0]))
    for other in modules[1:]:
        module.link_in(llvm.parse_assembly(str(other)))
    module.verify()
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    _ENGINES.append(engine)
    return engine


def _call_blas(context, builder, signature, args, want):
    """Call the CBLAS routine at args[0] with row major order and args[1:] converted to
    ``want``'s types (enums to int32, integers to int64, addresses to pointers)."""
    i32 = ir.IntType(32)
    values = [ir.Constant(i32, ROW_MAJOR)]
    for value, ty, to in zip(args[1:], signature.args[1:], want[1:]):
        if isinstance(to, ir.FloatType):
            values.append(value)
            continue
        wide = _int64(context, builder, value, ty)
        values.append(builder.inttoptr(wide, to) if isinstance(to, ir.PointerType)
                      else builder.trunc(wide, i32) if to == i32 else wide)
    fnty = ir.FunctionType(ir.VoidType(), want)
    builder.call(builder.inttoptr(_int64(context, builder, args[0], signature.args[0]), fnty.as_pointer()), values)
    return context.get_dummy_value()


def _int64(context, builder, value, ty):
    return context.cast(builder, value, ty, types.int64)
