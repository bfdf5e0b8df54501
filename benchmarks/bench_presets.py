"""Every ``minipt train MODEL`` preset, timed: wall and CPU seconds and the result.

    python benchmarks/bench_presets.py                 # every model with a toy preset
    python benchmarks/bench_presets.py bart mass t5    # only these
    python benchmarks/bench_presets.py --no-write gpt  # print, keep the committed reports

Each preset runs as its own process, ``minipt train MODEL --preset toy --out TMP`` at the
priority the script was started with, exactly as a user runs it (the Numba kernels
compiled on an earlier run are reused, so run a preset once before timing a fresh clone).
The CPU time is the child's user + system time (``getrusage``), which a busy machine
inflates far less than the wall time; the load average at start and end says how busy
the machine was. Each run writes ``reports/presets/MODEL.json``: the model, the command,
the run's ``report.json`` (result figures with their floors and baselines, as the recipe
measured them), wall and CPU seconds, load averages, CPU count, date and git commit.
``scripts/readme_tables.py`` builds the README's table of models from these files.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
REPORTS = ROOT / "reports" / "presets"
LIMIT_S = 180                                          # issue 35: every preset within 3 minutes
DROP = ("test_examples", "files")                      # bulky or run-folder-specific keys of report.json


def all_presets() -> list[tuple[str, str]]:
    """(model, preset) for every preset ``minipt train`` offers, in the registry's order."""
    from minipt.models import registry
    return [(e.name, p) for e in registry.trainable() for p in e.presets]


def report_name(model: str, preset: str) -> str:
    """``MODEL`` for the toy preset, ``MODEL-PRESET`` for another: the report's file stem."""
    return model if preset == "toy" else f"{model}-{preset}"


def git_commit() -> str:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "minipt"], cwd=ROOT,      # the code that ran
                           capture_output=True, text=True).stdout.strip()
    return head + ("+dirty" if dirty else "")


def numba_cache_files() -> set[str]:
    """The compiled-kernel files in Numba's cache beside minipt's sources (a run's count
    of new files includes those another process in the same clone wrote meanwhile)."""
    return {str(q) for q in (ROOT / "minipt").rglob("__pycache__/*.nbc")}


def run_preset(model: str, preset: str = "toy") -> dict:
    """One timed ``minipt train`` -> the report described in the module docstring."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / model
        argv = [sys.executable, "-c", "import sys; from minipt.cli import main; sys.exit(main())",
                "train", model, "--preset", preset, "--out", str(out)]
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        cached = numba_cache_files()
        load_start = os.getloadavg()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        load_end = os.getloadavg()
        if done.returncode != 0:
            raise RuntimeError(f"minipt train {model} exited {done.returncode}: {done.stderr.strip()[-500:]}")
        run = json.loads((out / "report.json").read_text())
        written = sorted(q.name for q in out.iterdir())
    compiled = len(numba_cache_files() - cached)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"model": model, "preset": preset, "command": f"minipt train {model}" + ("" if preset == "toy" else
                                                                                      f" --preset {preset}"),
            "report": {k: v for k, v in run.items() if k not in DROP}, "files_written": written,
            "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1),
            "load_average_start": [round(x, 2) for x in load_start], "load_average_end": [round(x, 2) for x in load_end],
            "kernels_compiled": compiled, "cpus": os.cpu_count(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "git_commit": git_commit(), "threads": {k: os.environ[k] for k in ("OPENBLAS_NUM_THREADS", "MINIPT_THREADS")
                                                    if k in os.environ}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", help="MODEL (its toy preset) or MODEL:PRESET (default: every preset)")
    ap.add_argument("--no-write", action="store_true", help="print only; leave reports/presets/ as it is")
    args = ap.parse_args(argv)
    known = all_presets()
    wanted = [tuple(m.split(":", 1)) if ":" in m else (m, "toy") for m in args.models] or known
    unknown = [f"{m}:{p}" for m, p in wanted if (m, p) not in known]
    if unknown:
        names = ", ".join(m if p == "toy" else f"{m}:{p}" for m, p in known)
        print(f"bench_presets: error: no preset {', '.join(unknown)}; choose from {names}", file=sys.stderr)
        return 2
    print(f"{'preset':<26} {'wall s':>7} {'CPU s':>7} {'load start/end':>15}  result", flush=True)
    slow = []
    for model, preset in wanted:
        r = run_preset(model, preset)
        name = report_name(model, preset)
        if not args.no_write:
            REPORTS.mkdir(parents=True, exist_ok=True)
            (REPORTS / f"{name}.json").write_text(json.dumps(r, indent=2) + "\n")
        result = "; ".join(r["report"].get("summary", [])[1:])
        print(f"{name:<26} {r['wall_seconds']:>7.1f} {r['cpu_seconds']:>7.1f} "
              f"{r['load_average_start'][0]:>7.2f}/{r['load_average_end'][0]:<7.2f}  {result}", flush=True)
        if r["wall_seconds"] > LIMIT_S:
            slow.append(name)
    if slow:
        print(f"over {LIMIT_S} s of wall time: {', '.join(slow)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
