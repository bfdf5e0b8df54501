"""The register-tile GEMM (minipt.kernels.tiles): the bits of NumPy's matmul (OpenBLAS) on
every shape ``fits`` lets it take, in the layouts attention uses (A by rows, A down its
columns, B rows wider than n), both scales, and in a linear layer's forward (W^T packed,
the bias added in the tile); and that the attention part kernels and ``linear_forward``
do call it."""

import numpy as np
import pytest

from minipt import kernels
from minipt.kernels import attention as A
from minipt.kernels import calls, threads, tiles
from minipt.ops.linear import linear_forward

pytestmark = pytest.mark.skipif(not kernels.ENABLED or not calls.ir_on() or not calls.gemm_address(np.float32),
                                reason="no Numba, no AVX-512, NumPy's BLAS is not its own OpenBLAS, or tiles off")

TABLE = tiles.table() if kernels.ENABLED else np.zeros(0, dtype=np.int64)


def test_the_tiles_pass_their_first_check_on_this_cpu():
    """With AVX-512 and NumPy's own OpenBLAS the tiles are on: their check against matmul
    at the first call found the same bits (a tile that rounds otherwise turns them off)."""
    assert TABLE.shape == (tiles.ROWS + 1,) and (TABLE[1:] != 0).all()

SHAPES = [(256, 32, 256), (256, 256, 32), (200, 100, 64), (300, 33, 448), (130, 257, 40), (1000, 17, 64),
          (13, 1000, 100)]


@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("layout", ["rows", "columns", "wide b"])
@pytest.mark.parametrize("alpha", [1.0, 0.17677669])
def test_tiles_give_the_bits_of_numpy_matmul(m, n, k, layout, alpha):
    assert tiles.fits(TABLE, m, n, k)
    r = np.random.default_rng(m + n + k)
    a = r.standard_normal((m, k), dtype=np.float32)
    b = r.standard_normal((k, n), dtype=np.float32)
    if layout == "columns":                                       # A^T stored: A read down its columns
        a = np.ascontiguousarray(a.T).T
    if layout == "wide b":                                        # B's rows inside wider ones (ldb > n)
        b = np.ascontiguousarray(np.pad(b, ((0, 0), (0, 5))))[:, :n]
    scale = np.float32(alpha)
    got = tiles.matmul(TABLE, a, b, scale)
    for blas in (1, 2):                                           # OpenBLAS on one thread and on two
        with threads.limit(blas=blas):
            want = a @ b if alpha == 1.0 else scale * (a @ b)     # OpenBLAS: alpha times the sum
        assert got.dtype == np.float32 and np.array_equal(got, want)


def test_fits_only_past_openblas_small_kernels_and_within_one_k_panel():
    assert tiles.fits(TABLE, 256, 32, 256)                        # 2.1M multiply-adds, K 256
    assert not tiles.fits(TABLE, 128, 32, 128)                    # 524k: OpenBLAS's small kernels
    assert not tiles.fits(TABLE, 100, 100, 100)                   # exactly 100^3
    assert not tiles.fits(TABLE, 256, 256, tiles.PANEL + 1)       # K summed panel by panel
    assert not tiles.fits(np.zeros(0, dtype=np.int64), 256, 32, 256)   # no tiles


def test_tiles_off_by_environment(monkeypatch):
    monkeypatch.setenv("MINIPT_TILES", "0")
    monkeypatch.setitem(tiles._state, "table", None)
    assert tiles.table().shape == (0,)


def _wrong_tiles(monkeypatch):
    """Every entry of the table the one-row tile: products of more rows come out wrong."""
    monkeypatch.setitem(tiles._state, "table", np.array([0] + [TABLE[1]] * tiles.ROWS, dtype=np.int64))


def _views(B, H, T, D, seed):
    r = np.random.default_rng(seed)
    return [r.standard_normal((B, T, H, D), dtype=np.float32).transpose(0, 2, 1, 3) for _ in range(4)]


