"""A float32 GEMM, C = alpha A B (+ bias), in register tiles written as LLVM IR (built with
llvmlite, Numba's own code generator, and compiled on first use). Two users: attention's
products, called from inside its part kernels (``minipt.kernels.attention``) without
Python's lock, and the forward of a linear layer with a bias (``linear``, from
``minipt.ops.linear``). Its twin is OpenBLAS's GEMM (NumPy's ``@``; ``calls.gemm``), which
it equals bit for bit where it is used.

The tile. One call computes a block of ROWS x COLS = 14 x 32 of C (fewer at the edges):
28 accumulators of 16 float32 lanes each (AVX-512 registers), and for each k in order one
row of B (two vectors, masked at a ragged right edge) times one broadcast element of A per
row, added by a fused multiply-add:

    acc[i, j] = fma(A[i, k], B[k, j], acc[i, j]) for k = 0, 1, ..., K - 1, from acc = 0;
    C[i, j] = alpha acc[i, j]   (+ bias[j], one rounding, as NumPy's ``y += b`` after).

Why the same bits as OpenBLAS. Its SkylakeX kernels accumulate each element of C in that
very order, one FMA per k from zero, when a product is past its small-matrix limit (M N K
above 100^3: below it, kernels of their own take over, and some of their edge elements
are summed otherwise) and K fits in one of its k-panels (K up to 448 here; a longer K is
summed panel by panel). ``fits`` lets the tiles take exactly those products; every other
product keeps calling OpenBLAS. tests/kernels/test_tiles.py compares the two over a grid
of shapes, attention's three layouts, both scales and the linear's packed one, on one
thread and two.

Why faster. For attention's shapes (a K or N of one head, 32 or 64) OpenBLAS first zeroes C
(beta = 0), packs A and B, and runs its kernel on C again; a tile writes each element of
C once and reads A and B where they lie. One thread, in cache, T 256, D 32 (BERT L's
heads): P V 28.6 against 40.2 us, P^T dO 29.2 against 36.6. Inside a BERT L step, timed
per phase with the CPU's cycle counter (a part of the batch, one layer): P V 0.91 against
1.21 ms, dS K 0.93-1.03 against 1.19-1.21, and, with the backward one head at a time
(``attention._backward_part``), P^T dO 0.82-0.84 against 1.07 and dS^T Q 0.96-1.00
against 1.13-1.18. Q K^T stays on OpenBLAS: the tile needs K^T laid out first, and lost
(1.99 against 1.72 ms). Below OpenBLAS's small-matrix limit its own kernels were as fast
or faster (128 x 32 x 128: 8.1 against 7.8 us). 14 rows were level with 12 on these.

A linear's forward, y = x W^T + b: W^T is first laid out in panels of COLS columns
(``pack``, 4-15 us), and the bias is added as each tile is stored, so y is written once;
NumPy writes it, then reads and writes it again for ``+= b``. Alone, one thread: 1.04x
(1024 x 192 x 576) to 1.28x (512 x 64 x 64) NumPy's ``x @ W.T`` then ``+= b``. In whole
steps (alternating rounds in one process) the gain is smaller and is only where there is
a bias and the product is large: BERT M 1.02x, L 1.01x, GPT M 1.03x, L 1.01x; at size S
and without a bias (T5) no gain, or a loss (T5 S 0.94x), so ``takes_linear`` leaves those
to NumPy. The backward's dy W on the tiles lost in whole steps (BERT M 0.97x).

Only with AVX-512 (``avx512f`` among the CPU's features): the 28 accumulators need 32
vector registers; on AVX2 the same tile would spill, and OpenBLAS keeps every product.
``table()`` is then empty, as it is when ``MINIPT_TILES=0`` or a first check against
NumPy's matmul finds a single bit apart (a NumPy built on another BLAS).

Editing this file: the attention part kernels inline ``product`` into Numba's disk
cache, which sees only attention.py's own date, so attention.py records this file's hash
(``INLINED_SOURCES``; tests/kernels/test_kernel_cache.py names the new one).
"""
from __future__ import annotations

