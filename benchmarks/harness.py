"""The one harness every minipt benchmark uses.

Two sides (A = minipt, B = a reference: torch, gensim, a NumPy twin ...) run in
alternating rounds, A B A B ..., after a warm-up of each, so a minute of load from
elsewhere on a shared machine hits both alike. A training benchmark warms each side up
until its tokens/s stops rising (``warm_up``) and prints each round's tokens/s, so a side
still warming up shows. Each round times ``calls`` calls of each side back to back (as a
training loop would run them); the round's time is their median.
What is reported:

* the median of the per-round pair ratios ``t_B / t_A`` (> 1: A is faster) and their
  spread (min..max and the interquartile range), never the ratio of two separate medians;
* each side's median time per call (and a throughput when the caller gives work units);
* peak memory of a side, measured apart from the timing: ``tracemalloc`` traces Python
  objects and NumPy's data buffers (NumPy reports its allocations to it), so it is the
  peak of what a NumPy side allocates during one call. It does not see torch's
  allocator or Numba's compiled code: for torch it is not measured;
* the model FLOPs utilisation (MFU) of a GPT training step, 6N + 12 L T d FLOPs per token
  (PaLM, Chowdhery et al. 2022, appendix B), against the float32 GEMM peak measured in the
  same run on the model's own projection shapes (``sgemm_peak``).

``busy(n, threads)`` starts bounded background processes that keep cores busy with BLAS
work, to measure how a step holds up on a machine that is doing something else.
"""
from __future__ import annotations

import atexit
import dataclasses
import os
import signal
import statistics
import subprocess
import sys
import time
import tracemalloc
from contextlib import contextmanager

import numpy as np


@dataclasses.dataclass
class Comparison:
    """Per-round times (seconds per call) of side A and side B, in round order."""
    a: list[float]
    b: list[float]

    @property
    def ratios(self) -> list[float]:
        """Per-round ``t_B / t_A``: > 1 means A is faster."""
        return [tb / ta for ta, tb in zip(self.a, self.b)]

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)

    @property
    def a_median(self) -> float:
        return statistics.median(self.a)

    @property
    def b_median(self) -> float:
        return statistics.median(self.b)

    def spread(self) -> tuple[float, float]:
        return min(self.ratios), max(self.ratios)

    def iqr(self) -> tuple[float, float]:
        r = sorted(self.ratios)
        if len(r) < 4:
            return r[0], r[-1]
        q = statistics.quantiles(r, n=4)
        return q[0], q[2]

    def summary(self) -> str:
        lo, hi = self.spread()
        return f"{self.ratio:.2f}x ({lo:.2f}..{hi:.2f})"


def _time_calls(fn, calls: int) -> float:
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def rounds_of(sides: dict, rounds: int = 7, calls: int = 3, warmup: int = 2, gap: float = 0.01) -> dict:
    """Time every side of ``sides`` (name -> callable) in ``rounds`` alternating rounds
    (A B C A B C ...); returns name -> per-round median seconds per call.

    ``warmup`` untimed calls of each side first (JIT compilation, first-touch memory,
    thread pools waking). ``gap`` seconds of sleep between sides lets the previous side's
    thread pools (OpenMP, OpenBLAS) stop spinning before the next side is timed.
    """
    if rounds < 1 or calls < 1:
        raise ValueError(f"rounds and calls must be >= 1, got rounds={rounds}, calls={calls}")
    for _ in range(warmup):
        for fn in sides.values():
            fn()
    times = {name: [] for name in sides}
    for _ in range(rounds):
        for name, fn in sides.items():
            time.sleep(gap)
            times[name].append(_time_calls(fn, calls))
    return times


def alternate(a, b, rounds: int = 7, calls: int = 3, warmup: int = 2, gap: float = 0.01) -> Comparison:
    """Side A against side B in alternating rounds (see ``rounds_of``); ``b`` may be
    None: then only A is timed and ``Comparison.b`` is empty."""
    sides = {"a": a} if b is None else {"a": a, "b": b}
    times = rounds_of(sides, rounds, calls, warmup, gap)
    return Comparison(times["a"], times.get("b", []))


