"""LSTM forward + backward: minipt (Numba cell kernel) against its NumPy twin and
torch.nn.LSTM, at B 32, T 64, d 128 / 256, one and two layers (input width = hidden = d).

    python benchmarks/bench_lstm.py [--rounds 9] [--no-torch] [--torch-threads 2]

The sides run in alternating rounds (minipt, twin, torch, minipt, twin, torch, ...;
benchmarks/harness.py), one forward + backward per side per round after a warm-up call,
so load from other processes falls on all sides alike. Ratios are taken per round
(other / minipt: > 1 means minipt is faster) and reported as the median with the spread
(min - max) over rounds. float32; the upstream gradient is the same random array for
every side. ``run(quick=True)`` (run_all.py) times d 128 only, in 3 rounds.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

from minipt import kernels  # noqa: E402
from minipt.nn.lstm import LSTM  # noqa: E402

B, T = 32, 64


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


def run(quick: bool = True, rounds: int | None = None, use_torch: bool = True, torch_threads: int = 2) -> list[dict]:
    """Per (d, layers): a row minipt vs twin and a row minipt vs torch (b None when torch
    is not installed or not used), all three sides timed in the same rounds."""
    rounds = rounds or (3 if quick else 9)
    torch = harness.try_torch(torch_threads) if use_torch else None
    rows = []
    for d in ((128,) if quick else (128, 256)):
        for layers in (1, 2):
            r = np.random.default_rng(d + layers)
            x = r.standard_normal((B, T, d)).astype(np.float32)      # (B, T, C)
            dy = r.standard_normal((B, T, d)).astype(np.float32)     # (B, T, H)
            sides = {"minipt": minipt_side(B, T, d, layers, x, dy, twin=False),
                     "twin": minipt_side(B, T, d, layers, x, dy, twin=True)}
            if torch is not None:
                sides["torch"] = torch_side(torch, d, layers, x, dy)
            t = harness.rounds_of(sides, rounds=rounds, calls=1, warmup=1)
            case = f"fwd+bwd B{B} T{T} d{d} layers {layers}"
            rows.append(harness.row("lstm", case, "minipt", "twin", harness.Comparison(t["minipt"], t["twin"]),
                                    d=d, layers=layers))
            if torch is not None:
                rows.append(harness.row("lstm", case, "minipt", "torch", harness.Comparison(t["minipt"], t["torch"]),
                                        d=d, layers=layers))
            else:
                rows.append(harness.row("lstm", case, "minipt", None, harness.Comparison(t["minipt"], []),
                                        d=d, layers=layers,
                                        skipped="torch not used" if not use_torch else "torch not installed"))
    return rows


def spread(r: dict) -> str:
    return f"{r['ratio']:.2f} ({r['ratio_min']:.2f}-{r['ratio_max']:.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--torch-threads", type=int, default=2)
    args = ap.parse_args()
    print(f"LSTM forward + backward, float32, B {B}, T {T}; median over {args.rounds} alternating rounds "
          f"(ratio = other / minipt, > 1: minipt faster; spread min - max)")
    print(f"{'d':>4} {'layers':>6} {'minipt ms':>10} {'twin ms':>8} {'twin/minipt':>20} {'torch ms':>9} "
          f"{'torch/minipt':>20}")
    rows = run(False, args.rounds, not args.no_torch, args.torch_threads)
    for tw, to in zip(rows[::2], rows[1::2]):
        line = f"{tw['d']:>4} {tw['layers']:>6} {tw['a_ms']:>10.1f} {tw['b_ms']:>8.1f} {spread(tw):>20}"
        if to["b"] is not None:
            line += f" {to['b_ms']:>9.1f} {spread(to):>20}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
