import pytest


@pytest.fixture
def two_threads():
    """Two threads for both pools, as on a quiet 2-core machine: kernels that cut their work
    into parts on threads (``threads.in_parts``) then run the parts side by side even in a
    pytest-xdist worker, where the thread policy, seeing the other worker busy, gives one."""
    from minipt.kernels import threads
    with threads.limit(blas=2, numba=2):
        yield
