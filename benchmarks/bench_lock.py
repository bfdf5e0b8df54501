"""What Python's lock costs two threads that run short kernels in turn with Python lines,
as the two parts of a stack's batch do (minipt/nn/batch_parts.py), on this machine.

    python benchmarks/bench_lock.py [--rounds 7] [--reps 300] [--python-us 5]

1. **Hand-over**: two Python threads pass a byte back and forth through two pipes. Each
   ``os.read`` lets go of the lock and sleeps until the other thread's write wakes it, so
   half a round trip is one hand-over: a thread woken on the other CPU, taking the lock.
2. **Overlap**: each of two threads runs, ``--reps`` times, a kernel of k us and then
   ``--python-us`` us of Python. The kernel is a Numba loop that lets go of the lock
   (``nogil``, as minipt's kernels do) or one that keeps it. Printed: the time of both
   threads together over the time of one thread doing its share alone. 1.0 means the
   two overlapped fully; 2.0 means they took turns, as if on one CPU. A kernel that
   keeps the lock can only take turns, which shows what 2.0 looks like here.

A thread whose kernel ends while the other holds the lock sleeps until the lock is let go,
and is woken then: every such wait costs at least one hand-over. The one-thread and
two-thread sides alternate in rounds (harness.rounds_of); each figure is the median over
the rounds, with min..max. benchmarks/kernels_in_step.py shows the kernels' lengths in a step.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import numba

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

KERNEL_US = (5, 10, 20, 40, 80, 160, 320)


def _spin(n):
    s = 0.0
    for i in range(n):
        s += i * 1e-9
    return s


spin_free = numba.njit(nogil=True)(_spin)          # lets go of Python's lock while it runs
spin_held = numba.njit(nogil=False)(_spin)         # keeps it


def python_lines(n: int) -> int:
    s = 0
    for i in range(n):
        s += i
    return s


def per_us(fn, n: int = 200_000, tries: int = 5) -> float:
    """Loop turns of ``fn(n)`` per microsecond, the best of ``tries``."""
    fn(10)
    best = float("inf")
    for _ in range(tries):
        t0 = time.perf_counter()
        fn(n)
        best = min(best, time.perf_counter() - t0)
    return n / (best * 1e6)


def hand_over_us(trips: int = 2000) -> float:
    """Microseconds of one hand-over between two threads: half a pipe round trip."""
    a_read, a_write = os.pipe()
    b_read, b_write = os.pipe()

    def echo():
        for _ in range(trips):
            os.read(a_read, 1)
            os.write(b_write, b"x")
    other = threading.Thread(target=echo)
    other.start()
    t0 = time.perf_counter()
    for _ in range(trips):
        os.write(a_write, b"x")
        os.read(b_read, 1)
    elapsed = time.perf_counter() - t0
    other.join()
    for fd in (a_read, a_write, b_read, b_write):
        os.close(fd)
    return elapsed / trips / 2 * 1e6


def work(kernel, turns: int, lines: int, reps: int):
    """One thread's share: ``reps`` times a kernel of ``turns`` loop turns, then ``lines``
    turns of Python."""
    def run():
        for _ in range(reps):
            kernel(turns)
            python_lines(lines)
    return run


def together(share):
    """Two threads running ``share`` at once (the caller's thread is one of them)."""
    def run():
        other = threading.Thread(target=share)
        other.start()
        share()
        other.join()
    return run


def overlap(kernel, turns: int, lines: int, reps: int, rounds: int) -> list[float]:
    """Per round: the time of two threads each running their share at once over one thread
    running its share alone."""
    share = work(kernel, turns, lines, reps)
    times = harness.rounds_of({"one": share, "two": together(share)}, rounds=rounds, calls=1, warmup=1)
    return [two / one for one, two in zip(times["one"], times["two"])]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=300, help="kernel + Python turns per thread per round")
    ap.add_argument("--python-us", type=float, default=5.0, help="microseconds of Python after each kernel")
    ap.add_argument("--kernels-us", default=",".join(map(str, KERNEL_US)))
    args = ap.parse_args(argv)
    kernel_us = [float(k) for k in args.kernels_us.split(",")]
    spin_rate, line_rate = per_us(spin_free), per_us(python_lines, 20_000)
    lines = max(1, round(args.python_us * line_rate))
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {args.rounds} rounds of "
          f"{args.reps} kernels per thread, each followed by {args.python_us:g} us of Python")
    trips = [hand_over_us() for _ in range(args.rounds)]
    print(f"hand-over between two threads: {statistics.median(trips):.1f} us "
          f"(min {min(trips):.1f}, max {max(trips):.1f})")
    print("two threads' time over one thread's (1.00: full overlap, 2.00: taking turns)")
    print(f"{'kernel us':>9}  {'lets go of the lock':>20}  {'keeps the lock':>20}")
    for k in kernel_us:
        turns = max(1, round(k * spin_rate))
        cells = []
        for kernel in (spin_free, spin_held):
            r = overlap(kernel, turns, lines, args.reps, args.rounds)
            cells.append(f"{statistics.median(r):.2f} ({min(r):.2f}..{max(r):.2f})")
        print(f"{k:9g}  {cells[0]:>20}  {cells[1]:>20}")


if __name__ == "__main__":
    main()
