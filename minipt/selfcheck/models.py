"""Gradcheck cases for whole models, taken from the registry: each entry's whole-model
check (loss to every parameter, tied weights included) and its own extra cases."""
from ..models import registry
from . import Case  # noqa: F401  (the type of every entry)


def _cases() -> list[Case]:
    return [c for e in registry.entries() for c in e.all_gradchecks()]


CASES = _cases()
