"""The one rule for pre-training then fine-tuning (``experiments/protocol.py``): the
fine-tuning phase runs on a fresh warm-up + cosine schedule with a fresh optimiser state,
exactly as if it were a separate run started from the pre-trained weights; a resume
across the phase boundary equals the uninterrupted run."""
import numpy as np
import pytest

from minipt.experiments.protocol import Budget, pretrain_then_finetune
from minipt.models.decoder.gpt import GPT, GPTConfig
from minipt.optim.schedules import warmup_cosine
from minipt.train import TrainConfig, phase_lr, train

CFG = dict(vocab_size=7, block_size=6, n_layer=1, n_head=2, d_model=16)
SETTINGS = dict(lr=5e-3, min_lr=5e-4, warmup=2, eval_every=0, weight_decay=0.01)


def model():
    return GPT(GPTConfig.gpt2(dropout=0.0, **CFG), rng=np.random.default_rng(0))


def fixed(offset):
    """A get_batch that ignores its generator: the same batches whatever the data order."""
    x = (np.arange(24).reshape(4, 6) + offset) % 7
    return lambda split, rng: (x, (x + 1) % 7)


def test_each_phase_warms_up_and_decays_on_its_own():
    c = Budget(pretrain_steps=6, finetune_steps=4, batch_size=4).train_config(steps=10, **SETTINGS)
    assert c.restarts == (6,)
    lrs = [phase_lr(c, s) for s in range(10)]
    assert lrs[:6] == [warmup_cosine(s, 6, 2, 5e-3, 5e-4) for s in range(6)]
    assert lrs[6:] == [warmup_cosine(s, 4, 2, 5e-3, 5e-4) for s in range(4)]
    assert lrs[6] == 2.5e-3 and lrs[5] < lrs[7] == 5e-3                 # a new warm-up, not the old tail
    assert Budget(0, 4, 4).train_config(**SETTINGS).restarts == ()       # from scratch: one phase


def test_fine_tuning_equals_a_separate_run_from_the_pretrained_weights():
    """One call with the restart == pre-training, then a new run (new AdamW, new schedule)
    from its weights: bitwise. Without the fresh optimiser state (Adam's moments carried
    over) or the fresh schedule, they differ."""
    b = Budget(pretrain_steps=5, finetune_steps=4, batch_size=4)
    joined = model()
    pretrain_then_finetune(joined, fixed(0), fixed(3), b, SETTINGS)
    apart = model()
    train(apart, fixed(0), TrainConfig(steps=5, **SETTINGS, progress=False))
    train(apart, fixed(3), TrainConfig(steps=4, **SETTINGS, progress=False))
    for (name, p), (_, q) in zip(joined.named_parameters(), apart.named_parameters()):
        np.testing.assert_array_equal(p, q, err_msg=name)
    one_schedule = model()
    train(one_schedule, lambda split, rng: fixed(0)(split, rng), TrainConfig(steps=9, **SETTINGS, progress=False))
    assert not all(np.array_equal(p, q) for (_, p), (_, q) in
                   zip(joined.named_parameters(), one_schedule.named_parameters()))


def test_a_resume_across_the_boundary_equals_the_uninterrupted_run(tmp_path):
    b = Budget(pretrain_steps=4, finetune_steps=4, batch_size=4)
    whole = model()
    pretrain_then_finetune(whole, fixed(0), fixed(2), b, {**SETTINGS, "out_dir": str(tmp_path / "a")})
    part = model()
    cfg = b.train_config(**SETTINGS, progress=False, out_dir=str(tmp_path / "b"))
    train(part, fixed(0), TrainConfig(**{**cfg.__dict__, "steps": 4, "restarts": ()}))   # stops at the boundary
    resumed = model()
    pretrain_then_finetune(resumed, fixed(0), fixed(2), b, {**SETTINGS, "out_dir": str(tmp_path / "b")},
                           resume=True)
    for (name, p), (_, q) in zip(whole.named_parameters(), resumed.named_parameters()):
        np.testing.assert_array_equal(p, q, err_msg=name)


def test_bad_budgets_and_restarts_are_refused():
    with pytest.raises(ValueError, match="non-negative int"):
        Budget(-1, 4, 4)
    with pytest.raises(ValueError, match="at least one step"):
        Budget(0, 0, 4)
    with pytest.raises(ValueError, match="disagree"):
        Budget(2, 3, 4).train_config(steps=9)
    with pytest.raises(ValueError, match="restarts must be increasing"):
        TrainConfig(steps=5, warmup=1, restarts=(5,))
