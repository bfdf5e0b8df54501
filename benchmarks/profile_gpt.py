"""Where a minipt training step spends its time, minipt alone: cProfile over whole steps,
split into the parts of ``benchmarks/parts.py`` (matmuls, attention, norms, activations,
loss, optimiser, embedding, glue). ``bench_gpt.py``, ``bench_bert.py`` and ``bench_t5.py``
print the same split beside torch's.

    python benchmarks/profile_gpt.py [--model gpt|bert|t5] [--size M] [--steps 10]

A share is of the profiled total; cProfile adds about 1 us per Python call, so the
absolute times run a little above the benchmarks' timed steps.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
import parts  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="gpt", choices=("gpt", "bert", "t5"))
    ap.add_argument("--size", default="M", choices=("S", "M", "L"))
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    if args.steps < 1:
        ap.error(f"--steps must be >= 1, got {args.steps}")
    bench = __import__(f"bench_{args.model}")
    step = harness.model_step(args.model, args.size)
    step()                                                       # first-touch allocation
    totals = parts.minipt_parts(step, args.steps)
    total = sum(totals.values())
    print(f"{args.model} size {args.size} {bench.SIZES[args.size]}: {total * 1e3:.1f} ms per step, "
          f"mean of {args.steps}")
    for part, t in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {part:<12} {t * 1e3:8.2f} ms  {100 * t / total:5.1f} %")


if __name__ == "__main__":
    main()