def median_seconds(fn, rounds: int = 7, calls: int = 1, warmup: int = 1) -> float:
    """One side alone: the median per-call time over ``rounds`` (for tables of one column)."""
    return alternate(fn, None, rounds=rounds, calls=calls, warmup=warmup, gap=0.0).a_median


def peak_memory_mb(fn) -> float:
    """Peak traced memory (MiB) of one call of ``fn``: Python objects and NumPy buffers."""
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    if not was_tracing:
        tracemalloc.stop()
    return (peak - base) / 2**20


# -- model FLOPs utilisation ----------------------------------------------------------------
def gpt_flops_per_token(n_params: int, n_layer: int, block_size: int, d_model: int) -> float:
    """Training FLOPs per token of a GPT step (forward + backward): 6N for the weight
    matmuls plus 12 L T d for attention's QK^T and PV (PaLM's appendix B).
    ``n_params`` counts the weights that multiply activations: all parameters except
    the position table (the tied token table counts once, as the output layer)."""
    return 6 * n_params + 12 * n_layer * block_size * d_model


def sgemm_peak(shapes, threads: int = 2, rounds: int = 5) -> tuple[float, tuple]:
    """Best float32 GEMM rate in GFLOP/s over ``shapes`` ((M, K, N): (M x K) @ (K x N)),
    NumPy's BLAS on ``threads`` threads, fastest of ``rounds``; returns (GFLOP/s, shape)."""
    from threadpoolctl import threadpool_limits
    rng = np.random.default_rng(0)
    best = (0.0, None)
    with threadpool_limits(limits=threads, user_api="blas"):
        for m, k, n in shapes:
            x = rng.standard_normal((m, k), dtype=np.float32)     # (M, K)
            w = rng.standard_normal((k, n), dtype=np.float32)     # (K, N)
            out = np.empty((m, n), np.float32)                    # (M, N)
            calls = max(1, int(2e8 // (2 * m * k * n)))           # about 0.2 GFLOP per round
            t = min(rounds_of({"gemm": lambda: [np.matmul(x, w, out=out) for _ in range(calls)]},
                              rounds=rounds, calls=1, warmup=1, gap=0.0)["gemm"])
            rate = 2 * m * k * n * calls / t / 1e9
            best = max(best, (rate, (m, k, n)), key=lambda r: r[0])
    return best


def gpt_projection_shapes(tokens: int, d_model: int) -> list[tuple[int, int, int]]:
    """(M, K, N) of a GPT-2 block's four Linear layers over ``tokens`` = B * T rows."""
    d = d_model
    return [(tokens, d, 3 * d), (tokens, d, d), (tokens, d, 4 * d), (tokens, 4 * d, d)]


# -- a busy machine -------------------------------------------------------------------------
_BUSY_LOOP = """
import os, sys, time
import numpy as np
parent, stop = os.getppid(), time.monotonic() + float(sys.argv[1])
a = np.random.default_rng(0).standard_normal((384, 384), dtype=np.float32)
b = np.empty_like(a)
while time.monotonic() < stop and os.getppid() == parent:
    for _ in range(20):
        np.matmul(a, a, out=b)
"""

_RUNNING: list[subprocess.Popen] = []


def _stop_all() -> None:
    while _RUNNING:
        p = _RUNNING.pop()
        if p.poll() is None:
            p.kill()
            p.wait()


atexit.register(_stop_all)


@contextmanager
def busy(n: int, threads: int = 1, seconds: float = 900.0):
    """``n`` background processes, each a BLAS loop (384 x 384 float32 matmuls) on
    ``threads`` OpenBLAS threads. Each stops by itself after ``seconds`` or when this
    process is gone, and is killed when the block (or the interpreter) exits."""
    if n <= 0:
        yield []
        return
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads),
           "MKL_NUM_THREADS": str(threads)}
    procs = [subprocess.Popen([sys.executable, "-c", _BUSY_LOOP, str(seconds)], env=env,
                              stdin=subprocess.DEVNULL) for _ in range(n)]
    _RUNNING.extend(procs)
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # atexit then kills them
    try:
        time.sleep(1.0)                                       # let them import NumPy and start
        yield procs
    finally:
        signal.signal(signal.SIGTERM, previous)
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
            if p in _RUNNING:
                _RUNNING.remove(p)