import numba
import numpy as np

from . import calls, threads

# Numba's disk cache checks only this file's date; these files' code is compiled into
# its kernels, so their hashes are kept here (tests/kernels/test_kernel_cache.py).
INLINED_SOURCES = {"calls.py": "7c924b4ecd3fa4b0"}

ROWS, LANES, VECTORS = 14, 16, 2
COLS = LANES * VECTORS
BLOCK = 7 * ROWS                 # rows of a linear's input a tile sweep keeps in cache
MIN_ROWS = 128                   # rows per thread at the least, for ``linear``
LINEAR_MIN = 1 << 24             # multiply-adds: in whole steps smaller linears gained nothing
SMALL = 100 ** 3                 # OpenBLAS's own small-matrix kernels up to this M N K
PANEL = 448                      # the longest K OpenBLAS sums in one k-panel
_state: dict = {"table": None}


def _tile_ir(rows: int):
    """LLVM IR of ``tile_<rows>(a, sai, sak, b, ldb, c, ldc, k, n, bias, alpha)``: C[:rows, :n] =
    alpha A B (+ bias) with n <= COLS, k >= 1; a, b, c, bias addresses; A(i, k) at
    a + 4 (i sai + k sak), B(k, j) at b + 4 (k ldb + j), C(i, j) at c + 4 (i ldc + j); a
    bias address of 0 adds none, another adds bias[j] to each row of the tile."""
    import llvmlite.binding as llvm
    from llvmlite import ir

    f32, i64, i32, i1 = ir.FloatType(), ir.IntType(64), ir.IntType(32), ir.IntType(1)
    vf, vi, vb = ir.VectorType(f32, LANES), ir.VectorType(i32, LANES), ir.VectorType(i1, LANES)
    pf, pv = f32.as_pointer(), vf.as_pointer()
    mod = ir.Module(name=f"tile_{rows}")
    mod.triple = llvm.get_process_triple()
    fma = ir.Function(mod, ir.FunctionType(vf, [vf, vf, vf]), name="llvm.fma.v16f32")
    load = ir.Function(mod, ir.FunctionType(vf, [pv, i32, vb, vf]), name="llvm.masked.load.v16f32.p0v16f32")
    store = ir.Function(mod, ir.FunctionType(ir.VoidType(), [vf, pv, i32, vb]), name="llvm.masked.store.v16f32.p0v16f32")
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [i64] * 10 + [f32]), name=f"tile_{rows}")
    a, sai, sak, b, ldb, c, ldc, k_end, n, bias, alpha = fn.args
    entry, loop, done = fn.append_basic_block("entry"), fn.append_basic_block("loop"), fn.append_basic_block("done")
    biased, unbiased = fn.append_basic_block("biased"), fn.append_basic_block("unbiased")

    def splat(bd, x, vec):                                   # x in every lane of a vec
        one = bd.insert_element(ir.Constant(vec, ir.Undefined), x, ir.Constant(i32, 0))
        return bd.shuffle_vector(one, ir.Constant(vec, ir.Undefined), ir.Constant(vi, [0] * LANES))

    bd = ir.IRBuilder(entry)
    ap, bp, cp = bd.inttoptr(a, pf), bd.inttoptr(b, pf), bd.inttoptr(c, pf)
    width = splat(bd, bd.trunc(n, i32), vi)
    masks = [bd.icmp_signed("<", ir.Constant(vi, [LANES * v + j for j in range(LANES)]), width) for v in range(VECTORS)]
    zero, four = ir.Constant(vf, [0.0] * LANES), ir.Constant(i32, 4)
    bd.branch(loop)

    bl = ir.IRBuilder(loop)                                                  # one k per pass
    k = bl.phi(i64)
    acc = [[bl.phi(vf) for _ in range(VECTORS)] for _ in range(rows)]
    brow = bl.gep(bp, [bl.mul(k, ldb)])
    bvec = [bl.call(load, [bl.bitcast(bl.gep(brow, [ir.Constant(i64, LANES * v)]), pv), four, masks[v], zero])
            for v in range(VECTORS)]
    acol = bl.gep(ap, [bl.mul(k, sak)])
    new = []
    for i in range(rows):
        x = splat(bl, bl.load(bl.gep(acol, [bl.mul(ir.Constant(i64, i), sai)])), vf)
        new.append([bl.call(fma, [x, bvec[v], acc[i][v]]) for v in range(VECTORS)])
    k_next = bl.add(k, ir.Constant(i64, 1))
    k.add_incoming(ir.Constant(i64, 0), entry)
    k.add_incoming(k_next, loop)
    for i in range(rows):
        for v in range(VECTORS):
            acc[i][v].add_incoming(zero, entry)
            acc[i][v].add_incoming(new[i][v], loop)
    bl.cbranch(bl.icmp_signed("<", k_next, k_end), loop, done)

    bd = ir.IRBuilder(done)                                                  # C = alpha acc (+ bias)
    scaled = [[bd.fmul(splat(bd, alpha, vf), new[i][v]) for v in range(VECTORS)] for i in range(rows)]
    bd.cbranch(bd.icmp_unsigned("==", bias, ir.Constant(i64, 0)), unbiased, biased)

    def store_rows(bd, add):
        for i in range(rows):
            crow = bd.gep(cp, [bd.mul(ir.Constant(i64, i), ldc)])
            for v in range(VECTORS):
                at = bd.bitcast(bd.gep(crow, [ir.Constant(i64, LANES * v)]), pv)
                bd.call(store, [scaled[i][v] if add is None else bd.fadd(scaled[i][v], add[v]), at, four, masks[v]])
        bd.ret_void()

    store_rows(ir.IRBuilder(unbiased), None)
    bd = ir.IRBuilder(biased)
    bp_ = bd.inttoptr(bias, pf)
    store_rows(bd, [bd.call(load, [bd.bitcast(bd.gep(bp_, [ir.Constant(i64, LANES * v)]), pv), four, masks[v], zero])
                    for v in range(VECTORS)])
    return mod


