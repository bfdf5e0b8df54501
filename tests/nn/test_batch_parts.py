"""A Transformer stack's batch in parts on threads (minipt.nn.batch_parts): the same
outputs and gradients as the whole batch, the same bits on one core or two, a whole
batch wherever the rows cannot be cut, and clear errors for a bad setting. The parts on
worker processes: tests/nn/test_part_processes.py."""
import time

import numpy as np
import pytest

from minipt.core.gradcheck import check_module
from minipt.kernels import threads
from minipt.nn import batch_parts
from minipt.nn.stack import TransformerStack

C, H, F, T, S = 8, 2, 16, 5, 4


@pytest.fixture
def parts():
    """set_batch_parts for the test, with parts 1 .. on threads; back to the environment's
    settings afterwards."""
    batch_parts.set_part_workers("threads")
    yield batch_parts.set_batch_parts
    batch_parts.set_batch_parts(None)
    batch_parts.set_part_workers(None)


def stack(n=2, dtype=np.float64, **kw):
    m = TransformerStack(n, d_model=C, n_heads=H, d_ff=F, rng=np.random.default_rng(0), dtype=dtype, **kw)
    r = np.random.default_rng(1)
    for _, p in m.named_parameters():
        p[...] = r.standard_normal(p.shape) * 0.3
    return m


def padding(B, n_keys):
    """(B, 1, 1, n_keys) key-padding mask: row b may see its first n_keys - b keys (at least 1)."""
    keep = np.arange(n_keys)[None, :] < np.maximum(1, n_keys - np.arange(B))[:, None]
    return keep[:, None, None, :]


CASES = {   # name -> (stack settings, forward arguments given B)
    "causal": (dict(), lambda r, B: dict(causal=True)),
    "key padding": (dict(prenorm=False), lambda r, B: dict(mask=padding(B, T))),
    "(B, T, S) mask": (dict(), lambda r, B: dict(mask=(r.random((B, T, T)) < 0.8) | np.eye(T, dtype=bool))),
    "shared bias": (dict(norm="rms", bias=False), lambda r, B: dict(attn_bias=r.standard_normal((H, T, T)))),
    "bias per row": (dict(), lambda r, B: dict(attn_bias=r.standard_normal((B, H, T, T)))),
    "decoder": (dict(cross_attention=True, final_norm=True),
                lambda r, B: dict(memory=r.standard_normal((B, S, C)), memory_mask=padding(B, S), causal=True,
                                  cross_bias=r.standard_normal((H, T, S)))),
    "shared layers": (dict(share="all"), lambda r, B: dict(causal=True)),
}


def run(m, x, kw, dy, start=0.0):
    """Forward and backward from gradients preset to ``start``: (y, BlockGrads, {name: grad})."""
    for _, g in m.named_grads():
        g[...] = start
    kw = dict(kw)
    memory = kw.pop("memory", None)
    y = m(x, memory, **kw)
    g = m.backward(dy)
    return y, g, {n: g.copy() for n, g in m.named_grads()}


@pytest.fixture(params=[1, 2], ids=["one core free", "two cores free"])
def free(request, monkeypatch):
    """The threads for parts: the parts run one after the other, or side by side."""
    monkeypatch.setattr(threads, "part_threads", lambda: request.param)
    return request.param


RUNS = {"threads, one core free": ("threads", 1), "threads, two cores free": ("threads", 2),
        "processes": ("processes", 2)}


@pytest.fixture(params=RUNS)
def runs(request, monkeypatch, parts):
    """Parts 1 .. on threads (one after the other, or side by side) or worker processes."""
    workers, free = RUNS[request.param]
    batch_parts.set_part_workers(workers)
    monkeypatch.setattr(threads, "part_threads", lambda: free)
    if workers == "processes":                      # as on a machine with two CPUs free
        monkeypatch.setattr(threads, "refresh", lambda now=None: 2)
    return workers


