"""A Transformer stack's batch parts 1 .. N-1 in worker processes, part 0 in the caller's:
synchronous data parallelism (Dean et al. 2012) with processes for workers, as PyTorch's
DistributedDataParallel runs on a CPU, here on one machine through shared memory.

Why processes and not threads (``batch_parts.Replicas``): the threads of one Python
process take turns at one lock (the GIL). A part's Python lines run between short
kernels, and after each kernel a thread waits for the other to let go of the lock; on
this 2-core VM a hand-over took 34 us (``benchmarks/bench_lock.py``) and at size S the
caller's thread waited about 0.9 ms a step. Two processes have a lock each. Whole steps
against the threads (alternating processes, 4 pairs): GPT S 0.89x the time, BERT S 0.92x,
T5 S 0.88x; at M 0.98x and at L 1.00-1.01x (the copies below cost what the lock saved).

How a step goes, for each stack (keyed by a number; a worker holds a replica of each):
- the stack is pickled to each worker once; the worker's replica holds views of two
  shared-memory files, one for the stack's parameters and one for the replica's gradients;
- before every forward the caller copies its parameters into the first file, so that an
  optimiser step, ``load_state_dict`` or any in-place change reaches the workers;
- a part's inputs go through a shared "inbox" file and its outputs come back through an
  "outbox" (``shared_files``: large arrays there, the rest pickled in the message);
  the worker copies its inputs out, because its forward caches keep them until backward;
- after the backward the caller adds each replica's gradients into the stack's and zeroes
  them, as the threads' replicas do: the same additions in the same order, so the same bits.

A worker is ``python -m minipt.nn.part_processes FD`` on one end of a socket pair, with its
BLAS and Numba at one thread; it ignores Ctrl-C and ends when the caller's end closes. An
error raised in a worker comes back and is raised after part 0 has ended. A worker that
died, or whose step the caller left half-way (Ctrl-C, an error in part 0 before the
reply), is stopped; the next forward starts another.
"""
from __future__ import annotations

import atexit
import copy
import itertools
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
import weakref
from multiprocessing.connection import Connection

import numpy as np

from ..kernels import threads
from .shared_files import SharedFile, nbytes, on_file, pack, room, unpack

_keys = itertools.count()
_workers: list["Worker"] = []      # worker k runs part k + 1
_dropped: set[int] = set()         # keys of stacks gone, for the workers to forget (``forget``)


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


# -- the worker's side ------------------------------------------------------------------
def serve(conn: Connection) -> None:
    """Answer the caller's messages until its end of the socket closes."""
    stacks, boxes = {}, None
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        kind = msg[0]
        if kind == "drop":                                     # no answer: sent at any time
            stacks.pop(msg[1], None)
            continue
        try:
            if kind == "stack":
                _, key, blob, shapes, entries, param_path, grad_path = msg
                stack = pickle.loads(blob)
                p_views = on_file(SharedFile(room(shapes), param_path), shapes)
                g_views = on_file(SharedFile(room(shapes), grad_path), shapes)
                mods = dict(stack.named_modules())
                for name, k, i in entries:
                    mods[name].params[k], mods[name].grads[k] = p_views[i], g_views[i]
                stacks[key], out = stack, None
            elif kind == "boxes":
                boxes, out = (SharedFile(msg[2], msg[1]), SharedFile(msg[4], msg[3])), None
            elif kind == "forward":
                _, key, training, args = msg
                stack = stacks[key]
                if stack.training != training:
                    stack.train(training)
                x, memory, kw = unpack(args, boxes[0], copy_out=True)
                out = stack._forward_blocks(x, memory, **kw)
            elif kind == "backward":
                g = stacks[msg[1]]._backward_blocks(unpack(msg[2], boxes[0], copy_out=True))
                out = (g.dx, g.dmemory, g.dattn_bias, g.dcross_bias)
            else:
                raise ValueError(f"unknown message {kind!r}")
            if out is not None:
                boxes[1].top = 0
                out = pack(out, boxes[1])
            reply = ("ok", out, time.process_time())
        except Exception as e:                                 # noqa: BLE001 - sent back to be raised there
            reply = ("error", _picklable(e), time.process_time())
        conn.send(reply)


def _picklable(e: Exception) -> Exception:
    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:                                          # noqa: BLE001
        return RuntimeError(f"{type(e).__name__}: {e}")


def main(argv: list[str]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)               # Ctrl-C is the caller's to handle
    serve(Connection(int(argv[0])))


# -- the caller's side ------------------------------------------------------------------
class WorkerGone(RuntimeError):
    pass


