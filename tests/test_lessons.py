"""Every lesson executes top to bottom, and its notebook matches its jupytext twin.

Lessons live as ``lessons/NN_topic.py`` (jupytext percent format, readable diffs) and
``lessons/NN_topic.ipynb`` (what a student opens). CI runs them all (marked ``lesson``).
"""
from pathlib import Path

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

LESSONS = Path(__file__).resolve().parent.parent / "lessons"
NOTEBOOKS = sorted(LESSONS.glob("[0-9][0-9]_*.ipynb"))


def test_there_are_lessons():
    assert NOTEBOOKS, f"no lessons found in {LESSONS}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_matches_its_py_twin(path):
    twin = path.with_suffix(".py")
    assert twin.exists(), f"{path.name} has no jupytext twin {twin.name}"
    from_py = jupytext.read(twin)
    from_nb = nbformat.read(path, as_version=4)
    src = lambda nb: [(c.cell_type, c.source.strip()) for c in nb.cells]
    assert src(from_py) == src(from_nb), f"{path.name} and {twin.name} differ: run `jupytext --sync {twin}`"


@pytest.mark.lesson
@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_lesson_executes(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