def ran_in_parts(m, n: int, workers: str) -> bool:
    """Whether stack ``m``'s last forward made the replicas of ``n`` parts it needs."""
    return m._replicas.get(("processes", n) if workers == "processes" else n) is not None


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("B,n", [(4, 2), (5, 2), (3, 3), (H, 2)])   # B = H: a (H, T, S) bias is shared
def test_parts_equal_the_whole_batch(parts, runs, case, B, n):
    settings, make = CASES[case]
    r = np.random.default_rng(3)
    m = stack(**settings)
    x, dy, kw = r.standard_normal((B, T, C)), r.standard_normal((B, T, C)), make(r, B)
    parts(1)
    y1, g1, p1 = run(m, x, kw, dy, start=1.0)       # the backward adds into gradients already there
    parts(n)
    y2, g2, p2 = run(m, x, kw, dy, start=1.0)
    assert ran_in_parts(m, n, runs)                  # the parts did run
    np.testing.assert_allclose(y2, y1, rtol=1e-12, atol=1e-12)
    for a, b in zip(g2, g1):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12)
    for name in p1:
        np.testing.assert_allclose(p2[name], p1[name], rtol=1e-11, atol=1e-12, err_msg=name)


def test_gradcheck_through_the_parts(parts, runs):
    parts(2)
    r = np.random.default_rng(4)
    m = stack(cross_attention=True)
    x, memory = r.standard_normal((3, T, C)), r.standard_normal((3, S, C))
    result = check_module(m, x, memory, select=lambda y: y, forward_kwargs=dict(causal=True, memory_mask=padding(3, S)),
                          max_checks=8)
    assert ran_in_parts(m, 2, runs)
    assert {a.kind for a in result.arrays} == {"input", "param"}
    assert result.passed, result


def test_same_bits_on_one_core_or_two(parts, monkeypatch):
    """The count of parts decides the numbers, not how many of them run at once."""
    parts(2)
    r = np.random.default_rng(5)
    m = stack(dtype=np.float32)
    x, dy = r.standard_normal((6, T, C)).astype(np.float32), r.standard_normal((6, T, C)).astype(np.float32)
    out, real = {}, batch_parts._on_one_thread
    for free in (1, 2):
        monkeypatch.setattr(threads, "part_threads", lambda free=free: free)
        ran = []
        monkeypatch.setattr(batch_parts, "_on_one_thread", lambda call: ran.append(1) or real(call))
        out[free] = run(m, x, {"causal": True}, dy)
        assert bool(ran) == (free == 2)             # one core: one after the other on the caller's thread
    y1, g1, p1 = out[1]
    y2, g2, p2 = out[2]
    assert np.array_equal(y1, y2) and np.array_equal(g1.dx, g2.dx)
    assert all(np.array_equal(p1[k], p2[k]) for k in p1)


def test_the_replicas_gradients_go_to_a_second_thread_only_when_large(parts, monkeypatch):
    """The adds of add_gradients run on two threads from TWO_THREADS_FROM elements on,
    on the caller's below it, with the same bits."""
    parts(2)
    r = np.random.default_rng(8)
    m = stack(dtype=np.float32)
    x, dy = r.standard_normal((6, T, C)).astype(np.float32), r.standard_normal((6, T, C)).astype(np.float32)
    monkeypatch.setattr(threads, "refresh", lambda now=None: 2)
    together, real = [], threads.run_together
    monkeypatch.setattr(threads, "run_together", lambda calls, on_thread=None: together.append(on_thread) or
                        real(calls, on_thread))
    out = {}
    for start in (0, threads.TWO_THREADS_FROM):
        monkeypatch.setattr(threads, "TWO_THREADS_FROM", start)
        together.clear()
        out[start] = run(m, x, {"causal": True}, dy)
        adds = [t for t in together if t is None]      # the parts go through _on_one_thread, the adds not
        assert len(together) - len(adds) == 2 and len(adds) == (1 if start == 0 else 0)
    assert m._replicas[2].size < threads.TWO_THREADS_FROM
    (y1, g1, p1), (y2, g2, p2) = out.values()
    assert np.array_equal(y1, y2) and np.array_equal(g1.dx, g2.dx)
    assert all(np.array_equal(p1[k], p2[k]) for k in p1)