def _compile() -> np.ndarray:
    """Compile tile_1 .. tile_ROWS; -> their addresses, indexed by rows (entry 0 unused)."""
    engine = calls.machine_code([_tile_ir(rows) for rows in range(1, ROWS + 1)])
    return np.array([0] + [engine.get_function_address(f"tile_{r}") for r in range(1, ROWS + 1)], dtype=np.int64)


def table() -> np.ndarray:
    """The tiles' addresses for ``product`` (int64, indexed by rows), made and checked at the
    first call; empty when the tiles are off (see the module docstring). Two part threads
    asking at once wait for one build."""
    return calls.built_once(_state, "table", _compile, _agrees, np.zeros(0, dtype=np.int64))


@numba.njit(cache=True, inline="always")
def fits(tab, m, n, k) -> bool:
    """Whether the tiles take the product C (m, n) = A (m, k) B (k, n): they are there and
    OpenBLAS would sum it in their order (past its small kernels, one k-panel)."""
    return tab.shape[0] > 1 and m * n * k > SMALL and k <= PANEL


@numba.njit(cache=True, inline="always")
def product(tab, m, n, k, alpha, a, sai, sak, b, ldb, c, ldc):
    """C[:m, :n] = alpha A B (float32), tile by tile; arguments as ``_tile_ir``'s, strides
    in elements."""
    for j0 in range(0, n, COLS):
        w = min(COLS, n - j0)
        for i0 in range(0, m, ROWS):
            h = min(ROWS, m - i0)
            calls.call_c(tab[h], (a + 4 * i0 * sai, sai, sak, b + 4 * j0, ldb, c + 4 * (i0 * ldc + j0), ldc,
                                  k, w, 0, alpha))


