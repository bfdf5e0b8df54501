"""One training budget for every lesson: ``MINIPT_LESSON_BUDGET=quick|full``.

A lesson trains for as long as its prose needs at the ``full`` budget (the default: what
a student gets, and what the committed, executed notebooks show), or for a fraction of
that at the ``quick`` budget (what the test suite runs). The quick run still asserts the
lesson's qualitative claims (A beats B); the numbers the prose quotes were measured at
the full budget and are asserted only there::

    from minipt import lesson_budget as budget
    steps = budget.pick(full=1500, quick=150)
    ...
    budget.stated("validation loss", val_loss, "0.53")   # a no-op at the quick budget

``stated`` compares at the precision the prose prints (``"0.53"``: two decimals), or
within ``band`` where the prose says "about". After a change to the code under a lesson,
an author can set ``MINIPT_LESSON_SURVEY=FILE``: every mismatch is then appended to FILE
instead of stopping the lesson, so one run lists all the prose to update (run it with
``scripts/execute_lessons.py --no-write``; the committed run is always the strict one).
"""
from __future__ import annotations

import os

ENV = "MINIPT_LESSON_BUDGET"
SURVEY_ENV = "MINIPT_LESSON_SURVEY"
BUDGETS = ("quick", "full")


def current() -> str:
    """The budget named by ``MINIPT_LESSON_BUDGET`` ("full" when unset)."""
    name = os.environ.get(ENV, "full").strip().lower() or "full"
    if name not in BUDGETS:
        raise ValueError(f"{ENV} must be one of {BUDGETS}, got {os.environ[ENV]!r}")
    return name


def is_full() -> bool:
    """True at the full budget, where the numbers quoted in the prose are asserted."""
    return current() == "full"


def pick(full, quick):
    """``full`` at the full budget, ``quick`` at the quick one (steps, data sizes, ...)."""
    return full if is_full() else quick


def stated(what: str, value: float, claim: str, band: float | None = None) -> float:
    """Assert, at the full budget, that ``value`` is the number the prose states.

    ``claim`` is the number as the prose prints it: without ``band`` the value must print
    the same at that many decimals; with ``band`` it must lie within ``band`` of it.
    Returns ``value``; does nothing at the quick budget, whose numbers the prose does not
    quote."""
    if not isinstance(claim, str):
        raise TypeError(f"claim must be the number as the prose prints it (a str), got {type(claim).__name__}")
    if not is_full():
        return value
    if band is not None:
        ok = abs(float(value) - float(claim)) <= band
        said = f"{claim} ± {band}"
    else:
        decimals = len(claim.split(".")[1]) if "." in claim else 0
        ok = f"{float(value):.{decimals}f}" == claim
        said = claim
    if not ok:
        message = (f"{what}: the prose says {said}, this run gave {float(value):.6g} "
                   f"(re-run at the full budget and update the prose)")
        survey = os.environ.get(SURVEY_ENV)
        if not survey:
            raise AssertionError(message)
        with open(survey, "a") as f:
            f.write(message + "\n")
    return value
