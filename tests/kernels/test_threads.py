"""The thread policy of minipt.kernels.threads, untimed and deterministic: the count it
chooses for a given load, the load it reads from /proc/stat text, that it sets NumPy's
BLAS and Numba to that count and never above the CPUs available, that a count set by
hand stands, and that MINIPT_THREADS fixes it. The load is injected, not measured."""
import os
import subprocess
import sys
import textwrap

import numba
import pytest
from threadpoolctl import threadpool_limits

from minipt.kernels import threads

CPUS = threads.available_cpus()


@pytest.fixture
def policy_state(monkeypatch):
    """A fresh policy state; the pools' counts restored afterwards."""
    saved = dict(threads._state)
    blas, nb = threads.blas_threads(), numba.get_num_threads()
    monkeypatch.delenv("MINIPT_THREADS", raising=False)
    threads._state.update(next=0.0, stat=None, cpu=None, wall=None, threads=None, held=0)
    yield threads._state
    threads._state.clear()
    threads._state.update(saved)
    for lib in threads._blas():
        lib.set_num_threads(blas)
    numba.set_num_threads(nb)


@pytest.mark.parametrize("cpus,others,want", [
    (2, 0.0, 2), (2, 0.3, 2), (2, 0.7, 1), (2, 1.0, 1), (2, 1.4, 1), (2, 6.0, 1),
    (1, 0.0, 1), (8, 3.0, 5), (8, 2.5, 6), (4, -0.2, 4)])
def test_threads_are_the_cores_others_leave_free(cpus, others, want):
    assert threads.choose_threads(cpus, others) == want


def test_choose_threads_rejects_no_cpus():
    with pytest.raises(ValueError, match="cpus must be >= 1, got 0"):
        threads.choose_threads(0, 0.0)


def test_busy_time_counts_only_our_cpus_and_not_idle_or_iowait():
    stat = textwrap.dedent("""\
        cpu  900 0 90 5000 50 0 0 0 0 0
        cpu0 100 10 20 1000 30 5 5 0 0 0
        cpu1 200 0 40 2000 20 0 0 10 0 0
        cpu2 600 0 30 2000 0 0 0 0 0 0
        intr 12345
        """)
    # cpu0: 100+10+20+5+5 = 140 busy jiffies; cpu1: 200+40+10 = 250; cpu2 not ours
    assert threads.cpu_busy_seconds(stat, {0, 1}, 0.01) == pytest.approx(3.9)
    assert threads.cpu_busy_seconds(stat, {2}, 0.01) == pytest.approx(6.3)


def test_others_busy_subtracts_our_own_cpu_time():
    assert threads.others_busy(10.0, 12.0, 1.0, 1.0) == pytest.approx(1.0)
    assert threads.others_busy(10.0, 10.5, 1.0, 1.0) == 0.0             # jiffy rounding
    with pytest.raises(ValueError, match="wall must be > 0"):
        threads.others_busy(0.0, 1.0, 0.0, 0.0)


def test_our_workers_cpu_time_counts_as_our_own(monkeypatch):
    """A batch part's worker process is ours: its CPU time must not read as another program's."""
    monkeypatch.setitem(threads._state, "helpers", {})
    monkeypatch.setattr(threads.time, "process_time", lambda: 2.0)
    assert threads._own_cpu() == 2.0
    threads.count_as_own(1234, 3.5)
    threads.count_as_own(5678, 1.0)
    threads.count_as_own(1234, 4.0)                                    # the latest count of each
    assert threads._own_cpu() == pytest.approx(7.0)


def test_set_threads_sets_numpy_blas_and_numba_never_above_available(policy_state):
    assert threads.set_threads(99) == CPUS
    assert threads.blas_threads() == CPUS and numba.get_num_threads() == CPUS
    assert threads.set_threads(1) == 1
    assert threads.blas_threads() == 1 and numba.get_num_threads() == 1


def test_controls_numpys_own_blas():
    import numpy as np
    paths = [lib.filepath for lib in threads._blas()]
    assert paths and all("numpy" in p or np.__file__.rsplit("/", 2)[0] in p for p in paths), paths


@pytest.mark.skipif(CPUS < 2, reason="needs 2 CPUs to tell one thread from two")
def test_refresh_follows_the_load_it_reads(policy_state, monkeypatch):
    readings = iter([100.0, 101.5, 101.6, 103.6])          # busy seconds of our CPUs
    own = iter([10.0, 10.5, 10.6, 12.6])                   # our own CPU seconds
    monkeypatch.setattr(threads, "_read_busy", lambda: next(readings))
    monkeypatch.setattr(threads, "_own_cpu", lambda: next(own))
    assert threads.refresh(now=1000.0) == CPUS              # first reading: all CPUs
    assert threads.refresh(now=1000.2) == CPUS              # within INTERVAL: no new reading
    assert threads.refresh(now=1001.0) == CPUS - 1          # others kept 1.0 core busy
    assert threads.blas_threads() == CPUS - 1 and numba.get_num_threads() == CPUS - 1
    assert threads.refresh(now=1002.0) == CPUS              # quiet again: 0.1 - 0.1 = 0


