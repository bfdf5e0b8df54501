"""A Transformer stack's batch cut into parts that run side by side: synchronous data
parallelism (Dean et al. 2012, "Large Scale Distributed Deep Networks") on one machine,
part 0 on the caller's thread and the others on worker processes
(``minipt.nn.part_processes``, the default) or on threads of this process, all reading one
copy of the weights.

Inside a stack no row of the batch sees another (attention mixes the positions of one
row), so the forward and backward of rows 0 .. B/2 and B/2 .. B can run apart. Part k
runs on its own replica of the stack: the same parameter values, its own gradient arrays
and forward caches. Each part has a thread or process of its own, with NumPy's BLAS and
Numba held at one thread. The backward then adds every replica's gradients into the stack's. The
embeddings, the loss head and the optimiser still see the whole batch, so the loss and
every gradient are the whole batch's up to the order of float additions (a weight's
gradient is the sum of the parts' products instead of one product).

Why: on 2 cores, two products side by side on one thread each ran faster than each
product split over OpenBLAS's two threads, and a step then waits for no thread hand-over
per op (``threads.in_parts`` costs 0.2 ms a call here). ``benchmarks/bench_gpt.py``,
``bench_bert.py`` and ``bench_t5.py`` measure it (``--batch-parts``).

``MINIPT_BATCH_PARTS=N`` (or ``set_batch_parts``) turns it on; 1, the default, leaves
every stack whole. ``MINIPT_PART_WORKERS`` (or ``set_part_workers``) says what runs parts
1 ..: ``processes`` (the default; each process has its own Python lock, where threads
take turns at one) or ``threads``. The count of parts decides the bits, not the cores or
the workers: the parts run side by side on as many CPUs as the process may use
(``threads.part_threads``; beside another busy process too, each part's ops on one
thread), or, on one CPU or with one thread set by hand, one after the other on this
thread, with the same numbers. A stack runs
whole when it cannot be cut: fewer rows than parts, a KV cache, dropout in training (the
parts would draw other masks than the whole batch), attention weights being recorded, or
per-layer masks with a batch axis.
"""
from __future__ import annotations

import copy
import os
import pickle
import weakref

import numpy as np

from ..kernels import threads
from . import part_processes
from .block import BlockGrads
from .shared_files import SharedFile, nbytes, on_file, pack, room, unpack

PARTS_ENV = "MINIPT_BATCH_PARTS"
WORKERS_ENV = "MINIPT_PART_WORKERS"
WORKERS = ("processes", "threads")
_setting: dict[str, int | str | None] = {"parts": None, "workers": None}


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


def part_workers() -> str:
    """What runs parts 1 ..: "processes" (``part_processes``, the default) or "threads"
    (``Replicas``): ``set_part_workers``'s choice, else ``MINIPT_PART_WORKERS``."""
    mode = _setting["workers"] or os.environ.get(WORKERS_ENV) or WORKERS[0]
    if mode not in WORKERS:
        raise ValueError(f"{WORKERS_ENV} must be one of {', '.join(WORKERS)}, got {mode!r}")
    return mode


def set_part_workers(mode: str | None) -> None:
    """Run parts 1 .. on "processes" or "threads" from now on (None: back to the environment)."""
    if mode is not None and mode not in WORKERS:
        raise ValueError(f"part workers must be one of {', '.join(WORKERS)}, got {mode!r}")
    _setting["workers"] = mode


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


def part_args(x, memory, kw: dict, sl: slice):
    """The arguments of ``_forward_blocks`` for the rows ``sl``: x, memory and every
    keyword argument with a batch axis cut."""
    B = x.shape[0]
    return x[sl], None if memory is None else memory[sl], {k: rows(k, v, sl, B) if k in BATCH_NDIM else v
                                                            for k, v in kw.items()}


def forward_part(stack, x, memory, kw: dict, sl: slice):
    """``stack._forward_blocks`` on the rows ``sl`` (``part_args``)."""
    xs, ms, kws = part_args(x, memory, kw, sl)
    return stack._forward_blocks(xs, ms, **kws)


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


class _Following:
    """What both kinds of replicas keep of ``module``: each parameter entry and its array,
    to tell when the arrays were replaced (``to(dtype)``, a re-tie)."""

    def __init__(self, module):
        self.slots = [(mod.params, key, p) for _, mod in module.named_modules() for key, p in mod.params.items()]

    def current(self) -> bool:
        """False once ``module``'s parameter arrays were replaced: the replicas then hold
        stale ones and are made again."""
        return all(d[key] is p for d, key, p in self.slots)