# -- optional references --------------------------------------------------------------------
# --threads N of the training benchmarks: both sides on N threads (torch's intra-op pool,
# minipt's BLAS and Numba pools fixed), so a per-part table on one thread shows each
# side's kernels apart from how they use two cores. 0: torch on 2, minipt's policy.
THREADS_ENV = "MINIPT_BENCH_THREADS"


def bench_threads() -> int:
    """The --threads count in force (0: not set)."""
    return int(os.environ.get(THREADS_ENV, "0"))


def set_bench_threads(n: int) -> None:
    """Set --threads for this process and the ones it starts (separate.py)."""
    if n < 0:
        raise ValueError(f"--threads must be >= 0, got {n}")
    os.environ[THREADS_ENV] = str(n)


@contextmanager
def minipt_threads():
    """minipt's pools fixed at --threads inside the block; its thread policy when unset."""
    n = bench_threads()
    if not n:
        yield
        return
    from minipt.kernels import threads
    with threads.limit(blas=n, numba=n):
        yield


def model_step(model: str, size: str):
    """A warmed-up minipt training step of ``bench_<model>.py`` (gpt, bert, t5) at ``size``
    (S, M, L): the closure, run once (Numba compilation or cache load)."""
    bench = __import__(f"bench_{model}")
    step = bench.minipt_step(*bench.SIZES[size])
    step = step[0] if isinstance(step, tuple) else step                  # bench_gpt also returns the model
    step()
    return step


def try_torch(threads: int = 2):
    """torch if it imports (set to ``threads`` threads, or --threads), else None: it is optional."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(bench_threads() or threads)
    return torch


def sides_note() -> str:
    """How both sides run: ", N thread(s) per side" under --threads, then minipt's batch parts."""
    from minipt.nn.batch_parts import batch_parts, part_workers
    n, parts = bench_threads(), batch_parts()
    return (f", {n} thread{'s' if n > 1 else ''} per side" if n else "") + \
        (f", minipt's stacks in {parts} batch parts on {part_workers().replace('processes', 'worker processes')}"
         if parts > 1 else ", minipt's stacks whole")


# --isa avx2: both sides run the code they would run on a CPU without AVX-512, on this
# one. Each library reads its setting when it loads, so the script starts again with them.
# The benchmark then shows whether the lead, and each part of the step, hold where the
# BLAS kernels differ: OpenBLAS on its Haswell kernels, MKL and torch's own kernels on AVX2.
ISA_ENV = {"avx2": {"NUMBA_CPU_NAME": "haswell",          # minipt's kernels; calls.ir_on() then says no
                    "OPENBLAS_CORETYPE": "Haswell",       # NumPy's OpenBLAS
                    "ATEN_CPU_CAPABILITY": "avx2",        # torch's own vectorised kernels
                    "MKL_ENABLE_INSTRUCTIONS": "AVX2",    # torch's GEMMs
                    "ONEDNN_MAX_CPU_ISA": "AVX2"}}
ISA_MARK = "MINIPT_BENCH_ISA"


def add_isa_option(ap) -> None:
    ap.add_argument("--isa", choices=("native", *ISA_ENV), default="native",
                    help="native: each library picks for this CPU; avx2: both sides on their AVX2 code")


def apply_isa(isa: str) -> None:
    """Start this script again with ``--isa``'s environment, unless it is in force already."""
    if isa == "native" or os.environ.get(ISA_MARK) == isa:
        return
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **ISA_ENV[isa], ISA_MARK: isa})


