"""Numba's disk cache checks a cached kernel against the date of its own source file only.
A kernel compiled with a function or constant of another file (inlined, or linked into the
same machine code) keeps the old copy after that file changes: attention's part kernels
calling tiles of an older layout segfaulted. So each kernel module that imports from
another one records that file's hash in ``INLINED_SOURCES``, and editing one means
editing the other, whose kernels then compile again."""
import ast
import hashlib
from pathlib import Path

import pytest

import minipt.kernels

KERNELS = Path(minipt.kernels.__file__).resolve().parent
PURE_PYTHON = {"threads", "__init__"}      # thread pools and the registry: nothing of them is compiled


def _sha(name: str) -> str:
    return hashlib.sha256((KERNELS / f"{name}.py").read_bytes()).hexdigest()[:16]


def _siblings(path: Path) -> set[str]:
    """The kernel modules ``path`` imports from (``from .x import ...``, ``from . import x``)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names = [node.module] if node.module else [a.name for a in node.names]
            out |= {n for n in names if (KERNELS / f"{n}.py").exists()}
    return out - PURE_PYTHON


def _recorded(path: Path) -> dict:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "INLINED_SOURCES" for t in node.targets):
            return ast.literal_eval(node.value)
    return {}


MODULES = sorted(p for p in KERNELS.glob("*.py") if p.stem not in PURE_PYTHON)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_each_kernel_module_records_the_hash_of_each_kernel_file_it_imports(path):
    want = {f"{name}.py": _sha(name) for name in sorted(_siblings(path))}
    assert _recorded(path) == want, (
        f"set INLINED_SOURCES = {want!r} in minipt/kernels/{path.name}, so that Numba compiles its "
        "kernels again after the files they take code from changed")


def test_the_guard_sees_the_tiles_in_attention():
    assert "tiles.py" in _recorded(KERNELS / "attention.py") and "calls.py" in _recorded(KERNELS / "tiles.py")