class Replicas(_Following):
    """Replicas 1 .. parts-1 of ``module``: copies that hold its very parameter arrays (an
    optimiser step moves all of them) with gradient arrays and caches of their own.
    ``keep_out``, the module's own table of replicas, is not copied into them. The arrays
    are listed once here, so that a step walks no module tree."""

    def __init__(self, module, parts: int, keep_out: dict):
        super().__init__(module)
        memo = {id(p): p for _, mod in module.named_modules() for p in mod.params.values()}
        memo[id(keep_out)] = {}
        self.modules = [copy.deepcopy(module, dict(memo)) for _ in range(parts - 1)]
        own = [g for _, g in module.named_grads()]                      # tied arrays once
        pairs = list(zip(own, *([g for _, g in m.named_grads()] for m in self.modules)))
        self.shares = threads.halves(pairs, lambda t: t[0].size)      # for two threads
        self.size = sum(g.size for _, *theirs in pairs for g in theirs)   # the replicas' gradient elements
        self.dirty = True                             # the copies' gradients are the module's, not zeros

    def zero_grad(self) -> None:
        """Zero the replicas' gradients before their backward, unless ``add_gradients`` left
        them zero (a backward that failed half-way did not)."""
        if self.dirty:
            for share in self.shares:
                for _, *theirs in share:
                    for g in theirs:
                        g.fill(0)
        self.dirty = True

    def forward(self, stack, x, memory, kw: dict, slices: list) -> list:
        """Each part's ``_forward_blocks``: part 0 on ``stack``, part k on replica k."""
        return side_by_side([lambda m=m, sl=sl: forward_part(m, x, memory, kw, sl)
                             for m, sl in zip([stack, *self.modules], slices)])

    def backward(self, stack, dy, slices: list) -> list:
        """Each part's ``_backward_blocks``; the replicas' gradients then added into the stack's."""
        self.zero_grad()
        grads = side_by_side([lambda m=m, sl=sl: m._backward_blocks(dy[sl])
                              for m, sl in zip([stack, *self.modules], slices)])
        self.add_gradients()
        return grads

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


def replicas(stack, parts: int):
    """What runs parts 1 .. parts-1 of ``stack``'s batch, made on first use (and again once
    the stack's parameter arrays were replaced), kept in ``stack._replicas``: workers
    (``ProcessReplicas`` on ``part_processes``, under the key ("processes", parts)) when
    ``part_workers`` says so, two or more CPUs are there for parts and the stack can be
    pickled; else ``Replicas`` on threads (under the key ``parts``), in the stack's mode.
    Workers need two CPUs free of other programs' work (``threads.refresh``): beside one
    busy single-threaded process, GPT S trained at 65-71k tokens/s with a worker against
    77k on threads, GPT M at 14.4-15.1k against 16.4k (``bench_gpt.py --busy 1``): three
    processes shared two CPUs where the threads' turns at Python's lock left room."""
    if part_workers() == "processes" and threads.part_threads() >= 2 and threads.refresh() >= 2:
        key = ("processes", parts)
        reps = stack._replicas.get(key, ())
        if reps == () or reps is not None and not reps.current():
            try:
                reps = stack._replicas[key] = ProcessReplicas(stack, parts)
            except (pickle.PicklingError, TypeError, AttributeError):    # a function in its settings
                reps = stack._replicas[key] = None
        if reps is not None:
            return reps
    reps = stack._replicas.get(parts)
    if reps is None or not reps.current():
        reps = stack._replicas[parts] = Replicas(stack, parts, stack._replicas)
    for rep in reps.modules:
        if rep.training != stack.training:
            rep.train(stack.training)
    return reps


def layout(stack):
    """The stack's distinct parameter arrays in order, and (module name, key, index into
    them) for every parameter entry: a tied array is one array, reached by every entry."""
    index: dict[int, int] = {}
    arrays, entries = [], []
    for name, mod in stack.named_modules():
        for key, p in mod.params.items():
            if id(p) not in index:
                index[id(p)] = len(arrays)
                arrays.append(p)
            entries.append((name, key, index[id(p)]))
    return arrays, entries