@numba.njit(cache=True, nogil=True)
def pack(w):
    """W (n, k) -> W^T cut into column panels (P, k, COLS), P = ceil(n / COLS), zero past n:
    each panel's rows lie together, so a tile reads its B from one stretch of memory."""
    n, k = w.shape
    out = np.empty(((n + COLS - 1) // COLS, k, COLS), dtype=np.float32)  # (P, k, COLS)
    for p in range(out.shape[0]):
        w_p = min(COLS, n - p * COLS)
        for i in range(k):
            for col in range(w_p):
                out[p, i, col] = w[p * COLS + col, i]
            for col in range(w_p, COLS):
                out[p, i, col] = 0.0
    return out


@numba.njit(cache=True, nogil=True)
def linear_rows(tab, x, wp, b, y):
    """y (m, n) = x (m, k) W^T + b (n,) for C-ordered x, y and b, ``wp = pack(W)``. BLOCK rows
    of x at a time go through every panel, so they are read from cache after the first."""
    m, k = x.shape
    n = y.shape[1]
    one = np.float32(1.0)
    for r0 in range(0, m, BLOCK):
        r1 = min(m, r0 + BLOCK)
        for p in range(wp.shape[0]):
            j0 = p * COLS
            for i0 in range(r0, r1, ROWS):
                calls.call_c(tab[min(ROWS, r1 - i0)], (x.ctypes.data + 4 * i0 * k, k, 1, wp[p].ctypes.data, COLS,
                                                      y.ctypes.data + 4 * (i0 * n + j0), n, k, min(COLS, n - j0),
                                                      b.ctypes.data + 4 * j0, one))


def takes_linear(tab, x2, w, b) -> bool:
    """Whether ``linear`` gives ``x2 @ w.T + b`` here: float32 with a bias, x2 and b
    C-ordered, a product the tiles take (``fits``) of at least LINEAR_MIN multiply-adds."""
    m, k, n = x2.shape[0], x2.shape[1], w.shape[0]
    return (b is not None and x2.dtype == np.float32 and w.dtype == np.float32 and b.dtype == np.float32
            and x2.flags.c_contiguous and b.flags.c_contiguous and m * n * k >= LINEAR_MIN and fits(tab, m, n, k))


def linear(tab, x2, w, b):
    """x2 (m, k) @ w.T (n, k) + b (n,) -> y (m, n), the bits of NumPy's ``x2 @ w.T`` then
    ``+= b`` with the bias added as each tile is stored; the rows cut over the threads
    Numba has (one inside a part of the batch)."""
    wp, y = pack(w), np.empty((x2.shape[0], w.shape[0]), dtype=np.float32)
    threads.in_parts(lambda sl: linear_rows(tab, x2[sl], wp, b, y[sl]), x2.shape[0], min_part=MIN_ROWS)
    return y


@numba.njit(cache=True, nogil=True)
def matmul(tab, a, b, alpha):
    """alpha a @ b for float32 matrices a (m, k), any strides, and b (k, n) with unit columns:
    ``product`` from Python, for the first check and the tests."""
    out = np.empty((a.shape[0], b.shape[1]), dtype=np.float32)
    product(tab, a.shape[0], b.shape[1], a.shape[1], alpha, a.ctypes.data, a.strides[0] // 4, a.strides[1] // 4,
            b.ctypes.data, b.strides[0] // 4, out.ctypes.data, b.shape[1])
    return out


def _agrees(tab) -> bool:
    """Every layout attention uses, and a linear's, on shapes the tiles take, equal to
    NumPy's matmul (then ``+= b``)."""
    rng = np.random.default_rng(0)
    for m, n, k in ((256, 32, 256), (200, 100, 64), (300, 33, 448), (130, 257, 40)):
        a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
        at = np.ascontiguousarray(a.T).T                                     # A read down its columns
        for x in (a, at):
            if not np.array_equal(matmul(tab, x, b, np.float32(1.0)), x @ b):
                return False
        w, bias, y = np.ascontiguousarray(b.T), rng.standard_normal(n, dtype=np.float32), np.empty((m, n), np.float32)
        linear_rows(tab, a, pack(w), bias, y)                                # a W^T + bias, W (n, k)
        if not np.array_equal(y, a @ w.T + bias):
            return False
    return True
