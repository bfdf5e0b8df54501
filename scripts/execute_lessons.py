"""Execute the lesson notebooks, by default every one, in place, at the full budget.

    python scripts/execute_lessons.py                  # all lessons, full budget, outputs written back
    python scripts/execute_lessons.py 09 13            # only the lessons whose names start so
    python scripts/execute_lessons.py --budget quick --no-write   # what the tests do

The committed ``lessons/NN_topic.ipynb`` carry the outputs and figures of a full-budget
run, so a student sees every plot on the repository page without running anything.
Each notebook runs in a fresh ``python3`` kernel whose working directory is a temporary
folder (no run files land in the repository), with ``MINIPT_LESSON_BUDGET`` set
(``minipt/lesson_budget.py``) and this checkout first on ``PYTHONPATH``. Prints each
lesson's wall time. Run it under ``flock /tmp/minipt-cpu.lock`` on a shared machine.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ROOT / "lessons"
BUDGET_ENV = "MINIPT_LESSON_BUDGET"      # minipt.lesson_budget.ENV, not imported: this script needs no minipt


def notebooks(prefixes=()) -> list[Path]:
    """The lesson notebooks in book order, those whose names start with one of ``prefixes`` if given."""
    found = sorted(LESSONS.glob("[0-9][0-9]_*.ipynb"))
    return [p for p in found if not prefixes or any(p.name.startswith(x) for x in prefixes)]


def execute(path: Path, budget: str, write: bool, timeout: int = 1800) -> tuple[nbformat.NotebookNode, float]:
    """Run notebook ``path`` top to bottom at ``budget``; write it back with its outputs if
    ``write``. Returns the executed notebook and the wall time in seconds. A failing cell
    (a broken assert included) raises ``nbclient.exceptions.CellExecutionError``."""
    if budget not in ("quick", "full"):
        raise ValueError(f"budget must be 'quick' or 'full', got {budget!r}")
    nb = nbformat.read(path, as_version=4)
    saved = {k: os.environ.get(k) for k in (BUDGET_ENV, "PYTHONPATH")}
    os.environ[BUDGET_ENV] = budget          # the kernel inherits this process's environment
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([saved["PYTHONPATH"]] if saved["PYTHONPATH"] else []))
    try:
        with tempfile.TemporaryDirectory(prefix=f"lesson-{path.stem}-") as cwd:
            client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                                    resources={"metadata": {"path": cwd}})
            start = time.perf_counter()
            client.execute()
            seconds = time.perf_counter() - start
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if write:
        nbformat.write(nb, path)
    return nb, seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("lessons", nargs="*", help="name prefixes, e.g. 09 13 (default: every lesson)")
    parser.add_argument("--budget", choices=("quick", "full"), default="full")
    parser.add_argument("--no-write", action="store_true", help="execute only; leave the notebooks as they are")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds allowed per cell")
    args = parser.parse_args(argv)
    paths = notebooks(args.lessons)
    if not paths:
        parser.error(f"no lesson in {LESSONS} starts with {args.lessons}")
    total = 0.0
    for path in paths:
        _, seconds = execute(path, args.budget, write=not args.no_write, timeout=args.timeout)
        total += seconds
        print(f"{path.stem:<20} {args.budget:>5} {seconds:7.1f} s{'' if args.no_write else '  (written)'}",
              flush=True)
    print(f"{'total':<20} {args.budget:>5} {total:7.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
