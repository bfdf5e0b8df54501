"""How many threads minipt's two pools may use: OpenBLAS (NumPy's matmuls) and Numba.

On a laptop something else is always running. A parallel region (a GEMM split in two, a
``prange`` loop) finishes when its slowest thread does; when one of two cores is taken
by another process, the half scheduled there runs at half speed or waits for a time
slice, and OpenBLAS's idle threads spin on the shared core. A step then slowed 2.3-2.6x
beside one single-threaded process and 5-7x beside a two-threaded one
(benchmarks/bench_threads.py measures each setting). The policy:

1. **Only the CPUs this process may run on**: ``os.sched_getaffinity``, not the machine's
   core count (a container or ``taskset`` gives fewer).
2. **Only the CPUs others leave free**: every ``INTERVAL`` seconds the busy time of those
   CPUs (``/proc/stat``) minus this process's own CPU time gives the cores other
   processes used; the pools get the rest, rounded, at least one thread.
3. **The same count for both pools**, so a Numba loop and a GEMM never ask for more
   threads than there are free cores (they run one after the other, never together).
4. **A count set by hand stands**: inside a ``threadpoolctl.threadpool_limits`` block or
   after ``numba.set_num_threads``, the policy leaves the pools alone.
5. **No spinning between calls**: after each call OpenBLAS's worker threads spin for
   2^28 cycles (about 0.1 s) before they sleep, so a Numba kernel that follows a matmul
   shares its cores with them. In a GPT L step the attention kernels took 157 ms instead
   of 125 ms (median of 24 steps, beside the same steps with the short spin). The spin is
   cut to 2^SPIN_EXPONENT cycles when the pools are first set up
   (``short_blas_spin``), unless ``OPENBLAS_THREAD_TIMEOUT`` is set by hand.

``refresh()`` applies it and is cheap to call often (it re-reads the load at most every
``INTERVAL`` seconds); ``minipt.kernels.get`` calls it, so every op keeps it current.
``MINIPT_THREADS=N`` fixes the count instead (``0`` or unset: the policy).
"""
from __future__ import annotations

import os
import time
from contextlib import contextmanager

INTERVAL = 0.5          # seconds between two readings of the machine's load
SPIN_EXPONENT = 18      # OpenBLAS workers spin 2^18 cycles (about 0.1 ms) after a call, then sleep

_state = {"next": 0.0, "stat": None, "cpu": None, "wall": None, "threads": None, "blas": None, "held": 0,
          "pool": None, "numba_get": None, "numba_set": None, "by_policy": False, "helpers": {}}


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:                                       # not Linux
        return max(1, os.cpu_count() or 1)


def choose_threads(cpus: int, others_busy: float) -> int:
    """Threads for each pool: the cores left free by others, rounded half up, in [1, cpus].

    ``others_busy`` is how many cores other processes kept busy (0.0 on a quiet machine,
    about 1.0 beside one single-threaded process)."""
    if cpus < 1:
        raise ValueError(f"cpus must be >= 1, got {cpus}")
    return max(1, min(cpus, int(cpus - max(0.0, others_busy) + 0.5)))


def cpu_busy_seconds(stat_text: str, cpus: set[int], tick: float) -> float:
    """Seconds the CPUs in ``cpus`` spent busy (not idle, not waiting for I/O) since boot,
    from the text of ``/proc/stat``; ``tick`` is seconds per jiffy."""
    total = 0
    for line in stat_text.splitlines():
        head, _, rest = line.partition(" ")
        if head.startswith("cpu") and head[3:].isdigit() and int(head[3:]) in cpus:
            f = [int(v) for v in rest.split()]
            total += sum(f[:8]) - f[3] - f[4]                     # all but idle and iowait
    return total * tick


def others_busy(busy_before: float, busy_after: float, own_cpu: float, wall: float) -> float:
    """Cores kept busy by other processes over ``wall`` seconds: the CPUs' busy time
    minus this process's own CPU time (its spinning threads included)."""
    if wall <= 0:
        raise ValueError(f"wall must be > 0 seconds, got {wall}")
    return max(0.0, (busy_after - busy_before - own_cpu) / wall)


