"""What each ``minipt train`` preset gave when it was last measured: the committed
reports ``reports/presets/MODEL.json`` (``MODEL-PRESET.json`` for a preset other than
``toy``), written by ``benchmarks/bench_presets.py`` on a quiet machine.

``minipt models`` prints each preset's result and time from them, and
``scripts/readme_tables.py`` writes the README's table of models from them, so neither
holds a hand-typed figure. The reports sit beside the package in a source checkout (the
README installs from one); elsewhere there are none and each preset says so.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

REPORTS = Path(__file__).resolve().parent.parent / "reports" / "presets"
NOT_RESULTS = ("nearest to ", "trained on ", "sample: ", "time ")    # summary lines that are not result figures


def load_reports(folder: Path = REPORTS) -> dict[str, dict]:
    """``{file stem: report}`` for every ``*.json`` in ``folder`` (none if it is absent)."""
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


def report_key(model: str, preset: str) -> str:
    """The file stem of a preset's report: ``gpt`` for ``gpt``'s toy preset, else ``MODEL-PRESET``."""
    return model if preset == "toy" else f"{model}-{preset}"


def result_text(report: dict) -> str:
    """The result a preset's report states: its summary lines (each figure beside its
    baseline, as the recipe printed it) without the run's own timing, which ``time_text``
    gives, nearest-neighbour lists and samples."""
    lines = []
    for line in report["report"].get("summary", []):
        if line.startswith(NOT_RESULTS):
            continue
        line = re.sub(r" in \d+(\.\d+)? ?s\b| \(\d+(\.\d+)? ?s\)", "", line)   # "600 steps in 89s", "(90s)"
        line = re.sub(r"^[^:]* \(" + re.escape(report["preset"]) + r"\): ", "", line)   # "GloVe (toy): ..."
        lines.append(line.rstrip("."))
    return "; ".join(lines)


def time_text(report: dict) -> str:
    load = report["load_average_start"][0], report["load_average_end"][0]
    return (f"{report['wall_seconds']:.0f} s ({report['cpu_seconds']:.0f} s CPU), load {load[0]:.1f} → "
            f"{load[1]:.1f}, {report['date'][:10]}")


def preset_result(reports: dict[str, dict], model: str, preset: str) -> str:
    """What ``minipt models`` says of a preset: its measured result and time, or that it has no report."""
    r = reports.get(report_key(model, preset))
    return f"{result_text(r)}. Took {time_text(r)}" if r else "not measured (benchmarks/bench_presets.py)"
