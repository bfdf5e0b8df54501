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
    assert part.interrupted and part.step == 5 and part.val_step == 5     # evaluated once, at the step it stopped
    last = json.loads((tmp_path / "b" / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["step"] == 5 and last["val_loss"] == part.val_loss
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


def test_a_folder_holding_a_run_is_not_trained_into_again(tmp_path):
    train(model(), stream().get_batch, cfg(tmp_path, steps=3))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(FileExistsError, match="already holds a run.*resume=True"):
        train(model(), stream().get_batch, cfg(tmp_path, steps=3))
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.mark.parametrize("spoil", ["metrics", "model", "finished"])
def test_a_resume_that_fails_its_checks_writes_nothing(tmp_path, spoil):
    def ctrl_c(step, record):
        if step == 5:
            os.kill(os.getpid(), signal.SIGINT)
    train(model(), stream().get_batch, cfg(tmp_path), callback=ctrl_c)
    if spoil == "metrics":
        lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
        (tmp_path / "metrics.jsonl").write_text("\n".join(lines[:2] + ['{"step": 3, "loss": 1.'] + lines[3:]) + "\n")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    other = GPT(GPTConfig.gpt2(**{**CFG, "d_model": 8}), rng=np.random.default_rng(0)) if spoil == "model" else model()
    match = {"metrics": "metrics.jsonl is damaged: line 3", "model": "checkpoint.npz does not fit this model",
             "finished": "at step 5 of 5: the run is finished"}[spoil]
    with pytest.raises(ValueError, match=match):
        train(other, stream().get_batch, cfg(tmp_path, steps=5 if spoil == "finished" else 12), resume=True)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_tokens_per_second_leaves_evaluation_out(tmp_path, monkeypatch):
    import time

    import minipt.train as loop
    shown = []

    class Bar:
        timed_from = None

        def set_postfix(self, **kw):
            shown.append(kw)

        update = close = first_step_done = lambda self, *a: None
    monkeypatch.setattr(loop, "progress_bar", lambda *a, **kw: Bar())
    monkeypatch.setattr(loop, "evaluate", lambda *a, **kw: time.sleep(0.5) or 1.0)
    train(model(), stream().get_batch, cfg(tmp_path, steps=8, eval_every=4, progress=True))
    rate = [float(p["train_tok_s"].replace(",", "")) for p in shown]
    per_step = 4 * 8                                               # batch 4 x block 8 tokens
    assert min(rate[3], rate[7]) > 10 * per_step / 0.5, rate      # counting the 0.5 s evaluation gives < 64
