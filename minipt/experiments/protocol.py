"""The one rule for pre-training followed by fine-tuning, for every study and every preset
that pre-trains (``minipt train t5``, ``bart``, ``mass``; the seq2seq experiments).

**Equal compute** is stated here, once: every arm that pre-trains gets the same number of
pre-training steps at the same batch size, so the same number of pre-training examples
(T5's measure, Raffel et al. 2020, Sec. 3.3: "the same number of steps"; the examples
are pieces packed to one length where the study packs, so the same input tokens too).
**Every arm**, pre-trained or from scratch, then gets the same number of fine-tuning
steps on its own fresh schedule (linear warm-up, then cosine decay to ``min_lr``) with a
fresh optimiser state (Adam's moments at zero), never the decayed tail of one schedule
that spans both phases. The training loop does the restart (``TrainConfig.restarts``);
``Budget`` says where, and ``pretrain_then_finetune`` runs the two phases.

This module imports only the training loop and checkpoints, so recipes may use it
without an import cycle.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..core.checkpoint import load_checkpoint
from ..train import TrainConfig, TrainResult, train

GetBatch = Callable[[str, np.random.Generator], tuple]


@dataclass(frozen=True)
class Budget:
    """Steps of each phase and the batch size shared by both (see the module docstring)."""
    pretrain_steps: int
    finetune_steps: int
    batch_size: int

    def __post_init__(self) -> None:
        for name in ("pretrain_steps", "finetune_steps", "batch_size"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"Budget.{name} must be a non-negative int, got {v!r}")
        if self.batch_size < 1 or self.total_steps < 1:
            raise ValueError(f"a budget needs a batch size >= 1 and at least one step, got {self}")

    @property
    def total_steps(self) -> int:
        return self.pretrain_steps + self.finetune_steps

    def pretrain_examples(self) -> int:
        """Pre-training examples read: the measure of equal compute."""
        return self.pretrain_steps * self.batch_size

    def scratch(self) -> Budget:
        """The same fine-tuning budget with no pre-training (the baseline arm)."""
        return dataclasses.replace(self, pretrain_steps=0)

    def train_config(self, **settings) -> TrainConfig:
        """A ``TrainConfig`` for both phases from ``settings`` (lr, min_lr, warmup, ...: each
        phase warms up and decays with them); ``steps`` in ``settings`` must agree."""
        if settings.get("steps", self.total_steps) != self.total_steps:
            raise ValueError(f"steps {settings['steps']} disagree with the budget's {self.total_steps} "
                             f"({self.pretrain_steps} pre-training + {self.finetune_steps} fine-tuning)")
        restarts = (self.pretrain_steps,) if 0 < self.pretrain_steps < self.total_steps else ()
        warmup = min(settings.get("warmup", 0), self.total_steps)    # each phase: min(warmup, its length)
        return TrainConfig(**{**settings, "steps": self.total_steps, "restarts": restarts, "warmup": warmup})


class PhasedBatches:
    """``get_batch(split, rng)``: ``pretrain_batch`` for the first ``pretrain_steps`` steps,
    then ``finetune_batch``; ``callback`` (the loop's) keeps the step, ``step`` starts a
    resumed run where it stopped."""

    def __init__(self, pretrain_batch: GetBatch | None, finetune_batch: GetBatch, pretrain_steps: int,
                 step: int = 0):
        if pretrain_steps and pretrain_batch is None:
            raise ValueError(f"{pretrain_steps} pre-training steps need a pre-training objective")
        self.pretrain_batch, self.finetune_batch = pretrain_batch, finetune_batch
        self.pretrain_steps, self.step = pretrain_steps, step

    def __call__(self, split: str, rng: np.random.Generator):
        if self.step < self.pretrain_steps:
            return self.pretrain_batch(split, rng)
        return self.finetune_batch(split, rng)

    def callback(self, step: int, record: dict) -> None:
        self.step = step


def pretrain_then_finetune(model, pretrain_batch: GetBatch | None, finetune_batch: GetBatch, budget: Budget,
                           settings: dict, *, seed: int = 0, progress: bool = False, **train_kwargs) -> TrainResult:
    """Train ``model`` by ``budget``: ``pretrain_batch`` on the first schedule, then
    ``finetune_batch`` on a fresh one (``settings``: the ``TrainConfig`` fields but steps,
    seed and progress, ``out_dir`` included; ``train_kwargs`` go to ``train``, ``resume``
    included)."""
    config = budget.train_config(**settings, seed=seed, progress=progress)
    step = 0
    if train_kwargs.get("resume") and config.out_dir:                # a resumed run goes on where it stopped
        step = load_checkpoint(Path(config.out_dir) / "checkpoint.npz").extra.get("step", 0)
    batches = PhasedBatches(pretrain_batch, finetune_batch, budget.pretrain_steps, step)
    return train(model, batches, config, callback=batches.callback, **train_kwargs)
