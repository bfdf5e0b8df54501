"""Suite-wide settings.

Under pytest-xdist (``-n 2``) the workers share the cores, so each runs NumPy's BLAS on one
thread (OPENBLAS_NUM_THREADS, read when a worker imports NumPy) and minipt's thread policy
on one thread for BLAS and Numba alike (MINIPT_THREADS); lesson kernels and CLI
subprocesses inherit both. Set here, in the controller, before the workers start.

``bench_script`` imports a script of benchmarks/ by name for the tests of that script.
"""
import importlib
import os
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def pytest_configure(config):
    if getattr(config.option, "numprocesses", None):
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        os.environ.setdefault("MINIPT_THREADS", "1")


@pytest.fixture
def bench_script(monkeypatch):
    """``bench_script("parts")``: the module benchmarks/parts.py, with benchmarks/ on
    sys.path for this test only (the scripts import each other and ``harness``)."""
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module