@pytest.mark.skipif(CPUS < 2, reason="needs 2 CPUs to tell one thread from two")
def test_a_count_set_by_hand_stands(policy_state, monkeypatch):
    readings = iter([100.0, 101.5, 101.6])                 # quiet, busy (1 core), quiet
    own = iter([10.0, 10.5, 10.6])
    monkeypatch.setattr(threads, "_read_busy", lambda: next(readings))
    monkeypatch.setattr(threads, "_own_cpu", lambda: next(own))
    assert threads.refresh(now=1000.0) == CPUS
    with threadpool_limits(limits=1, user_api="blas"):
        threads.refresh(now=1001.0)                         # busy: the policy would pick CPUS - 1
        threads.refresh(now=1002.0)                         # quiet: it would pick CPUS again
        assert threads.blas_threads() == 1
    assert numba.get_num_threads() == CPUS


def test_a_limit_block_holds_even_before_the_first_reading(policy_state, monkeypatch):
    readings = iter([100.0, 101.5])                         # quiet, then busy (1 core)
    own = iter([10.0, 10.5])
    monkeypatch.setattr(threads, "_read_busy", lambda: next(readings))
    monkeypatch.setattr(threads, "_own_cpu", lambda: next(own))
    with threads.limit(blas=CPUS, numba=CPUS):
        assert threads.refresh(now=1000.0) is None          # no reading inside the block
        assert threads.blas_threads() == CPUS
    assert threads.refresh(now=1001.0) == CPUS              # first reading after it
    assert threads.refresh(now=1002.0) == max(1, CPUS - 1)
    assert threads.blas_threads() == max(1, CPUS - 1) and not threads._overridden()


@pytest.mark.skipif(CPUS < 2, reason="needs 2 CPUs to tell one thread from two")
def test_parts_take_every_cpu_beside_a_busy_process_unless_a_count_was_set_by_hand(policy_state, monkeypatch):
    readings = iter([100.0, 101.5, 103.0, 104.5])          # quiet, then others keep 1.0 core busy
    own = iter([10.0, 10.5, 11.0, 11.5])
    monkeypatch.setattr(threads, "_read_busy", lambda: next(readings))
    monkeypatch.setattr(threads, "_own_cpu", lambda: next(own))
    assert threads.part_threads(now=1000.0) == CPUS
    assert threads.part_threads(now=1001.0) == CPUS         # the parts: every CPU ...
    assert threads.blas_threads() == CPUS - 1               # ... the pools: what others leave
    with threads.limit(blas=1, numba=1):
        assert threads.part_threads(now=1001.1) == CPUS - 1  # a limit block stands
    monkeypatch.setenv("MINIPT_THREADS", "1")                # so does a fixed count
    assert threads.part_threads(now=1003.0) == 1


def test_minipt_threads_fixes_the_count(policy_state, monkeypatch):
    monkeypatch.setenv("MINIPT_THREADS", "1")
    assert threads.refresh(now=1000.0) == 1
    assert threads.blas_threads() == 1 and numba.get_num_threads() == 1
    monkeypatch.setenv("MINIPT_THREADS", "two")
    with pytest.raises(ValueError, match="MINIPT_THREADS must be a non-negative integer, got 'two'"):
        threads.refresh(now=1010.0)


def test_a_process_pinned_to_one_cpu_runs_every_pool_on_one_thread():
    """Affinity narrowed after start-up (as ``taskset -p`` or a container would): the first
    op then runs BLAS and Numba on one thread, not on the machine's core count."""
    code = textwrap.dedent("""
        import os, numba, numpy as np
        from minipt.ops.norms import layer_norm_forward
        from minipt.kernels import threads
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        x = np.ones((4, 8), np.float32)
        layer_norm_forward(x, np.ones(8, np.float32), np.zeros(8, np.float32))
        print(threads.blas_threads(), numba.get_num_threads())
        """)
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**env, "MINIPT_THREADS": "0"}).stdout.split()
    assert out == ["1", "1"]


_IDLE_CPU = textwrap.dedent("""
    import time, numpy as np
    from minipt.kernels import threads
    from minipt.ops.norms import layer_norm_forward
    x = np.ones((4, 8), np.float32)
    layer_norm_forward(x, np.ones(8, np.float32), np.zeros(8, np.float32))   # the policy starts
    a = np.ones((512, 512), np.float32)
    idle = []
    for _ in range(3):
        a @ a                                           # a GEMM on every BLAS thread
        c0 = time.process_time()
        time.sleep(0.05)                                # then nothing for 50 ms
        idle.append(time.process_time() - c0)
    print(threads.blas_threads(), min(idle))
    """)


