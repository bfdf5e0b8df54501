"""Why a GPT step collapses on a busy machine: one minipt training step under each
(BLAS threads, Numba threads) setting, quiet and beside busy processes, all settings
timed in alternating rounds (benchmarks/harness.py) so load drift hits them alike.

    python benchmarks/bench_threads.py [--sizes S,M,L] [--rounds 5] [--busy 0,1x1,1x2]

``--busy`` lists the loads: ``0`` quiet, ``NxK`` N background BLAS processes of K threads.
Prints ms per step for each setting and load, and the slowdown against quiet at the
setting minipt's thread policy would choose on a quiet machine (``auto``).
Set OPENBLAS_THREAD_TIMEOUT in the environment to see what OpenBLAS's spinning costs.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from bench_gpt import SIZES, minipt_step  # noqa: E402

from minipt.kernels import threads  # noqa: E402

SETTINGS = {"blas2 nb2": (2, 2), "blas1 nb2": (1, 2), "blas2 nb1": (2, 1), "blas1 nb1": (1, 1)}


def with_threads(fn, blas: int, nb: int):
    def run():
        with threads.limit(blas=blas, numba=nb):
            fn()
    return run


def auto(fn):
    def run():
        with threads.policy():
            fn()
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="S,M,L")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--busy", default="0,1x1,1x2")
    args = ap.parse_args()
    print(f"OPENBLAS_THREAD_TIMEOUT={os.environ.get('OPENBLAS_THREAD_TIMEOUT', 'default')}; "
          f"CPUs available: {threads.available_cpus()}; ms per step, median of {args.rounds} alternating rounds")
    loads = [(0, 0) if b == "0" else tuple(int(v) for v in b.split("x")) for b in args.busy.split(",")]
    for name in args.sizes.split(","):
        step, _ = minipt_step(*SIZES[name])
        sides = {k: with_threads(step, *v) for k, v in SETTINGS.items()}
        sides["policy"] = auto(step)
        table = {}
        for n, k in loads:
            with harness.busy(n, k):
                times = harness.rounds_of(sides, rounds=args.rounds, calls=args.calls)
            table[f"{n}x{k}" if n else "quiet"] = {s: 1e3 * sorted(t)[len(t) // 2] for s, t in times.items()}
        print(f"\nsize {name} {SIZES[name]}")
        print(f"  {'load':<8}" + "".join(f"{s:>11}" for s in sides))
        for load, row in table.items():
            print(f"  {load:<8}" + "".join(f"{row[s]:11.1f}" for s in sides))
        if "quiet" in table:
            best_quiet = min(table["quiet"].values())
            for load, row in table.items():
                if load != "quiet":
                    print(f"  {load}: slowdown of each setting against the best quiet one: " +
                          ", ".join(f"{s} {row[s] / best_quiet:.2f}x" for s in sides))


if __name__ == "__main__":
    main()
