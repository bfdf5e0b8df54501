"""A stack's batch parts 1 .. on worker processes (minipt.nn.part_processes): the same
bits as on threads, parameter changes reaching the workers, errors, a dead worker, Ctrl-C,
no shared file left behind, and a stack that cannot be pickled kept on threads. Outputs
and gradients against the whole batch, for every kind of stack argument:
tests/nn/test_batch_parts.py (its "processes" runs)."""
import gc
import os
import signal
import tempfile

import numpy as np
import pytest

from minipt.kernels import threads
from minipt.nn import batch_parts, part_processes, shared_files
from minipt.nn.stack import TransformerStack

C, H, F, T = 8, 2, 16, 5


@pytest.fixture
def on(monkeypatch):
    """Parts 1 .. of 2 on a worker process (two CPUs free for parts); the settings back after."""
    monkeypatch.setattr(threads, "part_threads", lambda: 2)
    monkeypatch.setattr(threads, "refresh", lambda now=None: 2)
    batch_parts.set_batch_parts(2)
    batch_parts.set_part_workers("processes")
    yield
    batch_parts.set_batch_parts(None)
    batch_parts.set_part_workers(None)


def make(dtype=np.float64, **kw):
    m = TransformerStack(2, d_model=C, n_heads=H, d_ff=F, rng=np.random.default_rng(0), dtype=dtype, **kw)
    r = np.random.default_rng(1)
    for _, p in m.named_parameters():
        p[...] = r.standard_normal(p.shape) * 0.3
    return m


def step(m, x, dy, **kw):
    """(y, dx, {name: gradient}) of one forward and backward from zero gradients."""
    m.zero_grad()
    y = m(x, **kw)
    dx = m.backward(dy).dx
    return y, dx, {n: g.copy() for n, g in m.named_grads()}


def data(B=6, dtype=np.float64, seed=2):
    r = np.random.default_rng(seed)
    return r.standard_normal((B, T, C)).astype(dtype), r.standard_normal((B, T, C)).astype(dtype)


def same(a, b, exact=True):
    check = np.array_equal if exact else lambda u, v: np.allclose(u, v, rtol=1e-12, atol=1e-12)
    return check(a[0], b[0]) and check(a[1], b[1]) and all(check(a[2][k], b[2][k]) for k in a[2])


def remote(m):
    return m._replicas.get(("processes", 2))


def test_the_parts_run_in_another_process_with_the_bits_of_threads(on):
    x, dy = data(dtype=np.float32)
    for kw in (dict(causal=True), dict(share="all"), dict(norm="rms", bias=False, prenorm=False)):
        m = make(np.float32, **{k: v for k, v in kw.items() if k != "causal"})
        got = step(m, x, dy, causal=True)
        w = remote(m).on[0][0]
        assert w.proc.pid != os.getpid() and w.proc.poll() is None
        assert threads._state["helpers"][w.proc.pid] > 0              # its CPU time counts as ours
        batch_parts.set_part_workers("threads")
        assert same(step(m, x, dy, causal=True), got), kw
        batch_parts.set_part_workers("processes")


def test_parameter_changes_reach_the_worker(on):
    m = make()
    x, dy = data()
    step(m, x, dy, causal=True)
    for _, p in m.named_parameters():                                  # an optimiser step
        p -= 0.01 * np.sign(p)
    m.load_state_dict({n: p * 1.5 for n, p in m.named_parameters()})
    got = step(m, x, dy, causal=True)
    batch_parts.set_batch_parts(1)
    assert same(step(m, x, dy, causal=True), got, exact=False)
    batch_parts.set_batch_parts(2)
    before = remote(m)
    m.to(np.float32)                                                   # new arrays: a new replica
    y32 = m(x.astype(np.float32), causal=True)
    assert remote(m) is not before and y32.dtype == np.float32


def test_an_error_in_the_worker_is_raised_here_and_the_worker_serves_on(on):
    m = make()
    x, dy = data()
    want = step(m, x, dy, causal=True)
    w = remote(m).on[0][0]
    with pytest.raises(KeyError):
        w.ask(("backward", -1, None))                                  # a stack the worker never saw
    assert w.proc.poll() is None and same(step(m, x, dy, causal=True), want)


def test_a_dead_worker_is_named_and_the_next_forward_starts_another(on):
    m = make()
    x, dy = data()
    want = step(m, x, dy, causal=True)
    m(x, causal=True)
    w = remote(m).on[0][0]
    os.kill(w.proc.pid, signal.SIGKILL)
    w.proc.wait()
    with pytest.raises(part_processes.WorkerGone, match="worker process ended"):
        m.backward(dy)
    assert same(step(m, x, dy, causal=True), want)
    assert remote(m).on[0][0] is not w


def test_a_worker_that_dies_during_its_part_is_named(on, monkeypatch):
    m = make()
    x, dy = data()
    want = step(m, x, dy, causal=True)
    w = remote(m).on[0][0]
    real = TransformerStack._forward_blocks

    def kill_first(self, *a, **kw):                                    # the caller's part, the worker's message unread
        os.kill(w.proc.pid, signal.SIGKILL)
        w.proc.wait()
        return real(self, *a, **kw)
    monkeypatch.setattr(TransformerStack, "_forward_blocks", kill_first)
    os.kill(w.proc.pid, signal.SIGSTOP)                                # it cannot answer before it dies
    with pytest.raises(part_processes.WorkerGone, match=r"exit code -9"):
        m(x, causal=True)
    monkeypatch.setattr(TransformerStack, "_forward_blocks", real)
    assert same(step(m, x, dy, causal=True), want)