def _read_busy() -> float | None:
    try:
        with open("/proc/stat") as f:
            text = f.read()
    except OSError:
        return None
    return cpu_busy_seconds(text, os.sched_getaffinity(0), 1.0 / os.sysconf("SC_CLK_TCK"))


def _own_cpu() -> float:
    """CPU seconds of this process, all its threads (spinning ones included), and of the
    worker processes that run its batch parts (``count_as_own``)."""
    return time.process_time() + sum(_state["helpers"].values())


def count_as_own(helper, cpu_seconds: float) -> None:
    """Count ``cpu_seconds``, the CPU time a worker process of ours (``helper``, any key)
    has used so far, as this process's own: the policy must not take a worker that runs
    a batch part for another program and give the pools one thread (a GPT L step's AdamW
    then took 3.5 ms against 2.0). A worker that ended keeps its last count."""
    _state["helpers"][helper] = cpu_seconds


def _blas():
    """threadpoolctl's controller of NumPy's own BLAS (not torch's or another library's)."""
    if _state["blas"] is None:
        import numpy as np
        from threadpoolctl import ThreadpoolController
        with ThreadpoolController().limit(limits=None):           # make sure NumPy's BLAS is loaded
            np.ones((2, 2)) @ np.ones((2, 2))
        ctl = ThreadpoolController()
        numpy_dir = os.path.dirname(np.__file__) + ".libs"
        mine = [lib for lib in ctl.lib_controllers
                if lib.user_api == "blas" and (lib.filepath.startswith(numpy_dir) or "numpy" in lib.filepath)]
        _state["blas"] = mine or [lib for lib in ctl.lib_controllers if lib.user_api == "blas"]
        short_blas_spin(_state["blas"])
    return _state["blas"]


def short_blas_spin(libs, exponent: int = SPIN_EXPONENT) -> bool:
    """Make OpenBLAS's idle worker threads sleep after 2^exponent cycles of spinning
    instead of 2^28; returns True when it was applied. OpenBLAS reads its spin time
    (``OPENBLAS_THREAD_TIMEOUT``) from the environment when its threads start, so the
    variable is set for the moment of ``openblas_read_env`` and the threads are shut
    down, to start again with it at the next call. Left alone: a timeout set by hand,
    a BLAS other than OpenBLAS, an OpenBLAS without these two entry points."""
    import ctypes
    if "OPENBLAS_THREAD_TIMEOUT" in os.environ:
        return False
    applied = False
    for lib in libs:
        if lib.internal_api != "openblas":
            continue
        try:
            dll = ctypes.CDLL(lib.filepath)
            read_env, shutdown = dll.openblas_read_env, dll.blas_thread_shutdown_
        except (OSError, AttributeError):
            continue
        os.environ["OPENBLAS_THREAD_TIMEOUT"] = str(int(exponent))
        try:
            read_env()
        finally:
            del os.environ["OPENBLAS_THREAD_TIMEOUT"]
        shutdown()
        applied = True
    return applied


def blas_threads() -> int:
    """Threads NumPy's BLAS uses now."""
    return max(lib.num_threads for lib in _blas())


def _numba():
    """Numba if it is loaded (its pool exists only then), else None."""
    import sys
    return sys.modules.get("numba")


def numba_threads() -> int:
    """This thread's Numba thread count, as ``numba.get_num_threads`` gives it, through
    Numba's own entry point once its pool is up: the public function takes two locks on
    every call, a process-wide one among them (6 us a call inside a step here, 14-33 calls
    a step at S and M)."""
    get = _state["numba_get"]
    if get is None:
        import numba
        from numba.np.ufunc import parallel
        n = numba.get_num_threads()                               # starts the pool if need be
        _state["numba_get"] = getattr(parallel, "_get_num_threads", None) or numba.get_num_threads
        _state["numba_set"] = getattr(parallel, "_set_num_threads", None) or numba.set_num_threads
        return n
    return get()


def set_numba_threads(n: int) -> None:
    """``numba.set_num_threads(n)`` for this thread (n in [1, NUMBA_NUM_THREADS]), as
    ``numba_threads`` reads it."""
    numba_threads()                                               # the pool up, its entry points found
    _state["numba_set"](int(n))