def isa_info() -> dict:
    """What each library runs, read back from it: OpenBLAS's kernels, the CPU Numba compiles
    for and whether minipt's AVX-512 IR kernels are on, torch's CPU capability."""
    from numba.core import config
    from threadpoolctl import threadpool_info

    from minipt.kernels import calls
    blas = [i.get("architecture") for i in threadpool_info() if i.get("internal_api") == "openblas"]
    out = {"OpenBLAS": blas[0] if blas else "none", "Numba": config.CPU_NAME or "host",
           "IR kernels": "on" if calls.ir_on() else "off"}
    try:
        import torch
        out["torch"] = torch.backends.cpu.get_cpu_capability()
    except ImportError:
        pass
    return out


def isa_note() -> str:
    """``isa_info`` as one line, for a benchmark's first lines."""
    return "code run: " + ", ".join(f"{k} {v}" for k, v in isa_info().items())


# --batch-parts N: minipt's Transformer stacks cut the batch into N parts side by side
# (minipt/nn/batch_parts.py), parts 1 .. on worker processes or threads (--part-workers),
# through MINIPT_BATCH_PARTS and MINIPT_PART_WORKERS so that separate.py's processes see
# them too.
BATCH_PARTS_DEFAULT = 2


def add_batch_parts_option(ap) -> None:
    from minipt.nn.batch_parts import WORKERS
    ap.add_argument("--batch-parts", type=int, default=BATCH_PARTS_DEFAULT,
                    help="minipt's stacks cut the batch into this many parts side by side (1: whole; "
                    f"default {BATCH_PARTS_DEFAULT})")
    ap.add_argument("--part-workers", choices=WORKERS, default=WORKERS[0],
                    help=f"what runs parts 1 .. (default {WORKERS[0]})")


def set_batch_parts(n: int, workers: str | None = None) -> None:
    """Set --batch-parts (and --part-workers) for this process and the ones it starts."""
    from minipt.nn.batch_parts import PARTS_ENV, WORKERS_ENV
    if n < 1:
        raise ValueError(f"--batch-parts must be >= 1, got {n}")
    os.environ[PARTS_ENV] = str(n)
    if workers is not None:
        os.environ[WORKERS_ENV] = workers


def load_note() -> str:
    """The 1-minute load average against the CPUs this process may use: on a shared
    machine every ratio is read beside it."""
    return f"load average {os.getloadavg()[0]:.1f} on {len(os.sched_getaffinity(0))} CPUs"


def fmt_rate(x: float | None, width: int = 10) -> str:
    return f"{x:{width},.0f}" if x is not None else f"{'-':>{width}}"


# -- one row of run_all's table -------------------------------------------------------------
def row(bench: str, case: str, a: str, b: str | None, cmp: Comparison, unit: float = 1e3, **extra) -> dict:
    """A result as run_all.py stores it: side names, median times (ms per call unless
    ``unit`` says otherwise), the median pair ratio t_B / t_A with min..max and IQR."""
    out = {"bench": bench, "case": case, "a": a, "b": b, "a_ms": cmp.a_median * unit, "rounds": len(cmp.a)}
    if b is not None and cmp.b:
        lo, hi = cmp.spread()
        out.update(b_ms=cmp.b_median * unit, ratio=cmp.ratio, ratio_min=lo, ratio_max=hi, ratio_iqr=list(cmp.iqr()))
    out.update(extra)
    return out