def test_attention_calls_the_tiles_on_the_shapes_they_fit(monkeypatch):
    """A table whose every entry is the one-row tile computes wrong products, so the
    attention outputs and gradients move: the part kernels do go through the tiles (the
    bit-equality test of the part kernels, at T 256, then covers them)."""
    q, k, v, dout = _views(1, 2, 256, 32, seed=0)

    def run():
        out, p = A.blas_attention_forward(q, k, v, 0.2, False)
        return [out, *A.blas_attention_backward(dout, q, k, v, p, 0.2, False)[:3]]
    right = run()
    _wrong_tiles(monkeypatch)
    wrong = run()
    assert all(not np.array_equal(a, b) for a, b in zip(right, wrong))   # out (P V), dq (dS K), dk, dv


def test_pack_lays_out_w_transposed_in_column_panels_zero_past_n():
    w = np.arange(50 * 7, dtype=np.float32).reshape(50, 7)        # W (n 50, k 7)
    wp = tiles.pack(w)
    assert wp.shape == (2, 7, tiles.COLS)
    assert np.array_equal(wp[0], w[:32].T) and np.array_equal(wp[1, :, :18], w[32:].T)
    assert not wp[1, :, 18:].any()


LINEAR_SHAPES = [(1024, 128, 384), (1300, 130, 100), (2048, 64, 250), (300, 448, 129), (4096, 192, 768)]


@pytest.mark.parametrize("m,k,n", LINEAR_SHAPES)
@pytest.mark.parametrize("numba_threads", [1, 2])
def test_linear_gives_the_bits_of_matmul_then_bias(m, k, n, numba_threads):
    """y = x W^T + b from the tiles equals NumPy's ``x @ W.T`` then ``+= b`` bit for bit,
    on one thread and with its rows cut over two, against OpenBLAS on one and two."""
    r = np.random.default_rng(m + k + n)
    x = r.standard_normal((m, k), dtype=np.float32)
    w = r.standard_normal((n, k), dtype=np.float32)
    b = r.standard_normal(n, dtype=np.float32)
    assert tiles.takes_linear(TABLE, x, w, b)
    with threads.limit(numba=numba_threads):
        got = tiles.linear(TABLE, x, w, b)
    for blas in (1, 2):
        with threads.limit(blas=blas):
            want = x @ w.T
        want += b
        assert got.dtype == np.float32 and np.array_equal(got, want)


def test_takes_linear_only_biased_float32_products_past_the_threshold():
    r = np.random.default_rng(1)
    x, w, b = (r.standard_normal(s, dtype=np.float32) for s in ((1024, 128), (384, 128), (384,)))
    assert tiles.takes_linear(TABLE, x, w, b)
    assert not tiles.takes_linear(TABLE, x, w, None)                          # no bias: NumPy
    assert not tiles.takes_linear(TABLE, x[:64], w, b)                        # 3.1M < LINEAR_MIN
    assert not tiles.takes_linear(TABLE, x.astype(np.float64), w.astype(np.float64), b.astype(np.float64))
    assert not tiles.takes_linear(TABLE, x[:, ::2], w[:, ::2], b)             # x not C-ordered
    xl, wl = (r.standard_normal(s, dtype=np.float32) for s in ((1024, tiles.PANEL + 64), (384, tiles.PANEL + 64)))
    assert not tiles.takes_linear(TABLE, xl, wl, b)                           # K past one k-panel
    assert not tiles.takes_linear(np.zeros(0, dtype=np.int64), x, w, b)       # no tiles


def test_linear_forward_calls_the_tiles(monkeypatch):
    """A table of wrong tiles (each the one-row one) moves linear_forward's output where the
    tiles take the product, and leaves it where they do not (float64, no bias)."""
    r = np.random.default_rng(2)
    x = r.standard_normal((4, 256, 128), dtype=np.float32)
    w, b = r.standard_normal((384, 128), dtype=np.float32), r.standard_normal(384, dtype=np.float32)
    right, right_nb = linear_forward(x, w, b)[0], linear_forward(x, w, None)[0]
    assert np.array_equal(right, (x.reshape(-1, 128) @ w.T + b).reshape(4, 256, 384))
    _wrong_tiles(monkeypatch)
    assert not np.array_equal(linear_forward(x, w, b)[0], right)
    assert np.array_equal(linear_forward(x, w, None)[0], right_nb)