class Worker:
    """One worker process and what the caller knows of it: its boxes and its stacks."""

    def __init__(self):
        import minipt
        mine, theirs = socket.socketpair()
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", NUMBA_NUM_THREADS="1", MINIPT_THREADS="1",
                   MINIPT_BATCH_PARTS="1")
        root = os.path.dirname(os.path.dirname(os.path.abspath(minipt.__file__)))
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])
        self.proc = subprocess.Popen([sys.executable, "-m", "minipt.nn.part_processes", str(theirs.fileno())],
                                     pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL)
        theirs.close()
        self.conn = Connection(mine.detach())
        self.boxes: tuple[SharedFile, SharedFile] | None = None
        self.stacks: set[int] = set()
        self.busy = False                                      # a message sent, its reply not read

    def send(self, msg) -> None:
        try:
            for key in self.stacks & _dropped:
                self.stacks.discard(key)
                self.conn.send(("drop", key))
            self.conn.send(msg)
        except OSError as e:
            raise self.gone() from e
        self.busy = msg[0] != "drop"

    def receive(self):
        try:
            kind, out, cpu = self.conn.recv()
        except (EOFError, OSError) as e:
            raise self.gone() from e
        self.busy = False
        threads.count_as_own(self.proc.pid, cpu)
        if kind == "error":
            raise out
        return out

    def ask(self, msg):
        self.send(msg)
        return self.receive()

    def gone(self) -> WorkerGone:
        code = self.proc.poll()
        stop(self)
        return WorkerGone(f"a batch part's worker process ended (exit code {code}); "
                          "the next forward starts a new one")

    def room(self, inbox: int, outbox: int) -> None:
        """Boxes of at least these sizes, made anew (twice the need) when too small."""
        if self.boxes is None or self.boxes[0].size < inbox or self.boxes[1].size < outbox:
            boxes = SharedFile(2 * inbox), SharedFile(2 * outbox)
            try:
                self.ask(("boxes", boxes[0].path, boxes[0].size, boxes[1].path, boxes[1].size))
            finally:
                for b in boxes:
                    b.unlink()
            self.boxes = boxes


class ProcessReplicas:
    """Parts 1 .. parts-1 of ``stack``'s batch on workers 0 .. parts-2: the caller's side.
    Pickling the stack here raises for one that cannot go to a process (a function in
    its settings); ``batch_parts.replicas`` then runs its parts on threads."""

    def __init__(self, stack, parts: int):
        self.parts, self.key = parts, next(_keys)
        self.arrays, self.entries = layout(stack)
        self.slots = [(mod.params, key, p) for _, mod in stack.named_modules() for key, p in mod.params.items()]
        grad_of = {id(mod.params[key]): mod.grads[key] for _, mod in reversed(list(stack.named_modules()))
                   for key in mod.params}                        # the first holder's, as named_grads
        self.grads = [grad_of[id(p)] for p in self.arrays]
        self.shapes = [(p.shape, p.dtype.str) for p in self.arrays]
        self.size = sum(p.size for p in self.arrays)
        replica = copy.copy(stack)
        replica._replicas, replica._split = {}, None
        self.blob = pickle.dumps(replica)
        self.on: dict[int, tuple] = {}                           # k -> (worker, copies, adds)
        self.dirty: set[int] = set()                             # workers whose gradients may not be zero
        weakref.finalize(self, forget, self.key)

    def current(self) -> bool:
        """False once the stack's parameter arrays were replaced: made again then."""
        return all(d[key] is p for d, key, p in self.slots)

    def _worker(self, k: int):
        """Worker k with this stack's replica on it, sent (again) if it is new."""
        w = worker(k)
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
        from .batch_parts import forward_part, part_args
        if callable(kw.get("layer_masks")):                      # a model's function: send its masks
            T = x.shape[1]
            kw = dict(kw, layer_masks=[stack._layer_mask(kw["layer_masks"], i, T, T) for i in range(stack.n_layers)])
        ons = [self._worker(k) for k in range(self.parts - 1)]
        for w, copies, _ in ons:
            threads.each_half(_copy_into, copies, self.size)
        for (w, _, _), sl in zip(ons, slices[1:]):
            args = part_args(x, memory, kw, sl)
            w.room(nbytes(args), nbytes(args))                   # outputs: no larger than inputs
            w.boxes[0].top = 0
            w.send(("forward", self.key, stack.training, pack(args, w.boxes[0])))
        y0 = self._here(ons, lambda: forward_part(stack, x, memory, kw, slices[0]))
        return [y0, *self._replies(ons)]

    def backward(self, stack, dy, slices: list) -> list:
        """Part k's backward on worker k - 1, part 0's here; the workers' gradients then
        added into the stack's (and zeroed there for the next backward)."""
        from .block import BlockGrads
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
                stop(w)
            raise

    @staticmethod
    def _replies(ons) -> list:
        """Each worker's reply (arrays on its outbox until its next message); the first
        error among them raised once all are read."""
        outs, error = [], None
        for w, _, _ in ons:
            try:
                out = w.receive()
                outs.append(unpack(out, w.boxes[1], copy_out=False))
            except WorkerGone:
                for other, _, _ in ons:
                    stop(other)
                raise
            except Exception as e:                               # noqa: BLE001 - raised below
                error = error or e
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


def worker(k: int) -> Worker:
    """The worker of part k + 1, started if need be."""
    while len(_workers) <= k:
        _workers.append(None)
    if _workers[k] is None or _workers[k].proc.poll() is not None:
        _workers[k] = Worker()
    return _workers[k]


def stop(w: Worker) -> None:
    """End a worker (its socket closed, the process killed if it does not end) and forget it."""
    for i, known in enumerate(_workers):
        if known is w:
            _workers[i] = None
    try:
        w.conn.close()                                         # it ends at its next read
    except OSError:
        pass
    try:
        w.proc.wait(timeout=0 if w.busy else 2)
    except subprocess.TimeoutExpired:
        w.proc.kill()                                          # busy with a step nobody will read
        w.proc.wait()


def forget(key: int) -> None:
    """A stack's replicas are gone: its workers drop theirs with the next message sent them
    (not now: this runs from the garbage collector, perhaps while a message is half sent)."""
    _dropped.add(key)


def stop_all() -> None:
    for w in list(_workers):
        if w is not None:
            stop(w)


def _forget_in_child() -> None:
    _workers.clear()                                           # a fork's child has no workers of its own


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
atexit.register(stop_all)


if __name__ == "__main__":                # run as -m: the messages' classes are the module's, not __main__'s
    from minipt.nn import part_processes
    part_processes.main(sys.argv[1:])
