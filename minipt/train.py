"""One training loop for every minipt language model.

A model answers ``loss, logits = model(*batch)`` and ``model.backward()`` (the LM
interface of ARCHITECTURE.md), so the n-gram's neural successors, the LSTM, GPT, BERT
and T5 all train here. The loop does AdamW (Loshchilov & Hutter 2019) with warm-up and
cosine decay (GPT-1, Radford et al. 2018), global gradient-norm clipping, gradient
accumulation, periodic evaluation, a tqdm progress bar with loss and tokens/s,
atomic checkpoints with optimiser and RNG state (resuming reproduces the uninterrupted
run), a clean save on Ctrl-C, a NaN/inf guard that keeps the last good checkpoint, a
JSON-lines metrics log and a PNG plot of the losses and the gradient norm.
"""
from __future__ import annotations

import json
import math
import signal
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from .core.checkpoint import load_checkpoint, save_checkpoint
from .core.checks import check_positive_int
from .core.module import Module, eval_mode
from .optim import AdamW, clip_grad_norm
from .optim.schedules import warmup_cosine

Batch = tuple
GetBatch = Callable[[str, np.random.Generator], Batch]


@dataclass
class TrainConfig:
    steps: int = 1000
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup: int = 100
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float | None = 1.0
    accum_steps: int = 1
    eval_every: int = 100
    eval_batches: int = 10
    checkpoint_every: int = 0          # 0: only at the end, on Ctrl-C and at evaluations
    seed: int = 0
    out_dir: str | None = None         # checkpoint, metrics.jsonl and loss.png go here
    progress: bool = True

    def __post_init__(self) -> None:
        check_positive_int("steps", self.steps)
        check_positive_int("accum_steps", self.accum_steps)
        if not 0 <= self.warmup <= self.steps:
            raise ValueError(f"warmup must be in [0, steps={self.steps}], got {self.warmup}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if not 0 <= self.min_lr <= self.lr:
            raise ValueError(f"min_lr must be in [0, lr={self.lr}], got {self.min_lr}")


@dataclass
class TrainResult:
    step: int                                   # steps completed
    train_loss: float
    val_loss: float | None
    history: list[dict] = field(default_factory=list)
    checkpoint: Path | None = None
    plot: Path | None = None
    interrupted: bool = False
    seconds: float = 0.0


class _SigintFlag:
    """Turns Ctrl-C into a flag read between steps, so a step is never cut in half."""

    def __init__(self) -> None:
        self.hit = False
        self._old = None

    def __enter__(self):
        self._old = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.hit:            # a second Ctrl-C stops at once
            raise KeyboardInterrupt
        self.hit = True

    def __exit__(self, *exc) -> None:
        signal.signal(signal.SIGINT, self._old)


def evaluate(model: Module, get_batch: GetBatch, n_batches: int, rng: np.random.Generator,
             split: str = "val") -> float:
    """Mean loss over ``n_batches`` batches of ``split``, in eval mode (no dropout)."""
    with eval_mode(model):
        losses = [float(model(*get_batch(split, rng))[0]) for _ in range(n_batches)]
    return float(np.mean(losses))


def _count_tokens(batch: Batch) -> int:
    first = batch[0]
    return int(first.size) if isinstance(first, np.ndarray) else 0


def train(model: Module, get_batch: GetBatch, config: TrainConfig, *, model_config: dict | None = None,
          resume: bool = False, callback: Callable[[int, dict], None] | None = None) -> TrainResult:
    """Train ``model`` on batches from ``get_batch(split, rng)`` for ``config.steps`` steps.

    With ``resume=True`` and a checkpoint in ``config.out_dir``, parameters, optimiser,
    step and every random generator (data order, dropout) are restored first, so the
    remaining steps give the same losses as a run that never stopped.
    """
    out = Path(config.out_dir) if config.out_dir else None
    ckpt_path = out / "checkpoint.npz" if out else None
    metrics_path = out / "metrics.jsonl" if out else None
    data_rng = np.random.default_rng(config.seed)
    eval_seed = config.seed + 1
    opt = AdamW(model, lr=config.lr, betas=config.betas, weight_decay=config.weight_decay)
    schedule = lambda s: warmup_cosine(s, config.steps, config.warmup, config.lr, config.min_lr)
    step, history = 0, []

    if out:
        out.mkdir(parents=True, exist_ok=True)
    if resume:
        if not (ckpt_path and ckpt_path.exists()):
            raise FileNotFoundError(f"resume: no checkpoint at {ckpt_path}")
        ck = load_checkpoint(ckpt_path)
        ck.restore(model, opt)
        step = int(ck.extra["step"])
        data_rng.bit_generator.state = ck.extra["data_rng"]
        for name, gen in model.generators():
            gen.bit_generator.state = ck.extra["model_rngs"][name]
        if metrics_path and metrics_path.exists():
            history = [json.loads(l) for l in metrics_path.read_text().splitlines() if l.strip()]
            history = [h for h in history if h["step"] <= step]
            metrics_path.write_text("".join(json.dumps(h) + "\n" for h in history))

    def save() -> Path | None:
        if not ckpt_path:
            return None
        extra = {"step": step, "data_rng": data_rng.bit_generator.state,
                 "model_rngs": {n: g.bit_generator.state for n, g in model.generators()},
                 "train_config": {k: v for k, v in asdict(config).items()}}
        save_checkpoint(ckpt_path, model, config=model_config or {}, optimizer=opt, extra=extra)
        return ckpt_path

    def log(record: dict) -> None:
        history.append(record)
        if metrics_path:
            with open(metrics_path, "a") as f:
                f.write(json.dumps(record) + "\n")

    bar = None
    if config.progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=config.steps, initial=step, desc="train", unit="step", dynamic_ncols=True, mininterval=0.5)
    model.train()
    start = time.perf_counter()
    interrupted = False
    train_loss, val_loss = float("nan"), None
    tokens, t_last = 0, time.perf_counter()
    with _SigintFlag() as sigint:
        while step < config.steps:
            opt.lr = schedule(step)
            model.zero_grad()
            loss_sum = 0.0
            for _ in range(config.accum_steps):
                batch = get_batch("train", data_rng)
                loss, _ = model(*batch)
                loss = float(loss)
                if not math.isfinite(loss):
                    if bar:
                        bar.close()
                    kept = f"; the last good checkpoint is {ckpt_path}" if ckpt_path and ckpt_path.exists() else ""
                    raise FloatingPointError(f"loss is {loss} at step {step + 1}: lower the learning rate or "
                                             f"check the data{kept}")
                model.backward(1.0 / config.accum_steps)
                loss_sum += loss
                tokens += _count_tokens(batch)
            grad_norm = clip_grad_norm(model, config.grad_clip) if config.grad_clip else clip_grad_norm(model, math.inf)
            if not math.isfinite(grad_norm):
                if bar:
                    bar.close()
                raise FloatingPointError(f"gradient norm is {grad_norm} at step {step + 1}; parameters were not "
                                         "updated" + (f"; the last good checkpoint is {ckpt_path}" if ckpt_path
                                                      and ckpt_path.exists() else ""))
            opt.step()
            step += 1
            train_loss = loss_sum / config.accum_steps
            record = {"step": step, "loss": train_loss, "grad_norm": float(grad_norm), "lr": opt.lr}
            is_last = step == config.steps
            if config.eval_every and (step % config.eval_every == 0 or is_last):
                val_loss = evaluate(model, get_batch, config.eval_batches, np.random.default_rng(eval_seed))
                record["val_loss"] = val_loss
            log(record)
            if bar:
                now = time.perf_counter()
                bar.set_postfix(loss=f"{train_loss:.3f}", val=f"{val_loss:.3f}" if val_loss is not None else "-",
                                tok_s=f"{tokens / max(now - t_last, 1e-9):,.0f}")
                tokens, t_last = 0, now
                bar.update(1)
            if "val_loss" in record or (config.checkpoint_every and step % config.checkpoint_every == 0):
                save()
            if callback:
                callback(step, record)
            if sigint.hit:
                interrupted = True
                break
    if bar:
        bar.close()
    path = save()
    plot = plot_history(history, out / "loss.png") if out and history else None
    if interrupted and config.progress:
        print(f"interrupted at step {step}; saved {path}; continue with resume=True")
    return TrainResult(step, train_loss, val_loss, history, path, plot, interrupted,
                       time.perf_counter() - start)


def plot_history(history: list[dict], path: Path) -> Path:
    """Train/validation loss and gradient norm against step, as a PNG (Agg backend)."""
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    steps = [h["step"] for h in history]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.2))
    ax1.plot(steps, [h["loss"] for h in history], label="train", lw=0.8)
    val = [(h["step"], h["val_loss"]) for h in history if "val_loss" in h]
    if val:
        ax1.plot(*zip(*val), "o-", label="validation", ms=3)
    ax1.set_xlabel("step"); ax1.set_ylabel("loss (nats/token)"); ax1.legend()
    ax2.plot(steps, [h["grad_norm"] for h in history], lw=0.8, color="tab:red")
    ax2.set_xlabel("step"); ax2.set_ylabel("gradient norm (before clipping)"); ax2.set_yscale("log")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
