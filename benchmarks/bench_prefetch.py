"""The prefetch hints of the row kernels (minipt/kernels/prefetch.py): each kernel against
the same loop compiled without its hints, with the inputs out of cache and in cache.

    python benchmarks/bench_prefetch.py [--rounds 15] [--calls 8]

Out of cache: every call takes the next of a ring of input sets that fill 64 MiB, so its
rows were last touched 64 MiB of traffic before, as a training step's backward finds the
input its forward saved. In cache: every call takes the same set. The two sides alternate
in rounds (benchmarks/harness.py); a round's time is the median of ``--calls`` calls;
ratio = without / with (> 1: the hints pay), median of the per-round ratios (min..max).
Both sides give the same bits, which this script checks first.
"""
from __future__ import annotations

import argparse
import sys
import types
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

from minipt.kernels import layernorm  # noqa: E402

RING_BYTES = 64 << 20
SHAPES = ((1024, 128), (2048, 192))     # a BERT M part's rows, BERT L / T5 L whole batch


@numba.njit(inline="always")
def _no_hint(row):
    pass


def without_hints(kernel):
    """``kernel`` (a Numba dispatcher) compiled again with ``read_ahead`` and ``write_ahead``
    doing nothing: the same loop, no hints."""
    f = kernel.py_func
    glb = {**f.__globals__, "read_ahead": _no_hint, "write_ahead": _no_hint}
    plain = types.FunctionType(f.__code__, glb, f.__name__ + "_plain", f.__defaults__, f.__closure__)
    options = {k: v for k, v in kernel.targetoptions.items() if k not in ("cache", "nopython")}
    return numba.njit(**options)(plain)


def cases(n, c, rng):
    """(name, hinted call, plain call, number of input sets in the ring) for LayerNorm's
    and RMSNorm's forward and backward at (n, c) float32."""
    sets = max(2, RING_BYTES // (3 * n * c * 4))
    xs = [rng.standard_normal((n, c), dtype=np.float32) for _ in range(sets)]
    dys = [rng.standard_normal((n, c), dtype=np.float32) for _ in range(sets)]
    g, b = rng.standard_normal(c, dtype=np.float32), rng.standard_normal(c, dtype=np.float32)
    _, mean, rstd = layernorm.layer_norm_forward(xs[0], g, b, 1e-5)
    _, r = layernorm.rms_norm_forward(xs[0], g, 1e-6)
    args = {
        "layer_norm_forward": lambda i: (xs[i], g, b, 1e-5),
        "layer_norm_backward": lambda i: (dys[i], xs[i], mean, rstd, g),
        "rms_norm_forward": lambda i: (xs[i], g, 1e-6),
        "rms_norm_backward": lambda i: (dys[i], xs[i], r, g),
    }
    for name, make in args.items():
        hinted = getattr(layernorm, name)
        plain = without_hints(hinted)
        for got, want in zip(hinted(*make(0)), plain(*make(0))):
            if not np.array_equal(got, want):
                raise AssertionError(f"{name}: the hints changed a value")
        yield name, hinted, plain, make, sets


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=8)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'kernel':<22} {'rows':>11} {'inputs':<12} {'hints us':>9} {'plain us':>9}  plain/hints (min..max)")
    for n, c in SHAPES:
        for name, hinted, plain, make, sets in cases(n, c, rng):
            for where, ring in (("out of cache", sets), ("in cache", 1)):
                turn = [0]                        # one ring for both sides: a set comes back after `ring` calls

                def side(kernel, ring=ring):
                    def run():
                        turn[0] = (turn[0] + 1) % ring
                        kernel(*make(turn[0]))
                    return run
                cmp = harness.alternate(side(hinted), side(plain), rounds=args.rounds, calls=args.calls, gap=0.0)
                lo, hi = cmp.spread()
                print(f"{name:<22} {n:>5} x {c:<3} {where:<12} {cmp.a_median * 1e6:9.1f} {cmp.b_median * 1e6:9.1f}  "
                      f"{cmp.ratio:.2f}x ({lo:.2f}..{hi:.2f})")


if __name__ == "__main__":
    main()