def set_threads(n: int) -> int:
    """Give both pools ``n`` threads (clipped to [1, available CPUs]); returns the count."""
    nb = _numba()
    most = available_cpus() if nb is None else min(available_cpus(), nb.config.NUMBA_NUM_THREADS)
    n = max(1, min(int(n), most))
    if n != _state["threads"]:
        for lib in _blas():
            lib.set_num_threads(n)
        if nb is not None:
            nb.set_num_threads(n)
        _state["threads"] = n
    return n


def _overridden() -> bool:
    """True when someone else changed a pool after the policy last set it (a
    ``threadpool_limits`` block, ``numba.set_num_threads``): their choice stands."""
    n = _state["threads"]
    if n is None:
        return False
    nb = _numba()
    return blas_threads() != n or (nb is not None and numba_threads() != n)


def fixed_threads() -> int:
    """``MINIPT_THREADS`` as a count, 0 when the policy decides."""
    raw = os.environ.get("MINIPT_THREADS", "0")
    if not raw.isdigit():
        raise ValueError(f"MINIPT_THREADS must be a non-negative integer, got {raw!r}")
    return int(raw)


def refresh(now: float | None = None) -> int:
    """Apply the policy if ``INTERVAL`` has passed since the last reading; returns the
    thread count in force."""
    now = time.monotonic() if now is None else now
    if _state["held"] or (now < _state["next"] and _state["threads"] is not None):
        return _state["threads"]
    _state["next"] = now + INTERVAL
    _state["by_policy"] = False
    if _overridden():
        return _state["threads"]
    fixed = fixed_threads()
    if fixed:
        return set_threads(fixed)
    _state["by_policy"] = True
    busy, cpu = _read_busy(), _own_cpu()
    if busy is None:                                              # no /proc: affinity only
        return set_threads(available_cpus())
    if _state["stat"] is None or now <= _state["wall"]:
        n = set_threads(_state["threads"] or available_cpus())
    else:
        others = others_busy(_state["stat"], busy, cpu - _state["cpu"], now - _state["wall"])
        n = set_threads(choose_threads(available_cpus(), others))
    _state.update(stat=busy, cpu=cpu, wall=now)
    return n


def part_threads(now: float | None = None) -> int:
    """Threads for work cut into a few long parts that meet rarely (a Transformer stack's
    batch in parts, ``minipt.nn.batch_parts``): every CPU this process may run on, even
    when other processes keep some busy; ``refresh``'s count when it is fixed
    (``MINIPT_THREADS``), held (``limit``) or the pools were set by hand. A part that
    shares its core with another process loses time slices; a GEMM split in two waits
    for its slower half at every call. Beside one
    single-threaded BLAS process (``bench_gpt.py --busy 1 --busy-only``), the parts on two
    threads with the pools at one made 75.2k / 16.8k / 5.66k tokens/s at GPT S / M / L,
    against 74.5k / 15.4k / 4.87k one after the other."""
    n = refresh(now)
    return available_cpus() if _state["by_policy"] and not _state["held"] else n


@contextmanager
def limit(blas: int | None = None, numba: int | None = None):
    """Fix the pools' thread counts inside the block (benchmarks, experiments); the policy
    resumes after it."""
    import numba as nb
    saved_blas, saved_nb = blas_threads(), numba_threads()
    _state["held"] += 1                                           # refresh() leaves them alone
    try:
        if blas is not None:
            for lib in _blas():
                lib.set_num_threads(max(1, min(blas, available_cpus())))
        if numba is not None:
            set_numba_threads(max(1, min(numba, available_cpus(), nb.config.NUMBA_NUM_THREADS)))
        yield
    finally:
        for lib in _blas():
            lib.set_num_threads(saved_blas)
        set_numba_threads(saved_nb)
        _state["held"] -= 1


@contextmanager
def policy():
    """Run the block under the policy (as the ops do); for benchmarks that compare settings."""
    refresh()
    yield


def pool():
    """The worker threads of ``in_parts``, made on first use (none survive a fork: a child
    makes its own)."""
    if _state["pool"] is None:
        from concurrent.futures import ThreadPoolExecutor
        _state["pool"] = ThreadPoolExecutor(max_workers=available_cpus(), thread_name_prefix="minipt-part")
    return _state["pool"]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _state.update(pool=None))


