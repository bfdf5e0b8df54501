"""What the training loop promises, seen from outside: the schedule as logged and as the
optimiser applies it, clipping (only above the threshold), gradient accumulation that
equals one big batch (a tied weight included), evaluation in eval mode on the validation
split. Gradchecks cannot see any of this: each op is right, the glue is what is tested.

The optimiser is observed through a spy subclass of AdamW put in ``minipt.train``'s
namespace: at every ``step()`` it records the learning rate it applies and a copy of the
gradients it is given. Expected values come from formulas written here, not from
``minipt.optim.schedules``."""
import math

import numpy as np
import pytest

import minipt.train as train_module
from minipt.data.batching import TokenStream
from minipt.models.decoder.gpt import GPT, GPTConfig
from minipt.optim import AdamW
from minipt.train import TrainConfig, train

CFG = dict(vocab_size=7, block_size=8, n_layer=1, n_head=2, d_model=16)


class SpyAdamW(AdamW):
    calls: list = []

    def step(self) -> None:
        grads = {name: g.copy() for name, _, g in self.entries}
        norm = math.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads.values()))
        SpyAdamW.calls.append({"lr": self.lr, "grads": grads, "norm": norm})
        super().step()


@pytest.fixture
def spy(monkeypatch):
    SpyAdamW.calls = []
    monkeypatch.setattr(train_module, "AdamW", SpyAdamW)
    return SpyAdamW.calls


def gpt(dropout=0.0, dtype=np.float64, **kw):
    return GPT(GPTConfig.gpt2(dropout=dropout, **{**CFG, **kw}), rng=np.random.default_rng(0), dtype=dtype)


def stream(batch_size=4):
    rng = np.random.default_rng(1)
    return TokenStream(rng.integers(0, 7, 300), rng.integers(0, 7, 120), block_size=8, batch_size=batch_size)


def config(**kw):
    return TrainConfig(**{**dict(steps=10, lr=1e-2, min_lr=1e-3, warmup=3, eval_every=0, grad_clip=None,
                                 weight_decay=0.0, progress=False), **kw})


def expected_lr(s, total, warmup, lr, min_lr):
    """GPT-1's schedule: linear warm-up to lr over ``warmup`` steps, then half a cosine to
    min_lr at ``total`` (0-based step s; step 0 already moves)."""
    if s < warmup:
        return lr * (s + 1) / warmup
    return min_lr + (lr - min_lr) * 0.5 * (1 + math.cos(math.pi * (s - warmup) / (total - warmup)))


# -- the schedule ---------------------------------------------------------------------------
@pytest.mark.parametrize("steps,warmup", [(10, 3), (7, 0), (6, 6)])
def test_lr_follows_warmup_then_cosine_as_logged_and_as_applied(spy, steps, warmup):
    res = train(gpt(), stream().get_batch, config(steps=steps, warmup=warmup))
    want = [expected_lr(s, steps, warmup, 1e-2, 1e-3) for s in range(steps)]
    np.testing.assert_allclose([h["lr"] for h in res.history], want, rtol=1e-12)
    np.testing.assert_allclose([c["lr"] for c in spy], want, rtol=1e-12)
    assert len(spy) == steps


def test_first_adam_step_moves_each_weight_by_the_scheduled_lr():
    """Adam's first update is lr * g / (|g| + eps): every weight with a gradient moves by
    lr (here lr / warmup, the first warm-up step), whatever the optimiser spy sees."""
    m = gpt()
    before = {k: p.copy() for k, p in m.named_parameters()}
    after = {}

    def keep_first(step, record):
        if step == 1:
            after.update({k: p.copy() for k, p in m.named_parameters()})
    train(m, stream().get_batch, config(steps=4, warmup=4, lr=8e-3), callback=keep_first)
    name = "h.blocks.0.mlp.c_fc.weight"
    step = np.abs(after[name] - before[name])
    moved = step[step > 0]
    np.testing.assert_allclose(np.median(moved), 2e-3, rtol=1e-3)        # lr * 1 / 4


# -- clipping ---------------------------------------------------------------------------------
def test_clipping_scales_to_the_threshold_and_logs_the_norm_before(spy):
    res = train(gpt(), stream().get_batch, config(steps=5, grad_clip=1e-3))
    logged = [h["grad_norm"] for h in res.history]
    assert min(logged) > 1e-2                                            # every step is above the threshold
    np.testing.assert_allclose([c["norm"] for c in spy], 1e-3, rtol=1e-4)  # ... and was clipped to it


def test_no_clipping_below_the_threshold_or_when_off(spy):
    res = train(gpt(), stream().get_batch, config(steps=5, grad_clip=1e6))
    np.testing.assert_allclose([c["norm"] for c in spy], [h["grad_norm"] for h in res.history], rtol=1e-12)
    SpyAdamW.calls.clear()
    res = train(gpt(), stream().get_batch, config(steps=5, grad_clip=None))
    np.testing.assert_allclose([c["norm"] for c in spy], [h["grad_norm"] for h in res.history], rtol=1e-12)


def test_clipping_keeps_the_direction(spy):
    """The clipped gradient is the unclipped one times one number."""
    train(gpt(), stream().get_batch, config(steps=1, warmup=0, grad_clip=None))
    free = SpyAdamW.calls.pop()["grads"]
    train(gpt(), stream().get_batch, config(steps=1, warmup=0, grad_clip=1e-3))
    clipped = SpyAdamW.calls.pop()["grads"]
    ratios = np.concatenate([(clipped[k][free[k] != 0] / free[k][free[k] != 0]).ravel() for k in free])
    np.testing.assert_allclose(ratios, ratios[0], rtol=1e-9)
    assert ratios[0] < 1


