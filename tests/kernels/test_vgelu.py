"""vgelu's exact-GELU forward and backward on 16 lanes (LLVM IR) against gelu_erf's Numba
loops, their twins, bit for bit: every float32, arrays of any length (the masked last
lanes, Numba's scalar tail), and through the op; against float64 erf to float32 rounding."""
import math

import numpy as np
import pytest

from minipt import kernels
from minipt.kernels import calls, gelu_erf, vgelu

pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="MINIPT_NUMBA=0")
lanes = pytest.mark.skipif(not calls.ir_on(), reason="no AVX-512 or MINIPT_TILES=0: Numba's loops alone")
_built: list = []


def _compiled():
    """The two functions as compiled, whether or not the first check let them on."""
    if not _built:
        _built.append(vgelu._compile())
    return _built[0]


def _both(dy, x, out=None):
    """(lanes, loop) bits of the forward and of the backward (into ``out``, four arrays like x)."""
    fwd, bwd = _compiled()
    out = [np.empty_like(x) for _ in range(4)] if out is None else out
    vgelu.forward_lanes(fwd, x, out[0])
    gelu_erf._forward32(x, out[1])
    vgelu.backward_lanes(bwd, dy, x, out[2])
    gelu_erf._backward32(dy, x, out[3])
    return [o.view(np.int32) for o in out]


@lanes
def test_on_avx512_the_lanes_are_on_and_the_op_uses_them(monkeypatch):
    assert all(vgelu.addresses())
    called = []
    real = vgelu.forward_lanes
    monkeypatch.setattr(vgelu, "forward_lanes", lambda *a: called.append(1) or real(*a))
    kernels.get("gelu_forward")(np.ones(40, np.float32))
    assert called


@lanes
@pytest.mark.slow
def test_every_float32_gives_the_loops_bits():
    """All 2^32 bit patterns (NaNs, infinities and subnormals included), in chunks of 2^24,
    forward and backward (dy a spread of values of both signs)."""
    chunk = 1 << 24
    dy = np.linspace(-3.0, 3.0, chunk).astype(np.float32)
    first, bits = np.arange(chunk, dtype=np.uint32), np.empty(chunk, np.uint32)
    out = [np.empty(chunk, np.float32) for _ in range(4)]
    for start in range(0, 1 << 32, chunk):
        np.add(first, np.uint32(start), out=bits)
        got_f, want_f, got_b, want_b = _both(dy, bits.view(np.float32), out)
        assert np.array_equal(got_f, want_f) and np.array_equal(got_b, want_b), hex(start)


@lanes
@pytest.mark.parametrize("n", [1, 2, 7, 15, 16, 17, 31, 33, 64, 100, 1001])
def test_any_length_and_nothing_written_past_the_end(n):
    r = np.random.default_rng(n)
    x, dy = (r.standard_normal(n) * 4).astype(np.float32), r.standard_normal(n).astype(np.float32)
    got_f, want_f, got_b, want_b = _both(dy, x)
    assert np.array_equal(got_f, want_f) and np.array_equal(got_b, want_b)
    fwd, _ = _compiled()
    out = np.full(n + 16, 7.0, np.float32)
    vgelu.forward_lanes(fwd, x, out[:n])
    assert (out[n:] == 7.0).all()


@lanes
def test_the_lanes_are_gelu_and_its_derivative():
    """Against float64 erf (Abramowitz & Stegun's 1.5e-7 and float32 rounding)."""
    x = np.linspace(-9, 9, 4001).astype(np.float32)
    fwd, bwd = _compiled()
    y, dx = np.empty_like(x), np.empty_like(x)
    vgelu.forward_lanes(fwd, x, y)
    vgelu.backward_lanes(bwd, np.ones_like(x), x, dx)
    xs = x.astype(np.float64)
    cdf = np.array([0.5 * (1 + math.erf(v / math.sqrt(2))) for v in xs])
    assert np.abs(y - xs * cdf).max() < 2e-6
    assert np.abs(dx - (cdf + xs * np.exp(-xs * xs / 2) / math.sqrt(2 * math.pi))).max() < 2e-6