def test_a_failed_backward_leaves_no_stale_gradients_in_the_replicas(parts, free, monkeypatch):
    """The replicas' gradients are zeroed as they are added in; a backward that fails after
    a replica accumulated some must not carry them into the next step."""
    parts(2)
    r = np.random.default_rng(8)
    m = stack()
    x, dy = r.standard_normal((4, T, C)), r.standard_normal((4, T, C))
    want = run(m, x, {"causal": True}, dy)[2]
    assert run(m, x, {"causal": True}, dy)[2].keys() == want.keys()
    assert all(np.array_equal(g, want[k]) for k, g in run(m, x, {"causal": True}, dy)[2].items())   # step after step
    real = TransformerStack._backward_blocks

    def fails_after_the_replica(self, dy):
        out = real(self, dy)
        if self is not m:
            raise FloatingPointError("the replica's backward failed")
        return out
    m(x, causal=True)
    monkeypatch.setattr(TransformerStack, "_backward_blocks", fails_after_the_replica)
    with pytest.raises(FloatingPointError, match="replica's backward failed"):
        m.backward(dy)
    monkeypatch.setattr(TransformerStack, "_backward_blocks", real)
    got = run(m, x, {"causal": True}, dy)[2]
    assert all(np.array_equal(got[k], want[k]) for k in want)


@pytest.mark.parametrize("why", ["dropout in training", "attention dropout", "fewer rows than parts", "kv cache",
                                 "recorded weights", "per-layer masks per row"])
def test_the_batch_stays_whole_where_it_cannot_be_cut(parts, why):
    parts(2)
    r = np.random.default_rng(6)
    m = stack(dropout=0.1 if why == "dropout in training" else 0.0,
              attn_dropout=0.1 if why == "attention dropout" else 0.0)
    B = 1 if why == "fewer rows than parts" else 4
    x = r.standard_normal((B, T, C))
    kw = {"causal": True}
    if why == "kv cache":
        from minipt.nn.kv_cache import KVCache
        kw["cache"] = KVCache(2)
    if why == "recorded weights":
        m.blocks[1].attn.record = True
    if why == "per-layer masks per row":
        kw["layer_masks"] = [None, (r.random((B, T, T)) < 0.5) | np.eye(T, dtype=bool)]
    m(x, **kw)
    assert m._replicas == {}
    if why == "dropout in training":                # in eval mode dropout draws nothing: then it is cut
        m.eval()
        m(x, **kw)
        assert 2 in m._replicas


def test_replicas_are_not_part_of_the_model(parts):
    parts(2)
    m = stack(dropout=0.1)
    m.eval()
    before = ([n for n, _ in m.named_modules()], [n for n, _ in m.generators()], m.num_parameters())
    x = np.random.default_rng(7).standard_normal((4, T, C))
    m(x, causal=True)
    m.backward(x)
    assert 2 in m._replicas
    assert ([n for n, _ in m.named_modules()], [n for n, _ in m.generators()], m.num_parameters()) == before
    assert sorted(m.state_dict()) == sorted(n for n, _ in m.named_parameters())


def test_replicas_follow_the_parameters(parts):
    """They hold the stack's arrays: an in-place update moves them, a new dtype rebuilds them."""
    r = np.random.default_rng(8)
    m = stack(dtype=np.float32)
    x = r.standard_normal((4, T, C))
    parts(2)
    m(x.astype(np.float32), causal=True)
    for _, p in m.named_parameters():               # what an optimiser step does
        p += np.float32(0.05)
    m.to(np.float64)
    y2 = m(x, causal=True)
    parts(1)
    np.testing.assert_allclose(y2, m(x, causal=True), rtol=1e-12)
    assert y2.dtype == np.float64


@pytest.mark.parametrize("failing", [1, 2], ids=["the caller's part", "the other thread's part"])
def test_an_error_in_a_part_is_raised_after_all_parts_end(parts, free, monkeypatch, failing):
    """Rows 0..1 run on the caller's thread, rows 1..3 on the other: whichever part fails,
    the other has ended when the error reaches the caller (one after the other, a failed
    first part stops there)."""
    parts(2)
    m = stack()
    x = np.random.default_rng(9).standard_normal((3, T, C))
    m(x, causal=True)                                # the replica exists
    ended = []
    real = TransformerStack._forward_blocks

    def blocks(self, x, memory, **kw):
        if x.shape[0] == failing:
            raise FloatingPointError(f"the part of {failing} rows failed")
        y = real(self, x, memory, **kw)
        time.sleep(0.2)                              # the part that does not fail ends last
        ended.append(x.shape[0])
        return y
    monkeypatch.setattr(TransformerStack, "_forward_blocks", blocks)
    with pytest.raises(FloatingPointError, match=f"the part of {failing} rows failed"):
        m(x, causal=True)
    assert ended == ([] if free == 1 and failing == 1 else [3 - failing])


