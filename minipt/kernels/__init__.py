"""Numba kernels: fused loops that beat their NumPy twins on the hot path.

An op asks ``kernels.get("layer_norm_forward")`` and gets the jitted function, or
``None`` when Numba is switched off (``MINIPT_NUMBA=0``) or no kernel of that name
exists; it then runs its plain NumPy twin (``*_numpy`` in ``minipt.ops``), which the
tests compare every kernel with. Models never call a kernel directly.

Nothing compiles at import: each kernel compiles on its first call, for the dtype it is
called with (float32 in training, float64 only in gradchecks), and Numba's disk cache
keeps it for later runs. ``on_compile`` tells the training loop that a first run is
compiling, so it can say so.
"""
from __future__ import annotations

import importlib
import os
import types
from contextlib import contextmanager

from . import threads

ENABLED = os.environ.get("MINIPT_NUMBA", "1") != "0"

GOMP_SPINCOUNT = "10000"   # OpenMP threads spin about 10,000 times (tens of microseconds), then sleep


def _gomp_loaded() -> bool:
    """True when a GNU OpenMP runtime is already in this process (torch brings one): it
    read its spin setting when it loaded, so setting ours now would change nothing."""
    try:
        with open("/proc/self/maps") as f:
            return "libgomp" in f.read()
    except OSError:
        return True


if ENABLED and "NUMBA_THREADING_LAYER" not in os.environ:
    # Numba's threads. Its OpenMP layer wakes its threads fastest: on this 2-core VM the
    # workqueue layer's sleeping threads made a fused-attention call at GPT M take 2.6 ms
    # (median) against 1.6 ms at best, while OpenMP's median was its best, 1.5 ms. But
    # OpenMP threads spin 300,000 times after each loop (about 9 ms of CPU after every
    # kernel, measured), and on 2 cores that spin fights OpenBLAS's threads in the next
    # matmul. With GOMP_SPINCOUNT=10000 (0.3-1.8 ms of CPU) a GPT M step took 113-155 ms
    # against 141-172 ms on workqueue (medians of 4 pairs of runs) and L 383-460 against
    # 424-457 ms (3 pairs; the sizes of benchmarks/bench_gpt.py). The spin count is read
    # when libgomp loads, so it is set here (and stays in the environment), before Numba
    # starts its threads; if a libgomp is already loaded (torch imported first) or Numba
    # finds no OpenMP, the workqueue layer runs instead. Set
    # NUMBA_THREADING_LAYER yourself to choose another (workqueue if your program forks
    # after training: GNU OpenMP is not fork-safe).
    import numba

    if "GOMP_SPINCOUNT" in os.environ or not _gomp_loaded():
        os.environ.setdefault("GOMP_SPINCOUNT", GOMP_SPINCOUNT)
        numba.config.THREADING_LAYER_PRIORITY = ["omp", "workqueue", "tbb"]
        numba.config.THREADING_LAYER = "default"
    else:
        numba.config.THREADING_LAYER = "workqueue"

# op-facing name -> "module:function" inside this package
KERNELS: dict[str, str] = {
    "embedding_backward": "embedding:embedding_backward",
    "linear_forward": "linear:linear_forward",
    "linear_backward": "linear:linear_backward",
    "layer_norm_forward": "layernorm:layer_norm_forward",
    "layer_norm_backward": "layernorm:layer_norm_backward",
    "rms_norm_forward": "layernorm:rms_norm_forward",
    "rms_norm_backward": "layernorm:rms_norm_backward",
    "gelu_tanh_forward": "gelu:gelu_tanh_forward",
    "gelu_tanh_backward": "gelu:gelu_tanh_backward",
    "relu_forward": "relu:relu_forward",
    "relu_backward": "relu:relu_backward",
    "gelu_forward": "vgelu:gelu_forward",              # gelu_erf's, float32 on 16 lanes with AVX-512
    "gelu_backward": "vgelu:gelu_backward",
    "softmax_backward": "softmax:softmax_backward",
    "cross_entropy_targets": "cross_entropy:cross_entropy_targets",
    "cross_entropy": "cross_entropy:cross_entropy",
    "cross_entropy_rows": "cross_entropy:cross_entropy_rows",
    "cross_entropy_rows_backward": "cross_entropy:cross_entropy_rows_backward",
    "blas_attention_forward": "attention:blas_attention_forward",
    "blas_attention_backward": "attention:blas_attention_backward",
    "word2vec_sgd": "word2vec:word2vec_sgd",
    "fused_attention_forward": "fused_attention:fused_attention_forward",
    "fused_attention_backward": "fused_attention:fused_attention_backward",
    "adam_update": "adam:adam_update",
    "adam_update_all": "adam:adam_update_all",
    "lstm_pointwise_forward": "lstm:lstm_pointwise_forward",
    "lstm_pointwise_backward": "lstm:lstm_pointwise_backward",
}