def _ctrl_c(*args, **kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize("where", ["in the caller's part", "waiting for the worker"])
def test_ctrl_c_stops_the_worker_and_the_next_step_is_whole(on, where):
    m = make()
    x, dy = data()
    want = step(m, x, dy, causal=True)
    w = remote(m).on[0][0]
    owner, name = (TransformerStack, "_forward_blocks") if where == "in the caller's part" else \
        (part_processes.Worker, "receive")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(owner, name, _ctrl_c)
        with pytest.raises(KeyboardInterrupt):
            m(x, causal=True)
    assert w.proc.poll() is not None                                   # its reply would be read as the next one's
    assert same(step(m, x, dy, causal=True), want)


def test_a_worker_left_waiting_to_answer_is_not_used_again(on):
    m = make()
    x, dy = data()
    want = step(m, x, dy, causal=True)
    w = remote(m).on[0][0]
    w.send(("backward", -1, None))                                     # a reply nobody read
    assert same(step(m, x, dy, causal=True), want)
    assert w.proc.poll() is not None and remote(m).on[0][0] is not w


def test_a_failed_backward_leaves_no_stale_gradients_in_the_worker(on, monkeypatch):
    m = make()
    x, dy = data()
    want = step(m, x, dy, causal=True)
    m(x, causal=True)
    real = TransformerStack._backward_blocks
    monkeypatch.setattr(TransformerStack, "_backward_blocks", lambda self, dy: 1 / 0)   # part 0 fails
    with pytest.raises(ZeroDivisionError):
        m.backward(dy)
    monkeypatch.setattr(TransformerStack, "_backward_blocks", real)
    w = remote(m).on[0][0]
    assert w.proc.poll() is not None
    assert same(step(m, x, dy, causal=True), want)
    m(x, causal=True)                                                  # the worker's gradients half-way
    grads = remote(m).on[0][2]
    for half in grads:
        for _, theirs in half:
            theirs += 1.0
    remote(m).dirty.add(0)
    m.zero_grad()
    m.backward(dy)
    assert all(np.array_equal(g, want[2][n]) for n, g in m.named_grads())


def test_no_shared_file_is_left_behind(on, monkeypatch):
    made, real = [], tempfile.mkstemp
    monkeypatch.setattr(tempfile, "mkstemp", lambda *a, **kw: made.append(real(*a, **kw)) or made[-1])
    m = make()
    x, dy = data(B=40)                                                 # large enough for the boxes
    step(m, x, dy, causal=True)
    assert made and not any(os.path.exists(path) for _, path in made)


def test_a_stack_that_cannot_be_pickled_runs_on_threads(on):
    band = lambda i, T, S: np.abs(np.arange(T)[:, None] - np.arange(S)[None, :]) <= 1 + i
    m = make(layer_masks=band)
    x, dy = data()
    got = step(m, x, dy, causal=True)
    assert m._replicas[("processes", 2)] is None and m._replicas.get(2) is not None
    batch_parts.set_batch_parts(1)
    assert same(step(m, x, dy, causal=True), got, exact=False)


def test_layer_masks_given_as_a_function_per_call_go_as_masks(on):
    band = lambda i, T, S: np.abs(np.arange(T)[:, None] - np.arange(S)[None, :]) <= 1 + i
    m = make()
    x, dy = data()
    got = step(m, x, dy, causal=True, layer_masks=band)
    assert remote(m) is not None
    batch_parts.set_batch_parts(1)
    assert same(step(m, x, dy, causal=True, layer_masks=band), got, exact=False)


def test_a_stack_gone_is_dropped_by_the_workers(on):
    m = make()
    x, dy = data()
    step(m, x, dy, causal=True)
    key, w = remote(m).key, remote(m).on[0][0]
    assert key in w.stacks
    del m
    gc.collect()
    other = make()
    step(other, x, dy, causal=True)
    assert key not in w.stacks and remote(other).key in w.stacks


def test_messages_carry_large_arrays_through_the_shared_file():
    box = shared_files.SharedFile(1 << 20)
    box.unlink()
    big, small = np.arange(5000, dtype=np.float32).reshape(50, 100), np.arange(3.0)
    packed = shared_files.pack((big, {"m": small, "n": None}, [True]), box)
    assert isinstance(packed[0], shared_files._Ref) and packed[1]["m"] is small
    out = shared_files.unpack(packed, box, copy_out=True)
    assert np.array_equal(out[0], big) and out[0].dtype == np.float32 and out[1]["n"] is None
    assert out[0].base is None                                         # a copy, not the file
    tiny = shared_files.SharedFile(64)
    tiny.unlink()
    assert shared_files.pack(big, tiny) is big                       # no room: pickled instead


def test_beside_a_busy_program_the_parts_run_on_threads(on, monkeypatch):
    m = make()
    x, dy = data()
    want = step(m, x, dy, causal=True)
    assert remote(m) is not None
    monkeypatch.setattr(threads, "refresh", lambda now=None: 1)        # one CPU left free by others
    assert same(step(m, x, dy, causal=True), want)
    assert m._replicas.get(2) is not None                              # the threads took this step


def test_a_bad_worker_setting_names_the_problem(monkeypatch):
    monkeypatch.setenv(batch_parts.WORKERS_ENV, "fibres")
    with pytest.raises(ValueError, match="MINIPT_PART_WORKERS must be one of processes, threads"):
        batch_parts.part_workers()
    with pytest.raises(ValueError, match="part workers must be one of"):
        batch_parts.set_part_workers("fibres")