# -- gradient accumulation ----------------------------------------------------------------------
class Rows:
    """Serves fixed rows in order: ``size`` rows per call, so k calls of b rows hold the
    same examples as one call of k * b rows."""

    def __init__(self, size: int, n: int = 96, T: int = 8, seed: int = 2):
        r = np.random.default_rng(seed)
        self.x, self.y = r.integers(0, 7, (n, T)), r.integers(0, 7, (n, T))
        self.size, self.at = size, 0

    def get_batch(self, split, rng):
        i = self.at
        self.at = (self.at + self.size) % len(self.x)
        return self.x[i:i + self.size], self.y[i:i + self.size]


@pytest.mark.parametrize("tied", [True, False])
def test_k_micro_batches_equal_one_big_batch(spy, tied):
    """accum_steps=4 on batches of 2 rows = accum_steps=1 on batches of 8 rows: the same
    gradients at every optimiser step, loss, norm and parameters. With a tied output
    layer this also catches a gradient that is assigned instead of added."""
    k, b, steps = 4, 2, 3
    m_small, m_big = gpt(tie_embeddings=tied), gpt(tie_embeddings=tied)
    small = train(m_small, Rows(b).get_batch, config(steps=steps, accum_steps=k))
    grads_small = [c["grads"] for c in spy]
    SpyAdamW.calls.clear()
    big = train(m_big, Rows(k * b).get_batch, config(steps=steps, accum_steps=1))
    grads_big = [c["grads"] for c in spy]
    assert len(grads_small) == len(grads_big) == steps
    for gs, gb in zip(grads_small, grads_big):
        for name in gb:
            np.testing.assert_allclose(gs[name], gb[name], rtol=1e-9, atol=1e-13, err_msg=name)
    for key in ("loss", "grad_norm"):
        np.testing.assert_allclose([h[key] for h in small.history], [h[key] for h in big.history], rtol=1e-9)
    for (name, p), (_, q) in zip(m_small.named_parameters(), m_big.named_parameters()):
        np.testing.assert_allclose(p, q, rtol=1e-9, atol=1e-12, err_msg=name)


def test_accumulated_gradient_is_the_mean_not_the_sum(spy):
    """The gradient of k micro-batches of the same rows equals the gradient of one of them."""
    class Same(Rows):
        def get_batch(self, split, rng):
            return self.x[:2], self.y[:2]
    train(gpt(), Same(2).get_batch, config(steps=1, warmup=0, accum_steps=1))
    one = SpyAdamW.calls.pop()["grads"]
    train(gpt(), Same(2).get_batch, config(steps=1, warmup=0, accum_steps=3))
    three = SpyAdamW.calls.pop()["grads"]
    for name in one:
        np.testing.assert_allclose(three[name], one[name], rtol=1e-9, atol=1e-13, err_msg=name)


# -- evaluation -----------------------------------------------------------------------------------
class Recorder:
    """A TokenStream that notes, for each batch served, the split and the model's mode."""

    def __init__(self, model, s):
        self.model, self.s, self.calls = model, s, []

    def get_batch(self, split, rng):
        self.calls.append((split, self.model.training))
        return self.s.get_batch(split, rng)


def test_evaluation_runs_in_eval_mode_on_the_validation_split_and_training_resumes_in_train_mode():
    m = gpt(dropout=0.3)
    rec = Recorder(m, stream())
    train(m, rec.get_batch, config(steps=6, eval_every=3, eval_batches=2))
    assert rec.calls == ([("train", True)] * 3 + [("val", False)] * 2) * 2
    assert m.training


def test_logged_val_loss_is_the_eval_mode_loss_on_validation_batches():
    """Recomputed here: dropout off, validation split, ``eval_batches`` batches drawn with
    the seed + 1 generator. A train-mode (dropout 0.5) or train-split evaluation differs."""
    s = stream()
    m = gpt(dropout=0.5)
    res = train(m, s.get_batch, config(steps=4, eval_every=4, eval_batches=3, seed=5))
    m.eval()
    rng = np.random.default_rng(6)
    want = np.mean([float(m(*s.get_batch("val", rng))[0]) for _ in range(3)])
    assert res.history[-1]["val_loss"] == pytest.approx(want, rel=1e-12)
    assert res.val_loss == pytest.approx(want, rel=1e-12)
    train_rng = np.random.default_rng(6)
    on_train = np.mean([float(m(*s.get_batch("train", train_rng))[0]) for _ in range(3)])
    assert abs(on_train - want) > 1e-6                   # the two splits are told apart


def test_evaluation_does_not_change_the_training_run():
    """Same seed, evaluations on or off: the same training losses (evaluation draws from
    its own generator and, in eval mode, no dropout)."""
    with_eval = train(gpt(dropout=0.2), stream().get_batch, config(steps=6, eval_every=2, eval_batches=2))
    without = train(gpt(dropout=0.2), stream().get_batch, config(steps=6, eval_every=0))
    assert [h["loss"] for h in with_eval.history] == [h["loss"] for h in without.history]
    assert [h["step"] for h in with_eval.history if "val_loss" in h] == [2, 4, 6]
