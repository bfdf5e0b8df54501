"""The training loop: learning, resume == uninterrupted, Ctrl-C, NaN guard, logs."""
import json
import os
import signal

import numpy as np
import pytest

from minipt.core.checkpoint import load_checkpoint
from minipt.data.batching import TokenStream
from minipt.models.decoder.gpt import GPT, GPTConfig
from minipt.train import TrainConfig, train

CFG = dict(vocab_size=5, block_size=8, n_layer=1, n_head=2, d_model=16)


def stream():
    pattern = np.array([0, 1, 2, 3, 4, 3, 2, 1])                 # deterministic next token
    data = np.tile(pattern, 60)
    return TokenStream(data[:400], data[400:], block_size=8, batch_size=4)


def model(dropout=0.1):
    return GPT(GPTConfig.gpt2(dropout=dropout, **CFG), rng=np.random.default_rng(0))


def cfg(tmp_path, **kw):
    return TrainConfig(**{**dict(steps=12, lr=3e-3, warmup=2, eval_every=4, eval_batches=2,
                                 progress=False, out_dir=str(tmp_path)), **kw})


def test_loss_goes_down_and_logs_are_written(tmp_path):
    res = train(model(), stream().get_batch, cfg(tmp_path, steps=60, lr=1e-2, eval_every=20))
    first, last = res.history[0]["loss"], res.history[-1]["loss"]
    assert last < 0.5 * first and res.val_loss < 0.5 * first
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 60 and "val_loss" in json.loads(lines[19])
    assert (tmp_path / "loss.png").stat().st_size > 1000 and res.checkpoint.exists()


def test_interrupt_then_resume_equals_uninterrupted(tmp_path):
    full = train(model(), stream().get_batch, cfg(tmp_path / "a"))

    def ctrl_c(step, record):
        if step == 5:
            os.kill(os.getpid(), signal.SIGINT)                    # what Ctrl-C sends
    m = model()
    part = train(m, stream().get_batch, cfg(tmp_path / "b"), callback=ctrl_c)
    assert part.interrupted and part.step == 5
    assert load_checkpoint(tmp_path / "b" / "checkpoint.npz").extra["step"] == 5
    rest = train(model(), stream().get_batch, cfg(tmp_path / "b"), resume=True)
    assert [h["loss"] for h in rest.history] == [h["loss"] for h in full.history]
    a = load_checkpoint(tmp_path / "a" / "checkpoint.npz").params
    b = load_checkpoint(tmp_path / "b" / "checkpoint.npz").params
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_nan_guard_stops_with_the_step_and_keeps_the_last_good_checkpoint(tmp_path):
    m = model(dropout=0.0)

    def poison(step, record):
        if step == 3:
            m.h.blocks[0].mlp.c_fc.params["weight"][0, 0] = np.nan
    with pytest.raises(FloatingPointError, match="loss is nan at step 4.*last good checkpoint"):
        train(m, stream().get_batch, cfg(tmp_path, checkpoint_every=1), callback=poison)
    good = load_checkpoint(tmp_path / "checkpoint.npz")
    assert good.extra["step"] == 3 and all(np.all(np.isfinite(p)) for p in good.params.values())


def test_bad_config_and_data():
    with pytest.raises(ValueError, match="steps"):
        TrainConfig(steps=0)
    with pytest.raises(ValueError, match="warmup"):
        TrainConfig(steps=10, warmup=11)
    with pytest.raises(ValueError, match="block_size \\+ 1 = 9"):
        TokenStream(np.arange(5), np.arange(20), block_size=8, batch_size=2)