class ProcessReplicas(_Following):
    """Parts 1 .. parts-1 of ``stack``'s batch on workers 0 .. parts-2: the caller's side.
    Pickling the stack here raises for one that cannot go to a process (a function in
    its settings); ``batch_parts.replicas`` then runs its parts on threads."""

    def __init__(self, stack, parts: int):
        super().__init__(stack)
        self.parts, self.key = parts, next(part_processes.keys)
        self.arrays, self.entries = layout(stack)
        grad_of = {id(mod.params[key]): mod.grads[key] for _, mod in stack.named_modules()
                   for key in mod.params}                        # a tied array has one gradient (Module.tie)
        self.grads = [grad_of[id(p)] for p in self.arrays]
        self.shapes = [(p.shape, p.dtype.str) for p in self.arrays]
        self.size = sum(p.size for p in self.arrays)
        replica = copy.copy(stack)
        replica._replicas, replica._split = {}, None
        self.blob = pickle.dumps(replica)
        self.on: dict[int, tuple] = {}                           # k -> (worker, copies, adds)
        self.dirty: set[int] = set()                             # workers whose gradients may not be zero
        weakref.finalize(self, part_processes.forget, self.key)

    def _worker(self, k: int):
        """Worker k with this stack's replica on it, sent (again) if it is new."""
        w = part_processes.worker(k)
        if k not in self.on or self.on[k][0] is not w:
            files = SharedFile(room(self.shapes)), SharedFile(room(self.shapes))
            try:
                w.ask(("stack", self.key, self.blob, self.shapes, self.entries, files[0].path, files[1].path))
            finally:
                for f in files:
                    f.unlink()
            w.stacks.add(self.key)
            params, grads = (on_file(f, self.shapes) for f in files)
            size = lambda pair: pair[0].size
            self.on[k] = (w, threads.halves(list(zip(self.arrays, params)), size),
                          threads.halves(list(zip(self.grads, grads)), size))
            self.dirty.discard(k)
        return self.on[k]

    def forward(self, stack, x, memory, kw: dict, slices: list) -> list:
        """Parameters copied to the workers, part k sent to worker k - 1, part 0 run here."""
        if callable(kw.get("layer_masks")):                      # a model's function: send its masks
            T = x.shape[1]
            kw = dict(kw, layer_masks=[stack._layer_mask(kw["layer_masks"], i, T, T) for i in range(stack.n_layers)])
        ons = [self._worker(k) for k in range(self.parts - 1)]
        for w, copies, _ in ons:
            threads.each_half(_copy_into, copies, self.size)
        for (w, _, _), sl in zip(ons, slices[1:]):
            args = part_args(x, memory, kw, sl)
            w.make_room(nbytes(args), nbytes(args))              # outputs: no larger than inputs
            w.boxes[0].top = 0
            w.send(("forward", self.key, stack.training, pack(args, w.boxes[0])))
        y0 = self._here(ons, lambda: forward_part(stack, x, memory, kw, slices[0]))
        return [y0, *self._replies(ons)]

    def backward(self, stack, dy, slices: list) -> list:
        """Part k's backward on worker k - 1, part 0's here; the workers' gradients then
        added into the stack's (and zeroed there for the next backward)."""
        ons = [self.on[k] for k in range(self.parts - 1)]        # the forward's workers
        for k, (w, _, adds) in enumerate(ons):
            if k in self.dirty:                                  # a backward that failed half-way
                for half in adds:
                    for _, theirs in half:
                        theirs.fill(0)
            w.boxes[0].top = 0
            w.send(("backward", self.key, pack(dy[slices[k + 1]], w.boxes[0])))
            self.dirty.add(k)
        g0 = self._here(ons, lambda: stack._backward_blocks(dy[slices[0]]))
        outs = self._replies(ons)
        for k, (_, _, adds) in enumerate(ons):
            threads.each_half(_add_and_zero, adds, self.size)
            self.dirty.discard(k)
        return [g0, *(BlockGrads(*out) for out in outs)]

    @staticmethod
    def _here(ons, call):
        """Part 0 on this thread with the pools at one thread; if it does not end (an
        error, Ctrl-C) the workers' replies will not be read, so the workers are stopped."""
        try:
            with threads.limit(blas=1, numba=1):
                return call()
        except BaseException:
            for w, _, _ in ons:
                part_processes.stop(w)
            raise

    @staticmethod
    def _replies(ons) -> list:
        """Each worker's reply (arrays on its outbox until its next message); the first
        error among them raised once all are read."""
        outs, error = [], None
        for w, _, _ in ons:
            try:
                outs.append(unpack(w.receive(), w.boxes[1], copy_out=False))
            except Exception as e:                               # noqa: BLE001 - raised below
                if isinstance(e, part_processes.WorkerGone):
                    raise
                error = error or e
            except BaseException:                                # Ctrl-C: the other replies go unread
                for other, _, _ in ons:
                    part_processes.stop(other)
                raise
        if error is not None:
            raise error
        return outs


def _copy_into(pairs) -> None:
    for mine, theirs in pairs:
        np.copyto(theirs, mine)


def _add_and_zero(pairs) -> None:
    for mine, theirs in pairs:
        mine += theirs
        theirs.fill(0)


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
