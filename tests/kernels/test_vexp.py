"""vexp's exp(x - shift) on 16 lanes (LLVM IR) against Numba's loop over gelu._exp32, its
twin, bit for bit: every float32 up to zero (the forward's and backward's arguments are
never above their row's max or log-sum-exp), shifts, the masked last lanes, and the scaled
form the cross-entropy backward uses."""

import numpy as np
import pytest

from minipt import kernels
from minipt.kernels import calls, vexp

pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="MINIPT_NUMBA=0")
ON = calls.ir_on()
lanes = pytest.mark.skipif(not ON, reason="no AVX-512 or MINIPT_TILES=0: Numba's loop alone")


@lanes
def test_on_avx512_the_lanes_are_on():
    """The first check passed: both functions compiled and equal to the loop."""
    assert all(vexp.addresses())


_built: list = []


def _compiled():
    """The two functions as compiled, whether or not the first check let them on."""
    if not _built:
        _built.append(vexp._compile())
    return _built[0]


def _both(x, shift, scaled=False, off=np.float32(0.01), scale=None):
    ex, ex_scaled = _compiled()
    got, want = np.empty_like(x), np.empty_like(x)
    if scaled:
        scale = np.linspace(-3, 3, x.shape[0]).astype(np.float32) if scale is None else scale
        vexp.exp_rows_scaled(ex_scaled, x, shift, off, scale, got)
        vexp.exp_rows_scaled(0, x, shift, off, scale, want)
    else:
        vexp.exp_rows(ex, x, shift, got)
        vexp.exp_rows(0, x, shift, want)
    return got.view(np.int32), want.view(np.int32)


@lanes
@pytest.mark.slow
def test_every_float32_up_to_zero_gives_the_loops_bits():
    """All 2^31 bit patterns with the sign bit set (-0 to -inf, and the NaNs), in rows of
    64, plain and scaled, in chunks of 2^24."""
    chunk = 1 << 24
    for start in range(0x80000000, 0x100000000, chunk):
        x = np.arange(start, start + chunk, dtype=np.uint32).view(np.float32).reshape(-1, 64)
        shift = np.zeros(x.shape[0], np.float32)
        for scaled in (False, True):
            got, want = _both(x, shift, scaled)
            assert np.array_equal(got, want), (hex(start), scaled)


@lanes
@pytest.mark.parametrize("V", [1, 5, 15, 16, 17, 31, 33, 64, 65, 250, 257])
def test_rows_of_any_length_and_shift(V):
    """Lengths off 16 (the masked last lanes), shifts of any size, arguments of both signs."""
    r = np.random.default_rng(V)
    x = (r.standard_normal((50, V)) * 30).astype(np.float32)
    for shift in (x.max(axis=1), r.standard_normal(50).astype(np.float32) * 40):
        for scaled in (False, True):
            got, want = _both(x, shift.astype(np.float32), scaled)
            assert np.array_equal(got, want), (V, scaled)


@lanes
def test_the_lanes_are_exp():
    """Against float64 exp, to float32 rounding (the twin's polynomial: 3e-9 relative)."""
    x = np.linspace(-80, 80, 4001, dtype=np.float32).reshape(-1, 1)
    got = np.empty_like(x)
    vexp.exp_rows(_compiled()[0], x, np.zeros(x.shape[0], np.float32), got)
    want = np.exp(x.astype(np.float64))
    assert np.abs(got / want - 1).max() < 3e-7


@lanes
def test_masked_lanes_past_the_row_are_not_written():
    """A row of 20 inside a longer buffer: the 12 lanes past it keep their values."""
    x = np.zeros((1, 32), np.float32)
    out = np.full((1, 32), 7.0, np.float32)
    vexp.exp_rows(_compiled()[0], x[:, :20], np.zeros(1, np.float32), out[:, :20])
    assert np.all(out[0, :20] == 1.0) and np.all(out[0, 20:] == 7.0)


@lanes
def test_compiling_again_leaves_the_first_functions_running():
    """A second compile (as ``_compiled`` above does) makes a second engine; the addresses
    the kernels were given still point at live code after the collector ran."""
    import gc
    first = vexp.addresses()
    for _ in range(3):
        vexp._compile()
        gc.collect()
    x = np.linspace(-30, 0, 3 * 61, dtype=np.float32).reshape(3, 61)
    got, want = np.empty_like(x), np.empty_like(x)
    vexp.exp_rows(first[0], x, np.zeros(3, np.float32), got)
    vexp.exp_rows(0, x, np.zeros(3, np.float32), want)
    assert np.array_equal(got, want)
