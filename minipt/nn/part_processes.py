"""A Transformer stack's batch parts 1 .. N-1 in worker processes, part 0 in the caller's:
synchronous data parallelism (Dean et al. 2012) with processes for workers, as PyTorch's
DistributedDataParallel runs on a CPU, here on one machine through shared memory.

Why processes and not threads (``batch_parts.Replicas``): the threads of one Python
process take turns at one lock (the GIL). A part's Python lines run between short
kernels, and after each kernel a thread waits for the other to let go of the lock; on
this 2-core VM a hand-over took 34 us (``benchmarks/bench_lock.py``) and at size S the
caller's thread waited about 0.9 ms a step. Two processes have a lock each. Whole steps
of bench_gpt/bert/t5's models against the threads (alternating processes): GPT S 0.91x
the time, BERT S 0.94x, T5 S 0.84x (4 pairs); at M 0.99-1.02x (3 pairs) and at L
0.99-1.00x (2 pairs): there the copies below cost about what the lock saved.

How a step goes (``batch_parts.ProcessReplicas``, for each stack: a worker holds a
replica of each, under a number):
- the stack is pickled to each worker once; the worker's replica holds views of two
  shared-memory files, one for the stack's parameters and one for the replica's gradients;
- before every forward the caller copies its parameters into the first file, so that an
  optimiser step, ``load_state_dict`` or any in-place change reaches the workers;
- a part's inputs go through a shared "inbox" file and its outputs come back through an
  "outbox" (``shared_files``: large arrays there, the rest pickled in the message);
  the worker copies its inputs out, because its forward caches keep them until backward;
- after the backward the caller adds each replica's gradients into the stack's and zeroes
  them, as the threads' replicas do: the same additions in the same order, so the same bits.

A worker is ``python -c "...main([FD])"`` on one end of a socket pair, with its
BLAS and Numba at one thread, started at the first forward in parts (its imports and its
kernels from Numba's cache: a first GPT S step took 0.8 s against 0.6 on threads, a GPT
L one 2.2 s against 0.9); it ignores Ctrl-C and ends when the caller's end closes. An
error raised in a worker comes back and is raised after part 0 has ended. A worker that
died, or whose step the caller left half-way (Ctrl-C, an error in part 0 before the
reply), is stopped; the next forward starts another.
"""
from __future__ import annotations

import atexit
import itertools
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from multiprocessing.connection import Connection

from ..kernels import threads
from .shared_files import SharedFile, on_file, pack, room, unpack

keys = itertools.count()           # a number for each stack sent to the workers
_workers: list["Worker"] = []      # worker k runs part k + 1
_dropped: set[int] = set()         # keys of stacks gone, for the workers to forget (``forget``)


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


def main(argv: list) -> None:
    """A worker's life: ``argv`` [FD], its end of the socket."""
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
        start = f"from minipt.nn.part_processes import main; main([{theirs.fileno()}])"
        self.proc = subprocess.Popen([sys.executable, "-c", start],
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
        self.busy = True

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

    def make_room(self, inbox: int, outbox: int) -> None:
        """Boxes of at least these sizes, made anew (twice the need) when too small."""
        if self.boxes is None or self.boxes[0].size < inbox or self.boxes[1].size < outbox:
            boxes = SharedFile(2 * inbox), SharedFile(2 * outbox)
            try:
                self.ask(("boxes", boxes[0].path, boxes[0].size, boxes[1].path, boxes[1].size))
            finally:
                for b in boxes:
                    b.unlink()
            self.boxes = boxes


def worker(k: int) -> Worker:
    """The worker of part k + 1, started if need be."""
    while len(_workers) <= k:
        _workers.append(None)
    known = _workers[k]
    if known is not None and (known.busy or known.proc.poll() is not None):
        stop(known)                                            # a reply never read (Ctrl-C), or dead
    if _workers[k] is None:
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
