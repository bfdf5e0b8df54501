"""README.md cannot drift: its table of models and its list of run files are what
``scripts/readme_tables.py`` writes from the committed reports in ``reports/presets/``,
and its command (b) is what ``.ci/run`` runs."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tables():
    spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "scripts" / "readme_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tables():
    return _tables()


def test_readme_is_what_the_script_writes(tables):
    readme = (ROOT / "README.md").read_text()
    assert tables.render(readme, tables.load_reports()) == readme, \
        "README.md differs from the reports: run `python scripts/readme_tables.py` and commit"


def test_a_number_edited_by_hand_is_rewritten(tables):
    """A figure typed into the generated table does not survive: the script writes the
    report's figure back (so the equality test above fails on the edited README)."""
    readme = tables.render((ROOT / "README.md").read_text(), tables.load_reports())
    start = readme.index(tables._begin("models"))
    table = readme[start:readme.index(tables._end("models"))]
    number = re.search(r"\d\.\d{3}", table)
    assert number, "the generated table holds no result figure"
    edited = readme[:start + number.start()] + "9.999" + readme[start + number.end():]
    assert edited != readme
    assert tables.render(edited, tables.load_reports()) == readme


def test_the_benchmark_table_is_what_the_script_writes_from_the_runs(tables):
    """benchmarks/README.md's table of training speed against torch comes from the
    committed --json files: a ratio edited by hand is written back."""
    text = (ROOT / "benchmarks" / "README.md").read_text()
    assert tables.render(text, {}, tables.BENCH_BLOCKS) == text, \
        "benchmarks/README.md differs from the runs: run `python scripts/readme_tables.py` and commit"
    start = text.index(tables._begin("training-vs-torch"))
    number = re.search(r"\d\.\d\dx", text[start:])
    edited = text[:start + number.start()] + "9.99x" + text[start + number.end():]
    assert tables.render(edited, {}, tables.BENCH_BLOCKS) == text
    rows = tables._training_rows(tables.BENCH_RUNS / "bench_bert.run1.json")
    assert f"{rows['L']['ratio']:.2f}x" in text[start:text.index(tables._end("training-vs-torch"))]


def test_every_preset_has_a_row_and_every_default_preset_a_report(tables):
    """Each preset of ``minipt train`` is a row; the default (``toy``) presets all have a
    committed report, and each report is of the command its row shows."""
    from minipt.models import registry
    reports = tables.load_reports()
    block = tables.models_block(reports)
    for entry in registry.trainable():
        for preset in entry.presets:
            key = entry.name if preset == "toy" else f"{entry.name}-{preset}"
            command = f"minipt train {entry.name}" + ("" if preset == "toy" else f" --preset {preset}")
            assert f"| `{command}` |" in block
            if preset == "toy":
                assert key in reports, f"no committed report for {command}: python benchmarks/bench_presets.py"
            if key in reports:
                assert reports[key]["command"] == command


def test_command_b_is_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    readme = (ROOT / "README.md").read_text()
    assert f"```bash\n{ci}\n```" in readme, "README command (b) must be .ci/run's command, byte for byte"


def test_every_file_a_recipe_writes_is_listed():
    """The run-file names the recipes declare (the files ``--overwrite`` replaces) all
    appear in the README's list of what a run writes."""
    from minipt.recipes import (
        char_lm,
        classic,
        encoder,
        recurrent,
        run_folder,
        seq2seq,
        xlnet,
    )
    declared = set(char_lm.RUN_FILES + classic.LM_FILES + classic.VECTOR_FILES + encoder.RUN_FILES
                   + recurrent.RUN_FILES + run_folder.GENERATED_RUN_FILES + seq2seq.RUN_FILES + xlnet.RUN_FILES)
    readme = (ROOT / "README.md").read_text()
    listed = readme[readme.index("### What a run writes"):]
    missing = sorted(name for name in declared if f"`{name}`" not in listed)
    assert not missing, f"README's 'What a run writes' leaves out {missing}"


def test_every_set_is_listed_once_in_order_and_its_ratios_come_from_its_files(tables):
    """The table of every set holds each folder of runs in 2 parts on the host's code (a
    new set left out of ``SETS`` fails here), the newest being the one the first table
    reads, and no ``--isa avx2`` set."""
    native = {p.name for p in tables.BENCH_DIR.iterdir() if p.is_dir() and tables.is_native_set(p)}
    assert set(tables.SETS) == native and len(tables.SETS) == len(native)
    assert tables.SETS[-1] == tables.BENCH_RUNS.name and not tables.is_native_set(tables.BENCH_AVX2)
    block = tables.every_set_block()
    for name in tables.SETS:
        rows = tables._training_rows(tables.BENCH_DIR / name / "bench_t5.run2.json")
        assert f"| `{name}` | `bench_t5.py` | " in block
        assert f", {rows['L']['ratio']:.2f}" in block.split(f"| `{name}` | `bench_t5.py` | ")[1].split("\n")[0]
