"""The gradient-check suite behind ``minipt gradcheck`` and ``tests/test_selfcheck.py``.

Each module in this package defines ``CASES``: a list of ``Case`` objects, one per op,
module or model, each running a float64 central-difference check on small random
inputs. New layers add their cases in the file of their area.
"""
from __future__ import annotations

import importlib
import pkgutil

from ..models.registry import (
    GradcheckCase as Case,  # name, shapes, run() -> GradcheckResult
)


def all_cases() -> list[Case]:
    cases: list[Case] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        cases.extend(importlib.import_module(f".{info.name}", __name__).CASES)
    return cases
