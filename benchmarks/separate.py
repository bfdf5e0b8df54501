"""Each side of a training benchmark in a process of its own (``--separate``).

In the default mode both sides live in one process and alternate there: minipt's thread
pools (OpenBLAS, Numba, its part threads) and torch's (OpenMP, MKL) sit side by side,
minipt is imported first and sets the OpenMP spin count torch then inherits, and each
side runs on caches the other has just filled. The issue's independent figure came from
a separate torch process instead. Here each side is a fresh Python process (this file
run as a script) that builds its step, waits until both are built, warms up on its own
and then runs ``calls`` steps at each request; the parent alternates the requests,
A B A B ..., so the load of the machine still hits both alike. The minipt process runs
with ``MINIPT_THREADS`` set to the CPUs it may use, or to ``--threads`` (unless set by
hand, or ``policy`` is asked for, as beside ``--busy`` load): minipt's thread policy counts the CPU time of
other processes over its last half second, and in alternating rounds that is the torch
process's round, which is over before minipt's starts; it would take it for a busy
machine and run on one thread. The torch process imports
torch before the benchmark module (and so before minipt): minipt then leaves torch's
OpenMP runtime as torch set it up. The minipt process never imports torch.

Protocol: the parent writes one JSON request per line to the child's stdin ("warm", a
step count, or 0 to stop); the child answers one JSON line on its own copy of stdout
(anything else it prints goes to stderr).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _serve(bench: str, side: str, config: list, units: float) -> None:
    """The child: build ``side``'s step of benchmark module ``bench`` at ``config``, say
    "ready", then answer requests: "warm" -> the warm-up rates, n > 0 -> the median
    seconds of n steps, 0 -> exit."""
    import importlib
    out = os.fdopen(os.dup(1), "w", buffering=1)
    sys.stdout = sys.stderr
    sys.path.insert(0, str(HERE))
    import harness
    torch = harness.try_torch(2) if side == "torch" else None
    mod = importlib.import_module(bench)
    step = mod.torch_step(torch, *config) if side == "torch" else mod.minipt_step(*config)
    step = step[0] if isinstance(step, tuple) else step                    # bench_gpt also returns the model
    out.write(json.dumps("ready") + "\n")
    for line in sys.stdin:
        msg = json.loads(line)
        if msg == "warm":
            out.write(json.dumps(harness.warm_up(step, units)) + "\n")
            continue
        if not msg:
            return
        out.write(json.dumps(harness._time_calls(step, msg)) + "\n")


class _Child:
    def __init__(self, bench: str, side: str, config: tuple, units: float, policy: bool):
        self.side = side
        import harness
        env = dict(os.environ)                                            # --threads reaches both sides
        fixed = harness.bench_threads() or (0 if policy else len(os.sched_getaffinity(0)))
        if side == "minipt" and fixed:
            env.setdefault("MINIPT_THREADS", str(fixed))
        self.proc = subprocess.Popen([sys.executable, __file__, bench, side, json.dumps(list(config)), str(units)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1, env=env)

    def ask(self, msg=None):
        """Send ``msg`` (unless None), return the child's answer; its failure is raised."""
        if msg is not None:
            self.proc.stdin.write(json.dumps(msg) + "\n")
            self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.side} process ended (exit code {self.proc.wait()}); its traceback is above")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("0\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def rounds(bench: str, config: tuple, units: float, sides=("minipt", "torch"), rounds: int = 15, calls: int = 3,
           gap: float = 0.01, title: str = "", policy: bool = False) -> dict[str, list[float]]:
    """Per-round median seconds per step of each side of benchmark module ``bench``
    (``bench_gpt``, ``bench_bert``, ``bench_t5``) at size ``config``, each side in its own
    process; prints each side's warm-up rates (``units`` per second, per window of 5 steps).
    ``policy``: leave minipt's thread policy on (see above)."""
    import harness
    children = []
    try:
        children = [_Child(bench, side, config, units, policy) for side in sides]
        for c in children:
            c.ask()                                                       # built: nothing else runs from here
        for c in children:
            rates = c.ask("warm")
            print(f"  {title} warm-up {c.side} (own process) tok/s per window of 5 steps: {harness.fmt_rates(rates)}",
                  flush=True)
        times = {c.side: [] for c in children}
        for _ in range(rounds):
            for c in children:
                time.sleep(gap)
                times[c.side].append(c.ask(calls))
        return times
    finally:
        for c in children:
            c.close()


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), float(sys.argv[4]))