def in_parts(work, n: int, min_part: int = 1) -> None:
    """Call ``work(slice)`` on ``range(n)`` cut into as many parts as Numba has threads (the
    policy's count, or one set by hand) and parts of at least ``min_part`` items allow
    (handing a part to a thread costs tens of microseconds), each part on its own thread
    and the first on the caller's, with NumPy's BLAS held at one thread meanwhile: for many small products
    (attention's, per batch row and head) one thread per part beats two threads per
    product. ``work`` must let go of Python's lock (NumPy's matmul, ``nogil`` kernels) for
    the parts to overlap. An exception in a part is raised here, after all parts ended."""
    parts = part_count(n, min_part)
    if parts == 1:
        work(slice(0, n))
        return
    libs = _blas()
    saved = [lib.num_threads for lib in libs]
    for lib in libs:
        lib.set_num_threads(1)
    try:
        run_together([lambda sl=sl: work(sl) for sl in cut(n, parts)])
    finally:
        for lib, count in zip(libs, saved):
            lib.set_num_threads(count)


def part_count(n: int, min_part: int = 1) -> int:
    """How many parts ``in_parts`` cuts ``n`` items into: one per Numba thread, each of at
    least ``min_part`` items, at least one part."""
    return max(1, min(n // max(1, min_part), numba_threads()))


def cut(n: int, parts: int) -> list[slice]:
    """Items 0 .. n cut into ``parts`` consecutive slices, sizes differing by at most one."""
    edges = [n * i // parts for i in range(parts + 1)]
    return [slice(a, b) for a, b in zip(edges, edges[1:])]


TWO_THREADS_FROM = 1 << 18   # elements: a pass over many arrays goes to two threads from here on


def halves(items: list, size) -> list[list]:
    """``items`` dealt into two lists of about equal total ``size(item)``: largest first,
    alternately; for a pass over many arrays cut in two (``two_threads_for``)."""
    ranked = sorted(items, key=lambda item: -size(item))
    return [ranked[0::2], ranked[1::2]]


def two_threads_for(elements: int) -> bool:
    """Whether a pass over ``elements`` array elements (the replicas' gradient adds, zeroing
    the gradients, the optimiser's update) goes to two threads: when two cores are free
    and it holds at least ``TWO_THREADS_FROM``. Below that the hand-over cost more than
    the second thread saved: at GPT S the second half of the replicas' adds started
    63-71 us late and the wait after the first was another 84-94 us, while each half took
    77-89 us."""
    return elements >= TWO_THREADS_FROM and refresh() >= 2


def each_half(work, halves: list, elements: int) -> None:
    """``work(half)`` for each of ``halves`` (``halves``' two lists, ``elements`` in all): on
    two threads when ``two_threads_for(elements)``, else in turn on the caller's."""
    if two_threads_for(elements):
        run_together([lambda half=half: work(half) for half in halves])
    else:
        for half in halves:
            work(half)


def run_together(calls: list, on_thread=None) -> list:
    """The zero-argument ``calls`` at the same time: the first on the caller's thread, the
    others on the pool's (through ``on_thread(call)`` if given); their results in order.
    An exception in any call is raised after all of them ended."""
    futures = [pool().submit(on_thread or (lambda c: c()), call) for call in calls[1:]]
    try:
        first = calls[0]()
    finally:
        errors = [f.exception() for f in futures]
    for e in errors:
        if e is not None:
            raise e
    return [first] + [f.result() for f in futures]


def elementwise(kernel, *arrays, min_part: int):
    """out = a new array like the last of ``arrays`` (flat, C-contiguous), filled by
    ``kernel(*pieces, out_piece)`` over the same slice of each, in parts on threads
    (``in_parts``) of at least ``min_part`` elements."""
    import numpy as np
    out = np.empty_like(arrays[-1])
    if part_count(out.shape[0], min_part) == 1:                  # no closure, no slices
        kernel(*arrays, out)
    else:
        in_parts(lambda sl: kernel(*[a[sl] for a in arrays], out[sl]), out.shape[0], min_part)
    return out