def print_rows(rows: list[dict]) -> None:
    """The table of ``row`` dicts: case, A ms, B ms, ratio (min..max) and any extras."""
    print(f"{'bench':<11} {'case':<34} {'A':<7} {'A ms':>9} {'B':<7} {'B ms':>9} {'B/A (min..max)':>19}  extra")
    for r in rows:
        ratio = f"{r['ratio']:.2f}x ({r['ratio_min']:.2f}..{r['ratio_max']:.2f})" if "ratio" in r else "-"
        b_ms = f"{r['b_ms']:9.3f}" if "b_ms" in r else f"{'-':>9}"
        known = {"bench", "case", "a", "b", "a_ms", "b_ms", "ratio", "ratio_min", "ratio_max", "ratio_iqr", "rounds"}
        extra = ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                          for k, v in r.items() if k not in known)
        print(f"{r['bench']:<11} {r['case']:<34} {r['a']:<7} {r['a_ms']:9.3f} {str(r['b'] or '-'):<7} {b_ms} "
              f"{ratio:>19}  {extra}")


def warm_up(fn, units: float, window: int = 5, max_windows: int = 12, tol: float = 0.03) -> list[float]:
    """Call ``fn`` in windows of ``window`` calls until its rate (``units`` per call, per
    second) stops rising: at least 4 windows; stop when neither of the last two beats the
    best window before them by more than ``tol``; at most ``max_windows``. Returns each
    window's rate. torch's eager steps were seen speeding up over their first rounds
    (issue 35: 7 rounds after 2 warm-up steps flattered minipt), so a short warm-up
    flatters the side that warms up faster."""
    rates: list[float] = []
    while len(rates) < max_windows:
        t0 = time.perf_counter()
        for _ in range(window):
            fn()
        rates.append(units * window / (time.perf_counter() - t0))
        if len(rates) >= 4 and max(rates[-2:]) <= (1 + tol) * max(rates[:-2]):
            break
    return rates


def fmt_rates(rates) -> str:
    return " ".join(f"{r / 1e3:.1f}k" if r >= 1e4 else f"{r:.0f}" for r in rates)


def training_pair(torch, minipt_step, torch_step, tokens: int, rounds: int, calls: int, profile_steps: int = 0,
                  title: str = "", separate: tuple | None = None) -> tuple[Comparison, dict | None]:
    """One size of a training benchmark: both sides warmed up until their tokens/s stops
    rising (``warm_up``, each window printed), then ``alternate``; prints each round's
    tokens/s of each side, and with ``profile_steps`` the per-part table (parts.py).
    ``separate`` = (benchmark module name, size tuple[, keep minipt's thread policy on]):
    the timed rounds run each side in its own process instead (separate.py), the steps
    given here serve the per-part table only. Returns the Comparison and the parts (None without profiling)."""
    with minipt_threads():
        return _training_pair(torch, minipt_step, torch_step, tokens, rounds, calls, profile_steps, title, separate)


def _training_pair(torch, minipt_step, torch_step, tokens, rounds, calls, profile_steps, title, separate):
    import parts
    sides = {"minipt": minipt_step} if torch_step is None else {"minipt": minipt_step, "torch": torch_step}
    if separate:
        import separate as sep
        times = sep.rounds(*separate[:2], tokens, tuple(sides), rounds, calls, title=title,
                           policy=len(separate) > 2 and separate[2])
        cmp = Comparison(times["minipt"], times.get("torch", []))
    else:
        for name, fn in sides.items():
            print(f"  {title} warm-up {name} tok/s per window of 5 steps: {fmt_rates(warm_up(fn, tokens))}",
                  flush=True)
        cmp = alternate(minipt_step, torch_step, rounds=rounds, calls=calls, warmup=0)
    for name, times in (("minipt", cmp.a), ("torch", cmp.b)):
        if times:
            print(f"  {title} rounds {name} tok/s: {fmt_rates(tokens / t for t in times)}")
    split = None
    if profile_steps:
        split = parts.compare(torch, minipt_step, torch_step, profile_steps)
        parts.print_table(f"  {title} parts ({load_note()})", split, cmp.a_median, cmp.b_median if cmp.b else None)
    return cmp, split


