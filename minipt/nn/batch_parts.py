"""A Transformer stack's batch cut into parts that run side by side on threads: data
parallelism inside one process (synchronous data parallelism, as in Dean et al. 2012,
"Large Scale Distributed Deep Networks", with threads for workers and one copy of the
weights that all of them read).

Inside a stack no row of the batch sees another (attention mixes the positions of one
row), so the forward and backward of rows 0 .. B/2 and B/2 .. B can run apart. Part k
runs on its own replica of the stack: the same parameter arrays, its own gradient arrays
and forward caches. Each part has a thread of its own, with NumPy's BLAS and Numba held
at one thread. The backward then adds every replica's gradients into the stack's. The
embeddings, the loss head and the optimiser still see the whole batch, so the loss and
every gradient are the whole batch's up to the order of float additions (a weight's
gradient is the sum of the parts' products instead of one product).

Why: on 2 cores, two products side by side on one thread each ran faster than each
product split over OpenBLAS's two threads, and a step then waits for no thread hand-over
per op (``threads.in_parts`` costs 0.2 ms a call here). ``benchmarks/bench_gpt.py``,
``bench_bert.py`` and ``bench_t5.py`` measure it (``--batch-parts``).

``MINIPT_BATCH_PARTS=N`` (or ``set_batch_parts``) turns it on; 1, the default, leaves
every stack whole. The count of parts decides the bits, not the cores: the parts run side
by side on as many CPUs as the process may use (``threads.part_threads``; beside another
busy process too, each part's ops on one thread), or, on one CPU or with one thread set
by hand, one after the other, with the same numbers. A stack runs
whole when it cannot be cut: fewer rows than parts, a KV cache, dropout in training (the
parts would draw other masks than the whole batch), attention weights being recorded, or
per-layer masks with a batch axis.
"""
from __future__ import annotations

import copy
import os

import numpy as np

from ..kernels import threads

PARTS_ENV = "MINIPT_BATCH_PARTS"
_setting: dict[str, int | None] = {"parts": None}


def batch_parts() -> int:
    """Parts a stack's batch is cut into: ``set_batch_parts``'s count, else
    ``MINIPT_BATCH_PARTS``, else 1 (whole)."""
    if _setting["parts"] is not None:
        return _setting["parts"]
    raw = os.environ.get(PARTS_ENV, "1")
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{PARTS_ENV} must be a positive integer, got {raw!r}")
    return int(raw)


def set_batch_parts(n: int | None) -> None:
    """Cut every stack's batch into ``n`` parts from now on (None: back to the environment)."""
    if n is not None and (not isinstance(n, int) or n < 1):
        raise ValueError(f"batch parts must be a positive integer, got {n!r}")
    _setting["parts"] = n


BATCH_NDIM = {"mask": 3, "memory_mask": 3, "attn_bias": 4, "cross_bias": 4}   # the fewest axes with a batch axis


def batched(name: str, a: np.ndarray | None, B: int) -> bool:
    """True when the stack argument ``name`` has a batch axis of B > 1 rows to cut: a mask
    (B, T, S) or (B, 1, T, S), a bias (B, H, T, S); False for None and for shared ones
    (a mask (T, S), a bias (H, T, S), a leading axis of 1)."""
    return a is not None and a.ndim >= BATCH_NDIM[name] and a.shape[0] == B and B > 1


def rows(name: str, a: np.ndarray | None, sl: slice, B: int) -> np.ndarray | None:
    """The rows ``sl`` of the stack argument ``name`` if it has a batch axis, else ``a``
    itself (shared by all rows)."""
    return a[sl] if batched(name, a, B) else a


def join(parts: list[np.ndarray | None], was_batched: bool) -> np.ndarray | None:
    """The parts' gradients of one input: rows stacked for a batched input, summed for a
    shared one (a bias every row adds), None when no part has one."""
    if parts[0] is None:
        return None
    if was_batched:
        return np.concatenate(parts, axis=0)
    total = parts[0].copy()
    for g in parts[1:]:
        total += g
    return total


class Replicas:
    """Replicas 1 .. parts-1 of ``module``: copies that hold its very parameter arrays (an
    optimiser step moves all of them) with gradient arrays and caches of their own.
    ``keep_out``, the module's own table of replicas, is not copied into them. The arrays
    are listed once here, so that a step walks no module tree."""

    def __init__(self, module, parts: int, keep_out: dict):
        memo = {id(p): p for _, mod in module.named_modules() for p in mod.params.values()}
        memo[id(keep_out)] = {}
        self.modules = [copy.deepcopy(module, dict(memo)) for _ in range(parts - 1)]
        self.slots = [(mod.params, key, p) for _, mod in module.named_modules() for key, p in mod.params.items()]
        own = [g for _, g in module.named_grads()]                      # tied arrays once
        pairs = list(zip(own, *([g for _, g in m.named_grads()] for m in self.modules)))
        self.shares = threads.halves(pairs, lambda t: t[0].size)      # for two threads
        self.size = sum(g.size for _, *theirs in pairs for g in theirs)   # the replicas' gradient elements
        self.dirty = True                             # the copies' gradients are the module's, not zeros

    def current(self) -> bool:
        """False once ``module``'s parameter arrays were replaced (``to(dtype)``, a re-tie):
        the replicas then hold stale ones and are made again."""
        return all(d[key] is p for d, key, p in self.slots)

    def zero_grad(self) -> None:
        """Zero the replicas' gradients before their backward, unless ``add_gradients`` left
        them zero (a backward that failed half-way did not)."""
        if self.dirty:
            for share in self.shares:
                for _, *theirs in share:
                    for g in theirs:
                        g.fill(0)
        self.dirty = True

    def add_gradients(self) -> None:
        """Add each replica's gradients into ``module``'s and zero them while they are in
        cache, for the next backward; the two halves of the arrays on two threads when two
        cores are free and the replicas hold enough elements (``threads.each_half``).
        Each sum is added in the same order either way: the same bits."""
        def add(share):
            for own, *theirs in share:
                for g in theirs:
                    own += g
                    g.fill(0)
        threads.each_half(add, self.shares, self.size)
        self.dirty = False


def side_by_side(calls: list) -> list:
    """Run the zero-argument ``calls``, each on its own thread (the first on the caller's)
    with NumPy's BLAS and Numba at one thread, or one after the other when there is one
    thread for parts (``threads.part_threads``); returns their results in order. An
    exception in any call is raised after all of them ended."""
    free = threads.part_threads()                             # before holding the pools
    with threads.limit(blas=1, numba=1):
        if free < 2 or len(calls) == 1:
            return [call() for call in calls]
        return threads.run_together(calls, _on_one_thread)


def _on_one_thread(call):
    threads.set_numba_threads(1)                              # Numba's count is per thread
    return call()
