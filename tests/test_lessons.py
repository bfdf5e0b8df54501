"""Every lesson executes top to bottom at the quick budget, its notebook matches its
jupytext twin, and the committed notebook carries the outputs of a full-budget run.

Lessons live as ``lessons/NN_topic.py`` (jupytext percent format, readable diffs) and
``lessons/NN_topic.ipynb`` (what a student opens, committed executed by
``scripts/execute_lessons.py``). CI runs every lesson (marked ``lesson``) at
``MINIPT_LESSON_BUDGET=quick`` without writing the notebooks back.
"""
import importlib.util
from pathlib import Path

import jupytext
import nbformat
import pytest

from minipt import lesson_budget

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("execute_lessons", ROOT / "scripts" / "execute_lessons.py")
execute_lessons = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(execute_lessons)
NOTEBOOKS = execute_lessons.notebooks()


def test_there_are_lessons():
    assert NOTEBOOKS, f"no lessons found in {execute_lessons.LESSONS}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_matches_its_py_twin(path):
    twin = path.with_suffix(".py")
    assert twin.exists(), f"{path.name} has no jupytext twin {twin.name}"
    from_py = jupytext.read(twin)
    from_nb = nbformat.read(path, as_version=4)
    # the tags too: `checks` marks a cell the website leaves out (docs/conf.py)
    src = lambda nb: [(c.cell_type, c.source.strip(), c.metadata.get("tags", [])) for c in nb.cells]
    assert src(from_py) == src(from_nb), \
        f"{path.name} and {twin.name} differ: run `jupytext --update --to ipynb {twin} -o {path}`"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_notebook_is_executed(path):
    """Every code cell ran, in order, and a lesson that draws carries its figures."""
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    counts = [c.execution_count for c in code]
    assert counts == list(range(1, len(code) + 1)), \
        f"{path.name} is not committed executed (execution counts {counts}): run scripts/execute_lessons.py"
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, f"{path.name} was committed with an error: {errors[0].ename}: {errors[0].evalue}"
    draws = sum(c.source.count("plt.show()") for c in code)
    figures = sum("image/png" in o.get("data", {}) for c in code for o in c.outputs)
    assert figures >= draws, f"{path.name} calls plt.show() {draws} times but carries {figures} PNG figures"


@pytest.mark.lesson
@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_lesson_executes_at_the_quick_budget(path):
    nb, _ = execute_lessons.execute(path, "quick", write=False, timeout=600)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors


def test_budget_is_read_from_the_environment(monkeypatch):
    monkeypatch.delenv(lesson_budget.ENV, raising=False)
    assert lesson_budget.current() == "full" and lesson_budget.pick(full=1500, quick=150) == 1500
    monkeypatch.setenv(lesson_budget.ENV, "quick")
    assert lesson_budget.current() == "quick" and lesson_budget.pick(full=1500, quick=150) == 150
    monkeypatch.setenv(lesson_budget.ENV, "fast")
    with pytest.raises(ValueError, match="MINIPT_LESSON_BUDGET.*'fast'"):
        lesson_budget.current()


def test_stated_numbers_are_asserted_at_the_full_budget_only(monkeypatch):
    monkeypatch.setenv(lesson_budget.ENV, "full")
    assert lesson_budget.stated("loss", 0.5249, "0.52") == 0.5249
    lesson_budget.stated("loss", 0.5249, "0.53", band=0.01)
    with pytest.raises(AssertionError, match="loss: the prose says 0.53, this run gave 0.5249"):
        lesson_budget.stated("loss", 0.5249, "0.53")
    with pytest.raises(AssertionError, match="0.50 ± 0.02"):
        lesson_budget.stated("loss", 0.5249, "0.50", band=0.02)
    with pytest.raises(TypeError, match="claim must be"):
        lesson_budget.stated("loss", 0.5249, 0.52)
    monkeypatch.setenv(lesson_budget.ENV, "quick")
    lesson_budget.stated("loss", 0.5249, "0.53")             # the quick run's numbers are not the prose's


def test_a_survey_lists_every_mismatch_instead_of_stopping(monkeypatch, tmp_path):
    monkeypatch.setenv(lesson_budget.ENV, "full")
    monkeypatch.setenv(lesson_budget.SURVEY_ENV, str(tmp_path / "survey.txt"))
    lesson_budget.stated("loss", 0.5249, "0.53")
    lesson_budget.stated("accuracy", 0.91, "0.90")
    lesson_budget.stated("fine", 0.5249, "0.52")
    lines = (tmp_path / "survey.txt").read_text().splitlines()
    assert [l.split(":")[0] for l in lines] == ["loss", "accuracy"]
    monkeypatch.delenv(lesson_budget.SURVEY_ENV)
    with pytest.raises(AssertionError):                         # strict again without it
        lesson_budget.stated("loss", 0.5249, "0.53")
