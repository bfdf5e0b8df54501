"""Numba kernels: fused loops that beat their NumPy twins on the hot path.

An op asks ``kernels.get("layer_norm_forward")`` and gets the jitted function, or
``None`` when Numba is switched off (``MINIPT_NUMBA=0``) or no kernel of that name
exists; it then runs its plain NumPy twin (``*_numpy`` in ``minipt.ops``), which the
tests compare every kernel with. Models never call a kernel directly.
"""
from __future__ import annotations

import importlib
import os
import types

from . import threads

ENABLED = os.environ.get("MINIPT_NUMBA", "1") != "0"

if ENABLED and "NUMBA_THREADING_LAYER" not in os.environ:
    # Numba's default OpenMP layer keeps its threads spinning after each parallel loop;
    # on 2 cores they then fight OpenBLAS's threads between every matmul and kernel, and
    # a Transformer block ran 2x slower than with the NumPy twins. The workqueue layer
    # sleeps between loops (measured in benchmarks/bench_block.py). Set
    # NUMBA_THREADING_LAYER yourself to choose another.
    import numba

    numba.config.THREADING_LAYER = "workqueue"

# op-facing name -> "module:function" inside this package
KERNELS: dict[str, str] = {
    "embedding_backward": "embedding:embedding_backward",
    "layer_norm_forward": "layernorm:layer_norm_forward",
    "layer_norm_backward": "layernorm:layer_norm_backward",
    "gelu_tanh_forward": "gelu:gelu_tanh_forward",
    "gelu_tanh_backward": "gelu:gelu_tanh_backward",
    "gelu_forward": "gelu_erf:gelu_forward",
    "gelu_backward": "gelu_erf:gelu_backward",
    "softmax_backward": "softmax:softmax_backward",
    "attention_softmax": "attention:attention_softmax",
    "attention_softmax_backward": "attention:attention_softmax_backward",
    "word2vec_sgd": "word2vec:word2vec_sgd",
    "fused_attention_forward": "fused_attention:fused_attention_forward",
    "fused_attention_backward": "fused_attention:fused_attention_backward",
    "adam_update": "adam:adam_update",
    "lstm_pointwise_forward": "lstm:lstm_pointwise_forward",
    "lstm_pointwise_backward": "lstm:lstm_pointwise_backward",
}


# Below this many elements a kernel runs on one thread: waking a thread pool costs more
# than it saves on small arrays (measured in benchmarks/bench_kernels.py).
PARALLEL_MIN = 1 << 17


def serial_and_parallel(py_func, **options):
    """Compile one loop function twice: serial, and with ``prange`` spread over threads.
    ``options`` go to both ``numba.njit`` calls (e.g. ``fastmath``, ``error_model``).

    Numba's on-disk cache is keyed by the function's name and code, not by ``parallel``:
    compiled from the same function object, both versions would share one cache entry
    and the "serial" one would load the parallel machine code. The parallel version is
    therefore compiled from a copy named ``<name>_parallel``.
    """
    import numba

    copy = types.FunctionType(py_func.__code__, py_func.__globals__, py_func.__name__ + "_parallel",
                              py_func.__defaults__, py_func.__closure__)
    copy.__qualname__ = py_func.__qualname__ + "_parallel"
    copy.__doc__ = py_func.__doc__
    return (numba.njit(cache=True, **options)(py_func),
            numba.njit(cache=True, parallel=True, **options)(copy))


def by_size(serial, parallel, size: int):
    return parallel if size >= PARALLEL_MIN else serial


def get(name: str):
    """The Numba kernel registered as ``name``, or None when kernels are off. Every op
    asks here, so this is also where the thread policy (``threads.refresh``: threads
    for the free CPUs, re-read every half second) is kept current."""
    threads.refresh()
    if not ENABLED or name not in KERNELS:
        return None
    module, func = KERNELS[name].split(":")
    return getattr(importlib.import_module(f".{module}", __name__), func)
