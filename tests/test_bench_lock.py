"""benchmarks/bench_lock.py: the two kernels differ only in keeping Python's lock, each
thread runs its whole share, the two sides run on two threads, and the script prints a
hand-over and a row per kernel length."""
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from minipt import kernels

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="MINIPT_NUMBA=0")


@pytest.fixture
def bench_lock(bench_script):
    return bench_script("bench_lock")


def test_one_kernel_lets_go_of_the_lock_and_the_other_keeps_it(bench_lock):
    assert bench_lock.spin_free.targetoptions["nogil"] is True
    assert bench_lock.spin_held.targetoptions.get("nogil", False) is False
    assert bench_lock.spin_free(1000) == bench_lock.spin_held(1000) == bench_lock._spin(1000)


def test_each_thread_runs_its_whole_share_on_a_thread_of_its_own(bench_lock):
    calls, lock = [], threading.Lock()

    def kernel(turns):
        with lock:
            calls.append((threading.get_ident(), turns))
    bench_lock.together(bench_lock.work(kernel, 7, 3, reps=5))()
    threads = {ident for ident, _ in calls}
    assert len(calls) == 10 and len(threads) == 2 and {t for _, t in calls} == {7}
    assert sorted(sum(1 for i, _ in calls if i == t) for t in threads) == [5, 5]


def test_the_hand_over_closes_its_pipes(bench_lock):
    before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    us = bench_lock.hand_over_us(trips=50)
    assert 0 < us < 1e5
    if before is not None:
        assert len(os.listdir("/proc/self/fd")) == before


def test_the_script_prints_the_hand_over_and_a_row_per_kernel():
    done = subprocess.run([sys.executable, str(BENCH / "bench_lock.py"), "--rounds", "1", "--reps", "10",
                           "--kernels-us", "5,200"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert any(line.startswith("hand-over between two threads:") for line in lines), done.stdout
    rows = [line.split() for line in lines if line.split() and line.split()[0] in ("5", "200")]
    assert len(rows) == 2 and all(float(r[1]) > 0 and float(r[3]) > 0 for r in rows), done.stdout
