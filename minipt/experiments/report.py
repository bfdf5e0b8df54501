"""An experiment's results as a Markdown table and a bar chart, written into its run folder."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..recipes.run_folder import clear_run_files

FILES = ("results.json", "results.md", "results.png")


def _label(row: dict) -> str:
    return ", ".join(f"{v}" if not isinstance(v, bool) else (k if v else f"no {k}")
                     for k, v in row.items() if isinstance(v, (str, bool)))


def table(rows: list[dict]) -> str:
    """Rows of equal keys -> a Markdown table; floats with three decimals."""
    if not rows:
        raise ValueError("an experiment produced no rows")
    keys = list(rows[0])
    cell = lambda v: f"{v:.3f}" if isinstance(v, float) else str(v)
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(cell(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def bar_chart(rows: list[dict], path: Path, title: str) -> Path:
    """One group of bars per numeric column (a float in [0, 1] or any float), one bar per row."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    metrics = [k for k, v in rows[0].items() if isinstance(v, float)]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(metrics)), 3.6))
    width = 0.8 / len(rows)
    for i, row in enumerate(rows):
        ax.bar(np.arange(len(metrics)) + i * width, [row[m] for m in metrics], width, label=_label(row))
    ax.set_xticks(np.arange(len(metrics)) + 0.4 - width / 2, metrics, fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def check_folder(out: Path, *, overwrite: bool) -> None:
    """Refuse a folder that already holds results unless ``overwrite`` (checked before the
    experiment runs, so minutes of training are never lost to a clash at the end)."""
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"--out {out} is a file; --out names the folder of the results")
    held = [f for f in FILES if (out / f).exists()]
    if held and not overwrite:
        raise FileExistsError(f"--out {out} already holds results ({', '.join(held)}); replace them with "
                              "--overwrite or give another --out")


def write(result: dict, out: Path, title: str, *, overwrite: bool) -> list[Path]:
    """results.json, results.md and results.png in ``out`` (an earlier result is refused
    unless ``overwrite``; other files in the folder are kept)."""
    check_folder(out, overwrite=overwrite)
    if overwrite:
        clear_run_files(out, FILES)
    out.mkdir(parents=True, exist_ok=True)
    md = f"# {title}\n\n{table(result['rows'])}\n\n" + "\n".join(     # per-item scores: in the JSON only
        f"- {k}: {json.dumps(v)}" for k, v in result.items() if k not in ("rows", "items")) + "\n"
    paths = [out / "results.json", out / "results.md", out / "results.png"]
    paths[0].write_text(json.dumps(result, indent=2, default=lambda a: np.asarray(a).tolist()))
    paths[1].write_text(md)
    bar_chart(result["rows"], paths[2], title)
    return paths
