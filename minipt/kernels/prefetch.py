"""Software prefetch inside a Numba kernel that walks an array's rows in memory order:
``read_ahead(x[n])`` and ``write_ahead(y[n])``, called at row n, ask the CPU to bring the
cache lines ``AHEAD_BYTES`` past the row's into every level of the cache, for a read or
for a write. They are hints (LLVM's ``llvm.prefetch``: x86's ``prefetcht0`` and
``prefetchw``): they change no value and never fault, not even on lines past the array's
end, which the last rows ask for. ``vexp.lanes_function`` emits the same hint in its IR.

Why: a training step's row kernels (LayerNorm's) read arrays written long before, such
as the input a forward saved for its backward, which by then is no longer in the core's
cache, and the CPU's own prefetcher left them waiting for memory.
benchmarks/bench_prefetch.py, on the 2-core AVX-512 development machine: LayerNorm and
RMSNorm at 1024 x 128 float32 rows, inputs out of cache, took 1.25-1.78x as long without
the hints; in cache, 0.96-0.97x; at 2048 x 192, where the CPU's prefetcher keeps up,
0.95-1.12x. Inside BERT M steps (benchmarks/kernels_in_step.py) the caller's LayerNorm
calls took 2.57 ms a step against 3.33 without. Not every loop gains: Adam's update, one
long stream over four arrays, took 7.3 ms against 3.1 at 3M elements out of cache with a
hint every 16 elements (the loop cut into pieces of a line), and keeps none.
"""
import numba
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

AHEAD_BYTES = 4096     # how far ahead of the row at hand a kernel prefetches: one page
LINE_BYTES = 64        # a cache line; one prefetch each


def hint(module: ir.Module, builder: ir.IRBuilder, pointer, write: int) -> None:
    """Emit LLVM's prefetch of ``pointer`` (any pointer type) for a read (0) or a write (1),
    into every level of the cache."""
    i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
    fn = cgutils.get_or_insert_function(module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                        "llvm.prefetch.p0")
    # (address, read 0 / write 1, locality 3: keep in every level, 1: a data line)
    builder.call(fn, [builder.bitcast(pointer, i8p), ir.Constant(i32, write), ir.Constant(i32, 3),
                      ir.Constant(i32, 1)])


def _prefetch(write: int):
    @intrinsic
    def prefetch(typingctx, a, i):
        """Numba-only: the hint for element ``i`` of ``a``'s memory (its data pointer + i items)."""
        if not isinstance(a, types.Array) or not isinstance(i, types.Integer):
            return None
        sig = types.void(a, i)

        def codegen(context, builder, signature, args):
            i64 = ir.IntType(64)
            array = context.make_array(signature.args[0])(context, builder, args[0])
            item = context.get_abi_sizeof(context.get_data_type(signature.args[0].dtype))
            index = context.cast(builder, args[1], signature.args[1], types.int64)
            address = builder.add(builder.ptrtoint(array.data, i64), builder.mul(index, ir.Constant(i64, item)))
            hint(builder.module, builder, builder.inttoptr(address, ir.IntType(8).as_pointer()), write)
            return context.get_dummy_value()
        return sig, codegen
    return prefetch


_read = _prefetch(0)
_write = _prefetch(1)


@numba.njit(inline="always")
def read_ahead(row):
    """At ``row`` (a contiguous row of an array walked row by row): prefetch, for reading,
    the lines AHEAD_BYTES past it (a row further on; past the array's last rows, lines
    that are not its own, which a hint may ask for)."""
    ahead, line = AHEAD_BYTES // row.itemsize, LINE_BYTES // row.itemsize
    for i in range(ahead, ahead + row.shape[0], line):
        _read(row, i)


@numba.njit(inline="always")
def write_ahead(row):
    """``read_ahead`` for a row about to be written."""
    ahead, line = AHEAD_BYTES // row.itemsize, LINE_BYTES // row.itemsize
    for i in range(ahead, ahead + row.shape[0], line):
        _write(row, i)
