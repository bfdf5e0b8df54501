"""LSTM forward + backward: minipt (Numba cell kernel) against its NumPy twin and
torch.nn.LSTM, at B 32, T 64, d 128 / 256, one and two layers (input width = hidden = d).

    python benchmarks/bench_lstm.py [--rounds 9] [--no-torch] [--torch-threads 2]

Each round times one forward + backward of every side, in an order rotated from round
to round (ABC, BCA, CAB: no side always runs right after another), so load from other
processes falls on all sides alike. Ratios are taken per round (other / minipt: > 1
means minipt is faster) and reported as the median with the spread (min - max) over
rounds. float32; the upstream gradient is the same random array for every side. The
timing code is ``alternate`` (a dozen lines) so it ports to a shared harness.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import try_torch  # noqa: E402

from minipt import kernels  # noqa: E402
from minipt.nn.lstm import LSTM  # noqa: E402


def alternate(sides: dict, rounds: int) -> dict[str, list[float]]:
    """{name: fn}: one untimed warm-up call each, then ``rounds`` rounds timing every fn
    once in a rotated order -> {name: [ms per round]}."""
    names = list(sides)
    for fn in sides.values():
        fn()
    ms = {n: [] for n in names}
    for r in range(rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            t0 = time.perf_counter()
            sides[n]()
            ms[n].append((time.perf_counter() - t0) * 1e3)
    return ms


def ratio(ms: dict, other: str, base: str = "minipt") -> tuple[float, float, float]:
    rs = [o / b for o, b in zip(ms[other], ms[base])]
    return statistics.median(rs), min(rs), max(rs)


def minipt_side(B, T, d, layers, x, dy, twin: bool):
    rng = np.random.default_rng(0)
    stack = [LSTM(d, d, rng=rng) for _ in range(layers)]

    def step():
        saved = kernels.ENABLED
        kernels.ENABLED = not twin and saved
        try:
            h = x
            for m in stack:
                h = m(h)
            g = dy
            for m in reversed(stack):
                g = m.backward(g)[0]
        finally:
            kernels.ENABLED = saved
    return step


def torch_side(torch, d, layers, x, dy):
    lstm = torch.nn.LSTM(d, d, num_layers=layers, batch_first=True)
    xt = torch.from_numpy(x).requires_grad_(True)
    gt = torch.from_numpy(dy)

    def step():
        y, _ = lstm(xt)
        y.backward(gt)
    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--torch-threads", type=int, default=2)
    args = ap.parse_args()
    torch = None if args.no_torch else try_torch(args.torch_threads)
    B, T = 32, 64
    print(f"LSTM forward + backward, float32, B {B}, T {T}; median over {args.rounds} alternating rounds "
          f"(ratio = other / minipt, > 1: minipt faster; spread min - max)")
    print(f"{'d':>4} {'layers':>6} {'minipt ms':>10} {'twin ms':>8} {'twin/minipt':>20} {'torch ms':>9} "
          f"{'torch/minipt':>20}")
    for d in (128, 256):
        for layers in (1, 2):
            r = np.random.default_rng(d + layers)
            x = r.standard_normal((B, T, d)).astype(np.float32)      # (B, T, C)
            dy = r.standard_normal((B, T, d)).astype(np.float32)     # (B, T, H)
            sides = {"minipt": minipt_side(B, T, d, layers, x, dy, twin=False),
                     "twin": minipt_side(B, T, d, layers, x, dy, twin=True)}
            if torch is not None:
                sides["torch"] = torch_side(torch, d, layers, x, dy)
            ms = alternate(sides, args.rounds)
            med = {n: statistics.median(v) for n, v in ms.items()}
            tw = "{:.2f} ({:.2f}-{:.2f})".format(*ratio(ms, "twin"))
            line = f"{d:>4} {layers:>6} {med['minipt']:>10.1f} {med['twin']:>8.1f} {tw:>20}"
            if torch is not None:
                to = "{:.2f} ({:.2f}-{:.2f})".format(*ratio(ms, "torch"))
                line += f" {med['torch']:>9.1f} {to:>20}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
