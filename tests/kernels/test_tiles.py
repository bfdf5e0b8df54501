"""The register-tile GEMM for attention's products (minipt.kernels.tiles): the bits of
NumPy's matmul (OpenBLAS) on every shape ``fits`` lets it take, in the layouts attention
uses (A by rows, A down its columns, B rows wider than n), both scales; and that the
attention part kernels do call it."""
import os

import numpy as np
import pytest

from minipt import kernels
from minipt.kernels import attention as A
from minipt.kernels import calls, threads, tiles

pytestmark = pytest.mark.skipif(not kernels.ENABLED or not tiles._avx512() or not calls.gemm_address(np.float32)
                                or os.environ.get("MINIPT_TILES") == "0",
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
    monkeypatch.setitem(tiles._state, "table", np.array([0] + [TABLE[1]] * (tiles.ROWS), dtype=np.int64))
    wrong = run()
    assert all(not np.array_equal(a, b) for a, b in zip(right, wrong))   # out (P V), dq (dS K), dk, dv
