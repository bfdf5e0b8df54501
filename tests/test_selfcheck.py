"""Every case of the ``minipt gradcheck`` suite, as a test (float64, tolerance 1e-6)."""
import pytest

from minipt.selfcheck import all_cases

CASES = all_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_gradcheck_case(case):
    res = case.run()
    assert res.passed, f"{case.name}\n{res}"
