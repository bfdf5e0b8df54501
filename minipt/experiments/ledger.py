"""The committed runs behind the claims ledger, and the ledger as a table.

``ledger/NAME.json`` holds one experiment run at one budget over several seeds:
``{"experiment", "budget", "runs": [{"seed", "arms", "floors", "paired_se", "seconds"}, ...]}``.
``run_seeds`` makes such a record, ``load`` reads the committed one, and ``rows`` /
``table`` give the ledger (``minipt experiment claims``; ``--json FILE`` writes the rows).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from . import get
from .claims import CLAIMS, row
from .verdict import paired_se

FOLDER = Path(__file__).parent / "ledger"
SEEDS = (0, 1, 2)


def run_seeds(name: str, budget: str = "full", seeds=SEEDS, *, progress: bool = False) -> dict:
    """Run experiment ``name`` once per seed and keep what the ledger reads of each run."""
    module = get(name)
    runs = []
    for seed in seeds:
        t0 = time.perf_counter()
        result = module.run(budget, seed=int(seed), progress=False)
        if "arms" not in result or "floors" not in result:
            raise ValueError(f"experiment {name!r} does not report arms and floors yet, so the ledger cannot "
                             "read it")
        runs.append({"seed": int(seed), "arms": result["arms"], "floors": result["floors"],
                     "paired_se": paired_errors(name, result.get("items", {})),
                     "seconds": round(time.perf_counter() - t0, 1)})
        if progress:
            print(f"{name} seed {seed}: {runs[-1]['seconds']} s")
    return {"experiment": name, "budget": budget, "runs": runs}


def paired_errors(name: str, items: dict) -> dict[str, float]:
    """{claim: standard error of the paired difference of its two arms on the test items}
    for the claims on experiment ``name`` whose arms report per-item scores."""
    out = {}
    for c in CLAIMS:
        if c.experiment == name and all(c.metric in items.get(arm, {}) for arm in c.arms):
            out[c.key] = paired_se(*(items[arm][c.metric] for arm in c.arms))
    return out


def save(record: dict, folder: Path = FOLDER) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{record['experiment']}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def load(name: str, folder: Path = FOLDER) -> dict | None:
    """The committed record of experiment ``name`` (None when it has none)."""
    path = folder / f"{name}.json"
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
        if record["experiment"] != name or not record["runs"]:
            raise ValueError("names another experiment or holds no runs")
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path} is damaged: {e}") from None
    return record


def rows(folder: Path = FOLDER, claims=CLAIMS) -> list[dict]:
    """One ledger row per claim, judged from the committed records."""
    records = {c.experiment: load(c.experiment, folder) for c in claims}
    return [row(c, records[c.experiment]) for c in claims]


def counts(ledger: list[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in ledger:
        out[r["verdict"]] = out.get(r["verdict"], 0) + 1
    return out


def table(ledger: list[dict]) -> str:
    """The ledger as Markdown: claim, experiment, metric (floor), verdict, why."""
    lines = ["| claim | paper | experiment | metric (floor) | verdict | why |", "|---|---|---|---|---|---|"]
    for r in ledger:
        metric = f"{r['metric']}, {r['better']} is better (floor: {r['floor']})"
        lines.append(f"| {r['says']} | {r['paper']} | `{r['experiment']}` | {metric} | **{r['verdict']}** "
                     f"| {r['why']} |")
    return "\n".join(lines)
