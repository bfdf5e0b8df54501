"""What a new user does, in a fresh virtual environment: README command (a)'s editable
install, then the lessons extra on top of it, then a lesson executed with that venv's
kernel. Found by hand once: a non-editable (a) left Numba's cache files in
site-packages/minipt, and after ``pip install -e ".[lessons]"`` that folder, now a bare
namespace package, hid the editable install (``from minipt import check_module`` failed
in a notebook). Slow (it installs from the package registry), so marked; CI runs it."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _run(cmd, cwd, timeout=900):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", MINIPT_LESSON_BUDGET="quick")
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{' '.join(map(str, cmd))} failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


@pytest.mark.slow
def test_readme_a_then_the_lessons_extra_then_a_lesson(tmp_path):
    clone = tmp_path / "clone"          # not "minipt": a folder of that name in the cwd would shadow the install
    away = tmp_path / "elsewhere"       # where the user's commands run: not the clone
    away.mkdir()
    shutil.copytree(REPO, clone, ignore=shutil.ignore_patterns(".venv", ".git", "runs", "__pycache__", "*.egg-info",
                                                                 ".pytest_cache"))
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path)
    py = venv / "bin" / "python"
    _run([py, "-m", "pip", "install", "-q", "-e", "."], clone)                     # README (a), install part
    _run([py, "-c", "import numpy as np; from minipt.ops.norms import layer_norm_forward; "
                    "x = np.ones((4, 8), np.float32); layer_norm_forward(x, x[0], x[0])"], away)   # Numba compiles
    _run([py, "-m", "pip", "install", "-q", "-e", ".[lessons]"], clone)          # what the README says next
    where = _run([py, "-c", "import minipt; from minipt import check_module; print(minipt.__file__)"], away)
    assert where.strip() == str(clone / "minipt" / "__init__.py")
    nb = clone / "lessons" / "00_backprop.ipynb"
    _run([py, "-c", "import nbformat, sys; from nbclient import NotebookClient; "
                    f"nb = nbformat.read({str(nb)!r}, as_version=4); "
                    f"NotebookClient(nb, timeout=600, kernel_name='python3', resources={{'metadata': {{'path': {str(away)!r}}}}}).execute()"],
         away)