def test_bad_settings_name_the_problem(parts, monkeypatch):
    for raw in ("0", "two", "-1"):
        monkeypatch.setenv(batch_parts.PARTS_ENV, raw)
        with pytest.raises(ValueError, match="MINIPT_BATCH_PARTS must be a positive integer"):
            batch_parts.batch_parts()
    monkeypatch.setenv(batch_parts.PARTS_ENV, "3")
    assert batch_parts.batch_parts() == 3
    parts(2)
    assert batch_parts.batch_parts() == 2           # the call wins over the environment
    for bad in (0, -2, 1.5, "2"):
        with pytest.raises(ValueError, match="batch parts must be a positive integer"):
            batch_parts.set_batch_parts(bad)


def test_cut_covers_every_row_once():
    assert threads.cut(5, 2) == [slice(0, 2), slice(2, 5)]
    for B in range(1, 9):
        for n in range(1, B + 1):
            rows = [i for sl in threads.cut(B, n) for i in range(B)[sl]]
            assert rows == list(range(B))


def _models():
    from minipt.models.decoder import gpt
    from minipt.models.encoder import bert
    from minipt.models.seq2seq import t5
    return {
        "gpt": lambda: (gpt.perturbed(gpt.GPT(gpt.GPTConfig.gpt2(**gpt.TINY), rng=np.random.default_rng(0),
                                              dtype=np.float64)), gpt.tiny_batch()),
        "bert": lambda: (bert.perturbed(bert.build(rng=np.random.default_rng(0), dtype=np.float64,
                                                   **{**bert.TINY, "dropout": 0.0})), bert.tiny_batch()),
        "t5": lambda: (t5.tiny_model(), t5.tiny_batch()),
    }


@pytest.mark.parametrize("name", ["gpt", "bert", "t5"])
def test_whole_models_give_the_same_loss_and_gradients(parts, runs, name):
    """The embeddings, heads and loss see the whole batch; only the stacks run in parts."""
    out = {}
    for n in (1, 2):
        parts(n)
        m, batch = _models()[name]()
        m.zero_grad()
        loss, _ = m(*batch)
        m.backward()
        out[n] = (float(loss), m.gradients())
        stacks = [mod for _, mod in m.named_modules() if isinstance(mod, TransformerStack)]
        assert stacks and all(ran_in_parts(s, 2, runs) == (n == 2) for s in stacks)
    assert out[2][0] == pytest.approx(out[1][0], rel=1e-13)
    for k, g in out[1][1].items():
        np.testing.assert_allclose(out[2][1][k], g, rtol=1e-10, atol=1e-13, err_msg=k)


def test_a_resume_keeps_the_parts_the_run_was_trained_with(parts, tmp_path):
    from minipt.core.checkpoint import load_checkpoint
    from minipt.data.batching import TokenStream
    from minipt.models.decoder.gpt import GPT, GPTConfig
    from minipt.train import TrainConfig, train
    data = np.tile(np.array([0, 1, 2, 3, 4, 3, 2, 1]), 60)
    stream = TokenStream(data[:400], data[400:], block_size=8, batch_size=4)
    gpt = lambda: GPT(GPTConfig.gpt2(vocab_size=5, block_size=8, n_layer=1, n_head=2, d_model=16),
                      rng=np.random.default_rng(0))
    config = lambda steps: TrainConfig(steps=steps, lr=3e-3, warmup=2, eval_every=0, progress=False,
                                       out_dir=str(tmp_path))
    parts(2)
    train(gpt(), stream.get_batch, config(4))
    assert load_checkpoint(tmp_path / "checkpoint.npz").extra["batch_parts"] == 2
    parts(1)
    with pytest.raises(ValueError, match="batch in 2 part.*MINIPT_BATCH_PARTS=2"):
        train(gpt(), stream.get_batch, config(6), resume=True)
    parts(2)
    assert train(gpt(), stream.get_batch, config(6), resume=True).step == 6
