"""Each Numba kernel's time inside training steps against the same calls replayed alone:
where a step makes its kernels wait (for memory out of cache, for Python's lock).

    python benchmarks/kernels_in_step.py bert M [--steps 20] [--batch-parts 2]

The model and batch are those of ``bench_gpt.py``, ``bench_bert.py`` or ``bench_t5.py``
at size S, M or L. Every kernel an op asks ``minipt.kernels.get`` for is timed on the
caller's thread (the only one cProfile sees in the per-part tables) over ``--steps``
steps; the last step's calls are kept with copies of their arguments and replayed one by
one after the steps, 7 times each (the median of the last 5), with the thread pools held
at one thread as a part's ops run. Per kernel: calls a step, ms a step in the steps and
replayed, and their ratio.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

import minipt.kernels as kernels  # noqa: E402
from minipt.kernels import threads  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=("gpt", "bert", "t5"))
    ap.add_argument("size", choices=("S", "M", "L"))
    ap.add_argument("--steps", type=int, default=20)
    harness.add_batch_parts_option(ap)
    args = ap.parse_args()
    harness.set_batch_parts(args.batch_parts, args.part_workers)

    seconds: dict[str, list] = {}
    kept: dict[str, list] = {}
    keeping = [False]
    get = kernels.get

    def timed_get(name):
        kernel = get(name)
        if kernel is None:
            return None

        def call(*a):
            t0 = time.perf_counter()
            out = kernel(*a)
            dt = time.perf_counter() - t0
            if threading.current_thread() is threading.main_thread():
                seconds.setdefault(name, []).append(dt)
                if keeping[0]:
                    kept.setdefault(name, []).append((kernel, copy.deepcopy(a)))
            return out
        return call

    kernels.get = timed_get
    step = harness.model_step(args.model, args.size)
    for _ in range(4):
        step()
    seconds.clear()
    for i in range(args.steps):
        keeping[0] = i == args.steps - 1
        step()
    kernels.get = get

    print(f"{args.model} {args.size}, {args.batch_parts} batch part(s), the caller's thread, ms a step:")
    print(f"{'kernel':<30} {'calls':>5} {'in steps':>9} {'replayed':>9} {'ratio':>6}")
    total_in = total_alone = 0.0
    with threads.limit(blas=1, numba=1):
        for name, calls in sorted(kept.items(), key=lambda kv: -sum(seconds[kv[0]])):
            alone = 0.0
            for kernel, a in calls:
                times = []
                for _ in range(7):
                    t0 = time.perf_counter()
                    kernel(*a)
                    times.append(time.perf_counter() - t0)
                alone += statistics.median(times[2:])
            in_steps = sum(seconds[name]) / args.steps
            total_in, total_alone = total_in + in_steps, total_alone + alone
            print(f"{name:<30} {len(calls):>5} {in_steps * 1e3:9.3f} {alone * 1e3:9.3f} {in_steps / alone:5.2f}x")
    print(f"{'all':<30} {'':>5} {total_in * 1e3:9.3f} {total_alone * 1e3:9.3f} {total_in / total_alone:5.2f}x")


if __name__ == "__main__":
    main()