@pytest.mark.skipif(CPUS < 2, reason="needs 2 CPUs for an OpenBLAS worker thread")
def test_blas_threads_sleep_soon_after_a_matmul():
    """Once the policy has set the pools up, OpenBLAS's workers stop spinning within
    about 0.1 ms of a call: 50 ms of idling after a GEMM costs the process almost no
    CPU time (with OpenBLAS's own 2^28-cycle spin, one worker burns about the whole
    50 ms). Skipped unless NumPy's BLAS is an OpenBLAS with the entry points used."""
    if not any(lib.internal_api == "openblas" for lib in threads._blas()):
        pytest.skip("NumPy's BLAS is not OpenBLAS")
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_NUM_THREADS", "OPENBLAS_THREAD_TIMEOUT", "MINIPT_THREADS")}
    n, idle = subprocess.run([sys.executable, "-c", _IDLE_CPU], capture_output=True, text=True, check=True,
                             env=env).stdout.split()
    if int(n) < 2:
        pytest.skip("the policy chose one BLAS thread (a busy machine): no worker to watch")
    assert float(idle) < 0.010, f"{float(idle) * 1e3:.1f} ms of CPU while idle for 50 ms: BLAS threads spin"


def test_a_spin_time_set_by_hand_stands(monkeypatch):
    monkeypatch.setenv("OPENBLAS_THREAD_TIMEOUT", "28")
    assert threads.short_blas_spin(threads._blas()) is False
    assert os.environ["OPENBLAS_THREAD_TIMEOUT"] == "28"


_KERNEL_IDLE_CPU = textwrap.dedent("""
    import time, numba, numpy as np
    from minipt import kernels
    q = np.ones((8, 6, 256, 32), np.float32)                # B, H, T, D: a prange over 48 heads
    attend = kernels.get("fused_attention_forward")
    attend(q, q, q, 0.1, True)
    idle = []
    for _ in range(3):
        attend(q, q, q, 0.1, True)
        c0 = time.process_time()
        time.sleep(0.05)                                    # then nothing for 50 ms
        idle.append(time.process_time() - c0)
    print(numba.threading_layer(), numba.get_num_threads(), min(idle))
    """)


@pytest.mark.skipif(CPUS < 2, reason="needs 2 CPUs for a Numba worker thread")
def test_numba_threads_sleep_soon_after_a_kernel():
    """Numba runs on OpenMP with a short spin (GOMP_SPINCOUNT=10000): after a parallel
    kernel its idle threads stop burning CPU within about a millisecond. OpenMP's own
    spin (300,000 turns) costs about 9 ms of CPU after every kernel here."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_NUM_THREADS", "NUMBA_THREADING_LAYER", "GOMP_SPINCOUNT", "OMP_WAIT_POLICY",
                        "MINIPT_THREADS")}
    layer, n, idle = subprocess.run([sys.executable, "-c", _KERNEL_IDLE_CPU], capture_output=True, text=True,
                                    check=True, env=env).stdout.split()
    if int(n) < 2:
        pytest.skip("the policy chose one thread (a busy machine): no worker to watch")
    assert layer in ("omp", "workqueue")
    assert float(idle) < 0.005, f"{float(idle) * 1e3:.1f} ms of CPU while idle for 50 ms: {layer} threads spin"


def test_openmp_layer_with_short_spin_unless_a_libgomp_came_first():
    code = textwrap.dedent("""
        import ctypes, os, sys
        if sys.argv[1] == "preloaded":
            ctypes.CDLL("libgomp.so.1")                     # as torch brings its own
        import numba
        import minipt.kernels
        print(numba.config.THREADING_LAYER, os.environ.get("GOMP_SPINCOUNT"))
        """)
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_THREADING_LAYER", "GOMP_SPINCOUNT")}
    run = [sys.executable, "-c", code]
    try:
        pre = subprocess.run(run + ["preloaded"], capture_output=True, text=True, check=True, env=env).stdout
    except subprocess.CalledProcessError:
        pytest.skip("no libgomp.so.1 on this machine")
    assert pre.split() == ["workqueue", "None"]
    fresh = subprocess.run(run + ["fresh"], capture_output=True, text=True, check=True, env=env).stdout
    assert fresh.split() == ["default", "10000"]            # "default" follows omp, workqueue, tbb
    mine = subprocess.run(run + ["fresh"], capture_output=True, text=True, check=True,
                          env={**env, "NUMBA_THREADING_LAYER": "workqueue"}).stdout
    assert mine.split() == ["workqueue", "None"]            # a layer set by hand stands


def test_numba_threads_reads_and_sets_this_threads_count_as_numba_does():
    """The fast entry points give and set what numba.get_num_threads / set_num_threads do,
    per thread: a count set on another thread leaves this one's alone."""
    import threading
    start = numba.get_num_threads()
    assert threads.numba_threads() == start
    try:
        threads.set_numba_threads(1)
        assert numba.get_num_threads() == 1 == threads.numba_threads()
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        assert threads.numba_threads() == numba.get_num_threads()
        seen = []

        def other():
            threads.set_numba_threads(1)
            seen.append((threads.numba_threads(), numba.get_num_threads()))
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert seen == [(1, 1)] and threads.numba_threads() == numba.get_num_threads()
    finally:
        numba.set_num_threads(start)