def _parallel_copy(py_func):
    """A copy of ``py_func`` named ``<name>_parallel``. Numba's on-disk cache is keyed by
    the function's name and code, not by ``parallel``: compiled from the same function
    object, a serial and a parallel version would share one cache entry and the serial
    one would load the parallel machine code (or the other way round)."""
    copy = types.FunctionType(py_func.__code__, py_func.__globals__, py_func.__name__ + "_parallel",
                              py_func.__defaults__, py_func.__closure__)
    copy.__qualname__ = py_func.__qualname__ + "_parallel"
    copy.__doc__ = py_func.__doc__
    return copy


def per_dtype(py_func, signature, parallel: bool = False, **options):
    """``py_func`` compiled for one dtype at a time: ``per_dtype(f, sig)(np.dtype("float32"))``
    is ``numba.njit(sig(numba.float32), **options)(f)``, made at the first request for that
    dtype and kept. A list of signatures given to ``njit`` would compile (or load) every
    dtype at import; this way a float32 run never touches the float64 code. ``signature``
    maps a Numba scalar type to the full signature (explicit, so that one compiled
    version serves every memory layout of the arrays). ``parallel=True`` compiles the
    ``_parallel_copy``. ``get.compiled`` maps each dtype compiled so far to its dispatcher."""
    import numba

    if parallel:
        py_func, options = _parallel_copy(py_func), {**options, "parallel": True}
    made = {}

    def get(dtype):
        fn = made.get(dtype)
        if fn is None:
            fn = made[dtype] = numba.njit(signature(numba.from_dtype(dtype)), **options)(py_func)
        return fn
    get.compiled = made
    return get


# What a first run costs, for the note it prints: `minipt train gpt` compiles its float32
# kernels in about this many seconds on one core (benchmarks/bench_first_run.py).
FIRST_COMPILE_SECONDS = 20


@contextmanager
def on_compile(callback):
    """Call ``callback()`` once, when Numba starts compiling inside the block: a kernel
    (or a variant of one) missing from Numba's disk cache, as on the first run on a
    machine. A kernel loaded from the cache, or already compiled in this process, calls
    nothing. Kernels off (``MINIPT_NUMBA=0``): nothing is watched."""
    if not ENABLED:
        yield
        return
    from numba.core import event

    class _First(event.Listener):
        seen = False

        def on_start(self, ev):
            if not self.seen:
                self.seen = True
                callback()

        def on_end(self, ev):
            pass

    with event.install_listener("numba:compile", _First()):
        yield


def get(name: str):
    """The Numba kernel registered as ``name``, or None when kernels are off. Every op
    asks here, so this is also where the thread policy (``threads.refresh``: threads
    for the free CPUs, re-read every half second) is kept current."""
    threads.refresh()
    if not ENABLED or name not in KERNELS:
        return None
    found = _found.get(name)
    if found is None:                             # the module imported once; its attribute read each time
        module, func = KERNELS[name].split(":")
        found = _found[name] = (importlib.import_module(f".{module}", __name__), func)
    return getattr(*found)


_found: dict = {}
