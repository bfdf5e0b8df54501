"""The first run on a fresh clone against a warm one: `minipt train MODEL` (default gpt, its
toy preset) timed from outside, once with an empty Numba cache (every kernel compiles)
and once with the cache that run left (every kernel loads), in alternating rounds.

    python benchmarks/bench_first_run.py [--rounds 3] [--model gpt] [--steps N]

Each round gets a fresh ``NUMBA_CACHE_DIR``, runs cold then warm in it, and pairs the two,
so load from elsewhere on a shared machine drifts over both alike. Printed: the wall
seconds and the CPU seconds (user + sys of the child) of each run, their medians and
min..max, and the extra seconds of the cold run (cold - warm, per round). On a busy machine
the CPU seconds are the steadier figure: compiling runs on one thread, so on a quiet one
the extra wall time is about the extra CPU time. The issue's target: extra at most 20 s.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = "import sys; from minipt.cli import main; sys.exit(main())"


def run_once(model: str, steps: int | None, out: Path, cache: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one `minipt train` in a child process."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-c", CLI, "train", model, "--out", str(out)] + (["--steps", str(steps)] if steps else [])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        sys.exit(f"bench_first_run: `minipt train {model}` failed (exit {done.returncode}): "
                 f"{done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ''}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):7.1f} ({min(xs):.1f}..{max(xs):.1f})"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="cold/warm pairs (default 3)")
    ap.add_argument("--model", default="gpt", help="what `minipt train` trains (default gpt)")
    ap.add_argument("--steps", type=int, default=None, help="training steps (default: the preset's)")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error(f"--rounds must be >= 1, got {args.rounds}")
    runs = {"cold": [], "warm": []}                          # (wall, cpu) per round
    with tempfile.TemporaryDirectory(prefix="bench_first_run_") as tmp:
        for r in range(args.rounds):
            cache = Path(tmp) / f"numba_{r}"                 # empty: every kernel compiles
            for phase in ("cold", "warm"):
                wall, cpu = run_once(args.model, args.steps, Path(tmp) / f"run_{r}_{phase}", cache)
                runs[phase].append((wall, cpu))
                print(f"round {r + 1} {phase}: wall {wall:6.1f} s, CPU {cpu:6.1f} s", flush=True)
    print(f"\nminipt train {args.model}" + (f" --steps {args.steps}" if args.steps else "")
          + f", {args.rounds} rounds, seconds: median (min..max)")
    print(f"{'':14s}{'wall':>22s}{'CPU (user+sys)':>24s}")
    for phase in ("cold", "warm"):
        print(f"{phase:14s}{spread([w for w, _ in runs[phase]]):>22s}{spread([c for _, c in runs[phase]]):>24s}")
    extra = [(cw - ww, cc - wc) for (cw, cc), (ww, wc) in zip(runs["cold"], runs["warm"])]
    print(f"{'cold - warm':14s}{spread([w for w, _ in extra]):>22s}{spread([c for _, c in extra]):>24s}")
    print(f"\nextra seconds of the cold run: {statistics.median(w for w, _ in extra):.1f} wall, "
          f"{statistics.median(c for _, c in extra):.1f} CPU (median of {args.rounds})")


if __name__ == "__main__":
    main()
