"""Suite-wide settings.

Under pytest-xdist (``-n 2``) the workers share the cores, so each runs NumPy's BLAS on one
thread (OPENBLAS_NUM_THREADS, read when a worker imports NumPy) and minipt's thread policy
on one thread for BLAS and Numba alike (MINIPT_THREADS); lesson kernels and CLI
subprocesses inherit both. Set here, in the controller, before the workers start.
"""
import os


def pytest_configure(config):
    if getattr(config.option, "numprocesses", None):
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        os.environ.setdefault("MINIPT_THREADS", "1")
