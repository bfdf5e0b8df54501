"""The README's generated parts, from the committed preset reports.

    python scripts/readme_tables.py          # rewrite README.md's generated blocks
    python scripts/readme_tables.py --check  # exit 1 if README.md differs from what it would write

Three blocks of README.md lie between marker comments and are written here, never by hand:

- ``models``: one row per model that ``minipt train`` accepts (the registry's order):
  name, command, lesson, result and time, the last two read from
  ``reports/presets/MODEL.json`` (written by ``benchmarks/bench_presets.py``); a model
  without a committed report says so. Below the table, the models without a preset.
- ``run-files``: every file a run writes, the union of the run folders the reports saw.
- ``claims``: the claims ledger (``minipt experiment claims``), one row per paper's claim
  with its verdict and figures, from the committed runs in ``minipt/experiments/ledger/``.

Five blocks of benchmarks/README.md are written here too, from the committed JSON of
``bench_gpt.py``, ``bench_bert.py`` and ``bench_t5.py`` (``--json``) in ``BENCH_RUNS`` (one
dated folder of ``reports/benchmarks/``):

- ``training-vs-torch``: minipt's training tokens/s against torch eager's, two runs in one
  process and one with each side in its own process (``--separate``), with the spread of
  the per-round ratios.
- ``slower-parts``: for each run in one process, the parts of a step (benchmarks/parts.py)
  where minipt took more than 1.1 times torch's time.
- ``training-vs-torch-avx2`` and ``slower-parts-avx2``: the same two tables for the runs
  in ``BENCH_AVX2``, both sides on their AVX2 code (``--isa avx2``), with what each
  library ran as the runs read it back.
- ``every-set``: the ratios of every committed set of reports/benchmarks/ run with the
  stacks in 2 parts on the host's own code, so that the page's account of the earlier
  sets can be checked against their files.

``tests/test_readme.py`` checks that both files equal what this script writes.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from minipt.measured import load_reports, report_key, result_text, time_text  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BENCH_README = ROOT / "benchmarks" / "README.md"
BENCH_DIR = ROOT / "reports" / "benchmarks"
BENCH_RUNS = BENCH_DIR / "2026-11-28-part-processes"
BENCH_AVX2 = BENCH_DIR / "2026-11-28-part-processes-avx2"        # --isa avx2

FILE_ROLES = {
    "checkpoint.npz": "parameters, optimiser and random-generator state (npz + JSON, no pickle)",
    "tokenizer.json": "the tokenizer (models that read text through one)",
    "run.json": "preset, steps and seed (what `--resume` reuses; `minipt generate` reads its start and end tokens)",
    "metrics.jsonl": "one JSON line per step: loss, gradient norm, learning rate, validation loss",
    "loss.png": "the loss curves and gradient norm",
    "report.json": "the result figures (with their baselines) and the summary printed at the end",
    "vectors.npz": "the word vectors (word2vec, GloVe)",
}


def _begin(name: str) -> str:
    return f"<!-- begin generated {name}: scripts/readme_tables.py writes this block from {SOURCES[name]} -->"


def _end(name: str) -> str:
    return f"<!-- end generated {name} -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def models_block(reports: dict[str, dict]) -> str:
    from minipt.models import registry
    rows = ["| model | command | lesson | result (held out) | time: wall (CPU), load average at start → end |",
            "|---|---|---|---|---|"]
    for entry in registry.trainable():
        for preset in entry.presets:
            key = report_key(entry.name, preset)
            command = f"`minipt train {entry.name}" + ("`" if preset == "toy" else f" --preset {preset}`")
            lesson = f"`{entry.lesson}`" if entry.lesson else "-"
            r = reports.get(key)
            spec = entry.name if preset == "toy" else f"{entry.name}:{preset}"
            result, took = (_cell(result_text(r)), time_text(r)) if r else \
                (f"not measured yet: `python benchmarks/bench_presets.py {spec}`", "-")
            rows.append(f"| {entry.title} | {command} | {lesson} | {result} | {took} |")
    others = [e for e in registry.entries() if e not in registry.trainable()]
    rows.append("")
    rows.append("Models without a preset (trained inside their lessons): " +
                ", ".join(f"{e.title} (`{e.name}`, lesson `{e.lesson}`)" for e in others) + ".")
    return "\n".join(rows)


def run_files_block(reports: dict[str, dict]) -> str:
    seen: dict[str, list[str]] = {}
    for key, r in reports.items():
        for name in r.get("files_written", []):
            seen.setdefault(name, []).append(key)
    unknown = sorted(set(seen) - set(FILE_ROLES))
    if unknown:
        raise ValueError(f"a run wrote {', '.join(unknown)}, which FILE_ROLES does not describe")
    runs = sorted({r["model"] for r in reports.values()})
    lines = []
    for name in FILE_ROLES:
        if name in seen:
            by = sorted({reports[k]["model"] for k in seen[name]})
            rest = [m for m in runs if m not in by]
            who = ("every run" if not rest else "every run but " + ", ".join(rest) if len(rest) < len(by)
                   else "runs of " + ", ".join(by))
            lines.append(f"- `{name}`: {FILE_ROLES[name]}; {who}.")
    return "\n".join(lines)


def claims_block(reports: dict[str, dict]) -> str:
    """The claims ledger (``minipt experiment claims``) from its committed runs over seeds."""
    from minipt.experiments import ledger
    rows = ledger.rows()
    lines = ["| claim | paper | experiment | verdict | figures (mean ± sd over seeds; SE of the advantage) |",
             "|---|---|---|---|---|"]
    lines += [f"| {_cell(r['says'])} | {_cell(r['paper'])} | `{r['experiment']}` | **{r['verdict']}** | "
              f"{_cell(r['why'])} |" for r in rows]
    counts = ", ".join(f"{verdict} {n}" for verdict, n in ledger.counts(rows).items())
    return "\n".join(lines) + f"\n\n{len(rows)} claims: {counts}."


def _training_rows(path: Path) -> dict[str, dict]:
    """size -> row of a training benchmark's --json file (bench_gpt's under "quiet")."""
    import json
    data = json.loads(path.read_text())
    return {r["size"]: r for r in data.get("quiet", data.get("rows", []))}


def _ratio_table(folder: Path, hows: tuple, heading: str) -> str:
    """minipt/torch per benchmark and size from ``folder``'s --json files, one row per
    (how, run kinds) of ``hows``; the spread of the per-round ratios below."""
    kinds = [k for _, ks in hows for k in ks]
    runs = {(b, k): _training_rows(folder / f"bench_{b}.{k}.json") for b in ("gpt", "bert", "t5") for k in kinds}
    sizes = ("S", "M", "L")
    lines = [f"| benchmark, {heading} | " + " | ".join(sizes) + " |", "|---|---|---|---|"]
    for how, ks in hows:
        for b in ("gpt", "bert", "t5"):
            cells = [", ".join(f"{runs[b, k][s]['ratio']:.2f}x" for k in ks) for s in sizes]
            lines.append(f"| `bench_{b}.py`, {how} | " + " | ".join(cells) + " |")
    spread = {s: (min(r[s]["ratio_min"] for r in runs.values()), max(r[s]["ratio_max"] for r in runs.values()))
              for s in sizes}
    lines += ["", "Per-round ratios ranged over " + ", ".join(f"{lo:.2f}-{hi:.2f} at {s}"
                                                            for s, (lo, hi) in spread.items()) + "."]
    return "\n".join(lines)


def training_block(_reports=None) -> str:
    """minipt/torch per size: two runs in one process, then --separate; the spread."""
    return _ratio_table(BENCH_RUNS, (("two runs, one process", ("run1", "run2")), ("`--separate`", ("separate",))),
                        "`--batch-parts 2`, 15 rounds")


def _isa_line(folder: Path) -> str:
    """What both sides ran on, as every run of ``folder`` read it back (``harness.isa_info``)."""
    import json
    seen = {json.dumps(json.loads(p.read_text())["isa"], sort_keys=True) for p in sorted(folder.glob("bench_*.json"))}
    if len(seen) != 1:
        raise ValueError(f"the runs in {folder} did not all run on the same code: {sorted(seen)}")
    info = json.loads(seen.pop())
    return "Every run read back: " + ", ".join(f"{k} {v}" for k, v in info.items()) + "."


def avx2_training_block(_reports=None) -> str:
    """As ``training_block``, both sides on their AVX2 code (``--isa avx2``), two runs."""
    return _ratio_table(BENCH_AVX2, (("two runs, one process", ("run1", "run2")),),
                        "`--isa avx2`, `--batch-parts 2`, 15 rounds") + "\n\n" + _isa_line(BENCH_AVX2)


def _slower_table(folder: Path) -> str:
    """Per benchmark, size and run of one process in ``folder``: the parts of a step past
    the line of benchmarks/parts.py's table (``parts.slower``: more than 1.1 times torch's
    time), or none."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import parts
    lines = ["| benchmark | size | run 1 | run 2 |", "|---|---|---|---|"]
    for b in ("gpt", "bert", "t5"):
        runs = [_training_rows(folder / f"bench_{b}.{run}.json") for run in ("run1", "run2")]
        for size in ("S", "M", "L"):
            cells = []
            for rows in runs:
                split = rows[size]["parts"]
                mp, tp = split["minipt"], split["torch"]
                flags = [f"{part} {tp[part] / mp[part]:.2f}x ({1e3 * mp[part]:.2f} / {1e3 * tp[part]:.2f} ms)"
                         for part in mp if parts.slower(mp[part], tp[part])]
                cells.append(", ".join(flags) or "none")
            lines.append(f"| `bench_{b}.py` | {size} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# Every set of runs with the stacks in 2 parts on the host's own code, oldest first (the
# folders' names do not sort by time); the newest is BENCH_RUNS.
SETS = ("2026-11-27-attention-calls", "2026-11-27-python-overhead", "2026-11-27-attention-heads",
        "2026-11-27-attention-heads-2", "2026-11-27-linear-tiles", "2026-11-27-loss-attribution",
        "2026-11-28-cross-entropy-lanes", "2026-11-28-glue-and-lanes", "2026-11-28-fewer-hand-overs",
        "2026-11-28-optimiser-halves", "2026-11-28-prefetch", "2026-11-28-linear-calls",
        "2026-11-28-part-processes")


def is_native_set(folder: Path) -> bool:
    """Whether ``folder`` holds runs of the three benchmarks in one process (run1, run2),
    the stacks in 2 parts, on the host's own code (not ``--isa avx2``)."""
    import json
    runs = [folder / f"bench_{b}.{k}.json" for b in ("gpt", "bert", "t5") for k in ("run1", "run2")]
    if not all(p.exists() for p in runs):
        return False
    data = [json.loads(p.read_text()) for p in runs]
    return all(d.get("batch_parts") == 2 and d.get("isa", {}).get("Numba", "host") == "host" for d in data)


def every_set_block(_reports=None) -> str:
    """Per set of ``SETS`` and benchmark: each size's ratios of the runs in one process, and
    of ``--separate`` in brackets where the set has it."""
    lines = ["| set | benchmark | S | M | L |", "|---|---|---|---|---|"]
    for folder in (BENCH_DIR / name for name in SETS):
        if not is_native_set(folder):
            raise ValueError(f"{folder} is not a set of the three benchmarks in 2 parts on the host's code")
        for b in ("gpt", "bert", "t5"):
            runs = [_training_rows(folder / f"bench_{b}.{k}.json") for k in ("run1", "run2")]
            separate = folder / f"bench_{b}.separate.json"
            apart = _training_rows(separate) if separate.exists() else None
            cells = [", ".join(f"{r[s]['ratio']:.2f}" for r in runs) + (f" ({apart[s]['ratio']:.2f})" if apart else "")
                     for s in ("S", "M", "L")]
            lines.append(f"| `{folder.name}` | `bench_{b}.py` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def slower_parts_block(_reports=None) -> str:
    return _slower_table(BENCH_RUNS)


def avx2_slower_parts_block(_reports=None) -> str:
    return _slower_table(BENCH_AVX2)


BLOCKS = {"models": models_block, "run-files": run_files_block, "claims": claims_block}
BENCH_BLOCKS = {"training-vs-torch": training_block, "slower-parts": slower_parts_block,
                "training-vs-torch-avx2": avx2_training_block, "slower-parts-avx2": avx2_slower_parts_block,
                "every-set": every_set_block}
SOURCES = {"models": "reports/presets/", "run-files": "reports/presets/", "claims": "minipt/experiments/ledger/",
           **{name: f"{BENCH_RUNS.relative_to(ROOT).as_posix()}/" for name in ("training-vs-torch", "slower-parts")},
           **{name: f"{BENCH_AVX2.relative_to(ROOT).as_posix()}/"
              for name in ("training-vs-torch-avx2", "slower-parts-avx2")},
           "every-set": f"{BENCH_DIR.relative_to(ROOT).as_posix()}/"}


def render(readme: str, reports: dict[str, dict], blocks: dict = BLOCKS) -> str:
    """``readme`` with each generated block rewritten from ``reports``."""
    for name, make in blocks.items():
        begin, end = _begin(name), _end(name)
        if readme.count(begin) != 1 or readme.count(end) != 1:
            raise ValueError(f"the README must hold the markers of the generated block {name!r} once each")
        head, rest = readme.split(begin)
        _, tail = rest.split(end)
        readme = f"{head}{begin}\n{make(reports)}\n{end}{tail}"
    return readme


def main(argv: list[str]) -> int:
    reports, status = load_reports(), 0
    for path, blocks in ((README, BLOCKS), (BENCH_README, BENCH_BLOCKS)):
        current = path.read_text()
        wanted = render(current, reports, blocks)
        if "--check" not in argv:
            path.write_text(wanted)
        elif wanted != current:
            print(f"{path.relative_to(ROOT)} differs from scripts/readme_tables.py's output: run it and commit",
                  file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