def training_table(what: str, sizes: dict, names, minipt_step, torch_step, tokens_per_step, keys: str,
                   rounds: int = 15, calls: int = 3, profile_steps: int = 15, separate: str | None = None) -> dict:
    """A whole-model training benchmark (bench_bert, bench_t5): for each size name in
    ``names``, ``minipt_step(*sizes[name])`` and ``torch_step(torch, *sizes[name])`` make
    step closures, compared by ``training_pair``; prints tokens/s of each side and the
    median per-round ratio; returns {"rows", "torch"}. ``keys`` names the size tuple's fields;
    ``separate``: the benchmark's module name, to time each side in its own process."""
    torch = try_torch(2)
    print(f"torch {torch.__version__ if torch else 'not installed: minipt measured alone'}; float32; {what} "
          f"(fwd + bwd + AdamW); warm-up until tok/s stops rising, then {rounds} alternating rounds of {calls} "
          f"steps per side{', each side in its own process' if separate else ''}{sides_note()}; "
          f"ratio > 1: minipt faster; "
          f"{load_note()}\n{isa_note()}", flush=True)
    rows = []
    for name in names:
        config = dict(zip(keys.split(), sizes[name]))
        tokens = tokens_per_step(config)
        ref = torch_step(torch, *sizes[name]) if torch else None
        cmp, split = training_pair(torch, minipt_step(*sizes[name]), ref, tokens, rounds, calls, profile_steps, name,
                                   (separate, sizes[name]) if separate else None)
        row = {"size": name, "config": config, "minipt_tok_s": tokens / cmp.a_median}
        if ref:
            lo, hi = cmp.spread()
            row.update(torch_tok_s=tokens / cmp.b_median, ratio=cmp.ratio, ratio_min=lo, ratio_max=hi, rounds=rounds)
        if split:
            row["parts"] = split
        rows.append(row)
    print(f"{'size':<5} {'minipt tok/s':>12} {'torch tok/s':>12} {'ratio (min..max)':>19}")
    for r in rows:
        ratio = f"{r['ratio']:.2f}x ({r['ratio_min']:.2f}..{r['ratio_max']:.2f})" if "ratio" in r else "-"
        print(f"{r['size']:<5} {r['minipt_tok_s']:12,.0f} {fmt_rate(r.get('torch_tok_s'), 12)} {ratio:>19}")
    from minipt.nn.batch_parts import batch_parts, part_workers
    return {"rows": rows, "torch": torch.__version__ if torch else None, "batch_parts": batch_parts(),
            "part_workers": part_workers(), "isa": isa_info()}


def training_main(doc: str, sizes: dict, run) -> None:
    """The command line of a training benchmark: --sizes, --rounds, --calls,
    --profile-steps, --json."""
    import argparse
    import json
    from pathlib import Path
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=",".join(sizes))
    ap.add_argument("--rounds", type=int, default=15, help="alternating rounds (pairs of ratios)")
    ap.add_argument("--calls", type=int, default=3, help="timed steps per side per round (median)")
    ap.add_argument("--profile-steps", type=int, default=15, help="profiled steps per side for the per-part "
                    "table, in rounds of 3 (0: no table)")
    ap.add_argument("--separate", action="store_true", help="time each side in its own process (separate.py)")
    ap.add_argument("--threads", type=int, default=0, help="both sides on this many threads (0: torch on 2, "
                    "minipt's thread policy)")
    add_batch_parts_option(ap)
    add_isa_option(ap)
    ap.add_argument("--json", type=Path, help="also write the results to this JSON file")
    args = ap.parse_args()
    apply_isa(args.isa)
    set_bench_threads(args.threads)
    set_batch_parts(args.batch_parts, args.part_workers)
    names = args.sizes.split(",")
    for s in names:
        if s not in sizes:
            ap.error(f"--sizes: expected names from {sorted(sizes)}, got {s!r}")
    if args.profile_steps < 0:
        ap.error(f"--profile-steps must be >= 0, got {args.profile_steps}")
    out = run(names, args.rounds, args.calls, args.profile_steps, separate=args.separate)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))
