"""One training loop for every minipt language model.

A model answers ``loss, logits = model(*batch)`` and ``model.backward()`` (the LM
interface of ARCHITECTURE.md), so the n-gram's neural successors, the LSTM, GPT, BERT
and T5 all train here. The loop does AdamW (Loshchilov & Hutter 2019) with warm-up and
cosine decay (GPT-1, Radford et al. 2018), global gradient-norm clipping, gradient
accumulation, phases (``restarts``: at each, a fresh warm-up + cosine schedule and a
fresh optimiser state, for fine-tuning after pre-training), periodic evaluation, a tqdm progress bar with loss and training tokens/s
(evaluation time left out),
atomic checkpoints with optimiser and RNG state (resuming reproduces the uninterrupted
run), a clean save on Ctrl-C, a NaN/inf guard that keeps the last good checkpoint, a
JSON-lines metrics log and a PNG plot of the losses (with the oracle's, when known)
and the gradient norm.
"""
from __future__ import annotations

import json
import math
import signal
import time
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable

import numpy as np

from . import kernels
from .core.checkpoint import load_checkpoint, save_checkpoint
from .core.checks import check_positive_int
from .core.module import Module, eval_mode
from .nn.batch_parts import PARTS_ENV, batch_parts
from .optim import AdamW, clip_grad_norm
from .optim.schedules import warmup_cosine
from .progress import compile_note, progress_bar

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
    restarts: tuple[int, ...] = ()     # steps where a new phase starts: fresh schedule and optimiser state

    def __post_init__(self) -> None:
        check_positive_int("steps", self.steps)
        self.restarts = tuple(self.restarts)
        if list(self.restarts) != sorted(set(self.restarts)) or any(not 0 < r < self.steps for r in self.restarts):
            raise ValueError(f"restarts must be increasing steps in (0, steps={self.steps}), got {self.restarts}")
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
    val_step: int | None = None                 # the step at which val_loss was measured


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


def read_metrics(path: Path) -> list[dict]:
    """The records of a ``metrics.jsonl`` (one JSON object with an integer ``step`` and a
    ``loss`` per line); a damaged line is a ValueError naming the file and the line."""
    try:
        lines = path.read_bytes().decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise ValueError(f"{path} is damaged: not UTF-8 text ({e})") from None
    records = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is damaged: line {n} is not JSON ({e.msg})") from None
        if not (isinstance(record, dict) and isinstance(record.get("step"), int)
                and isinstance(record.get("loss"), (int, float)) and isinstance(record.get("grad_norm"), (int, float))):
            raise ValueError(f"{path} is damaged: line {n} is not a metrics record "
                             "(an object with an integer step, a loss and a grad_norm)")
        records.append(record)
    return records


def _resume_state(ckpt_path: Path, metrics_path: Path | None, model: Module, opt) -> tuple[int, dict, list[dict]]:
    """Read and check everything a resume needs, writing nothing: parameters and optimiser
    restored into ``model`` / ``opt``; returns (step, saved extra, history up to step)."""
    if not ckpt_path.exists():
        raise FileNotFoundError(f"resume: no checkpoint at {ckpt_path}")
    ck = load_checkpoint(ckpt_path)
    extra = ck.extra
    if not (isinstance(extra.get("step"), int) and extra["step"] >= 0 and isinstance(extra.get("data_rng"), dict)
            and isinstance(extra.get("model_rngs"), dict)):
        raise ValueError(f"{ckpt_path} was not saved by the training loop (it has no step and random-generator "
                         "states): it cannot be resumed")
    parts, had = batch_parts(), extra.get("batch_parts", 1)      # checkpoints from before the setting: whole
    if had != parts:
        raise ValueError(f"{ckpt_path} was trained with the Transformer stacks' batch in {had} part(s), and "
                         f"{PARTS_ENV} asks for {parts} now: the parts change float rounding, so the resumed steps "
                         f"would not repeat the run's; resume with {PARTS_ENV}={had} (minipt train --batch-parts {had})")
    try:
        ck.restore(model, opt)
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{ckpt_path} does not fit this model: {e}") from None
    names = sorted(n for n, _ in model.generators())
    if sorted(extra["model_rngs"]) != names:
        raise ValueError(f"{ckpt_path} does not fit this model: it saved the random generators "
                         f"{sorted(extra['model_rngs'])}, the model has {names} (dropout differs?)")
    history = read_metrics(metrics_path) if metrics_path and metrics_path.exists() else []
    return extra["step"], extra, [h for h in history if h["step"] <= extra["step"]]


def _set_state(gen: np.random.Generator, state, where: Path) -> None:
    try:
        gen.bit_generator.state = state
    except (ValueError, TypeError, KeyError) as e:
        raise ValueError(f"{where}: a saved random-generator state is damaged ({e})") from None


def phase_lr(config: TrainConfig, step: int) -> float:
    """The learning rate at ``step``: warm-up then cosine decay over the phase that holds
    it (phases split at ``config.restarts``), warm-up min(warmup, phase length) steps."""
    bounds = [0, *config.restarts, config.steps]
    k = max(i for i in range(len(bounds) - 1) if bounds[i] <= step)
    length = bounds[k + 1] - bounds[k]
    return warmup_cosine(step - bounds[k], length, min(config.warmup, length), config.lr, config.min_lr)


def train(model: Module, get_batch: GetBatch, config: TrainConfig, *, model_config: dict | None = None,
          resume: bool = False, callback: Callable[[int, dict], None] | None = None,
          extra: dict | None = None, oracle_loss: float | None = None) -> TrainResult:
    """Train ``model`` on batches from ``get_batch(split, rng)`` for ``config.steps`` steps.

    With ``resume=True`` and a checkpoint in ``config.out_dir``, parameters, optimiser,
    step and every random generator (data order, dropout) are restored first, so the
    remaining steps give the same losses as a run that never stopped. Everything is read
    and checked before anything is written: a resume that fails leaves the folder as it was.
    Without ``resume``, a folder that already holds a checkpoint or metrics is refused
    (a new run never mixes its log into an old one).

    On Ctrl-C the step in progress finishes, the checkpoint is saved, the model is
    evaluated once (if ``eval_every``) and the result says ``interrupted``; a second
    Ctrl-C stops at once. ``extra`` is saved in the checkpoint beside the loop's own state;
    ``oracle_loss`` (the best achievable loss, when known) is drawn on ``loss.png``.
    """
    out = Path(config.out_dir) if config.out_dir else None
    ckpt_path = out / "checkpoint.npz" if out else None
    metrics_path = out / "metrics.jsonl" if out else None
    data_rng = np.random.default_rng(config.seed)
    eval_seed = config.seed + 1
    opt = AdamW(model, lr=config.lr, betas=config.betas, weight_decay=config.weight_decay)
    schedule = partial(phase_lr, config)
    step, history = 0, []

    if resume:
        if not out:
            raise ValueError("resume=True needs config.out_dir, the folder that holds the checkpoint")
        step, saved, history = _resume_state(ckpt_path, metrics_path, model, opt)
        _set_state(data_rng, saved["data_rng"], ckpt_path)
        for name, gen in model.generators():
            _set_state(gen, saved["model_rngs"][name], ckpt_path)
        if step >= config.steps:
            raise ValueError(f"{ckpt_path} is at step {step} of {config.steps}: the run is finished, "
                             "there is nothing to resume")
    elif out and any((out / f).exists() for f in ("checkpoint.npz", "metrics.jsonl")):
        raise FileExistsError(f"{out} already holds a run (checkpoint.npz or metrics.jsonl); resume it with "
                              "resume=True or choose another out_dir")
    if out:                                    # every check has passed: now the folder may change
        out.mkdir(parents=True, exist_ok=True)
        if metrics_path.exists() or not resume:
            metrics_path.write_text("".join(json.dumps(h) + "\n" for h in history))

    def save() -> Path | None:
        if not ckpt_path:
            return None
        state = {**(extra or {}), "step": step, "batch_parts": batch_parts(), "data_rng": data_rng.bit_generator.state,
                 "model_rngs": {n: g.bit_generator.state for n, g in model.generators()},
                 "train_config": {k: v for k, v in asdict(config).items()}}
        save_checkpoint(ckpt_path, model, config=model_config or {}, optimizer=opt, extra=state)
        return ckpt_path

    def log(record: dict) -> None:
        history.append(record)
        if metrics_path:
            with open(metrics_path, "a") as f:
                f.write(json.dumps(record) + "\n")

    bar = progress_bar(config.steps, step) if config.progress else None
    model.train()
    start = time.perf_counter()
    interrupted = False
    train_loss, val_loss, val_step = float("nan"), None, None
    tokens, train_seconds = 0, 0.0             # since the last bar update, evaluation left out
    with _SigintFlag() as sigint, ExitStack() as first_step:
        first_step.enter_context(kernels.on_compile(lambda: compile_note(bar)))   # a cold kernel cache
        while step < config.steps:
            t_step = time.perf_counter()
            if step in config.restarts:        # a new phase: Adam's moments start from zero again
                opt = AdamW(model, lr=config.lr, betas=config.betas, weight_decay=config.weight_decay)
            opt.lr = schedule(step)
            opt.zero_grad()
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
            train_seconds += time.perf_counter() - t_step
            train_loss = loss_sum / config.accum_steps
            record = {"step": step, "loss": train_loss, "grad_norm": float(grad_norm), "lr": opt.lr}
            if config.eval_every and (step % config.eval_every == 0 or step == config.steps):
                val_loss, val_step = evaluate(model, get_batch, config.eval_batches,
                                              np.random.default_rng(eval_seed)), step
                record["val_loss"] = val_loss
            log(record)
            if bar:
                bar.set_postfix(loss=f"{train_loss:.3f}", val=f"{val_loss:.3f}" if val_loss is not None else "-",
                                train_tok_s=f"{tokens / max(train_seconds, 1e-9):,.0f}")
                tokens, train_seconds = 0, 0.0
                bar.update(1)
                if bar.timed_from is None:
                    bar.first_step_done()
            first_step.close()                 # kernels compiled later (another dtype) print nothing
            if "val_loss" in record or (config.checkpoint_every and step % config.checkpoint_every == 0):
                save()
            if callback:
                callback(step, record)
            if sigint.hit:
                interrupted = True
                break
        if bar:
            bar.close()
        path = save()                          # on Ctrl-C too: the step is safe before evaluating
        if interrupted and config.eval_every and val_step != step:
            val_loss, val_step = evaluate(model, get_batch, config.eval_batches,
                                          np.random.default_rng(eval_seed)), step
            history[-1]["val_loss"] = val_loss
            if metrics_path:
                metrics_path.write_text("".join(json.dumps(h) + "\n" for h in history))
    plot = plot_history(history, out / "loss.png", oracle_loss) if out and history else None
    return TrainResult(step, train_loss, val_loss, history, path, plot, interrupted,
                       time.perf_counter() - start, val_step)


def plot_history(history: list[dict], path: Path, oracle_loss: float | None = None) -> Path:
    """``loss_figure`` saved as a PNG (Agg backend)."""
    import matplotlib.pyplot as plt
    fig = loss_figure(history, oracle_loss)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def loss_figure(history: list[dict], oracle_loss: float | None = None):
    """Train/validation loss, the gap to the best possible loss, and the gradient norm
    against step.

    With ``oracle_loss`` (the loss no model can beat on this validation text) the first
    panel draws it as a line and the second shows loss minus oracle on a log axis, where
    the last hundredths of a nat stay visible; without it the second panel zooms on the
    second half of training."""
    import sys

    import matplotlib
    if "matplotlib.pyplot" not in sys.modules:       # a script or the CLI: no screen needed;
        matplotlib.use("Agg", force=False)           # a notebook keeps its inline backend
    import matplotlib.pyplot as plt

    steps = np.array([h["step"] for h in history])
    loss = np.array([h["loss"] for h in history])
    val = [(h["step"], h["val_loss"]) for h in history if "val_loss" in h]
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(13, 3.4))
    fig.subplots_adjust(left=0.06, right=0.99, bottom=0.15, top=0.97, wspace=0.3)
    ax1.plot(steps, loss, label="train", lw=0.8)
    if val:
        ax1.plot(*zip(*val), "o-", label="validation", ms=3)
    if oracle_loss is not None:
        ax1.axhline(oracle_loss, color="k", ls="--", lw=0.8, label=f"oracle {oracle_loss:.4f}")
    ax1.set_xlabel("step"); ax1.set_ylabel("loss (nats/token)"); ax1.legend()
    if oracle_loss is not None:
        ax2.semilogy(steps, np.maximum(loss - oracle_loss, 1e-4), lw=0.8, label="train")
        if val:
            vs, vl = zip(*val)
            ax2.semilogy(vs, np.maximum(np.array(vl) - oracle_loss, 1e-4), "o-", ms=3, label="validation")
        ax2.set_ylabel("loss - oracle (nats/token, log)")
        _plain_log_ticks(ax2)
        ax2.grid(True, which="both", lw=0.3)
        ax2.legend()
    else:
        late = steps >= steps[len(steps) // 2]
        ax2.plot(steps[late], loss[late], lw=0.8, label="train")
        if val:
            late_val = [(s, v) for s, v in val if s >= steps[len(steps) // 2]]
            if late_val:
                ax2.plot(*zip(*late_val), "o-", ms=3, label="validation")
        ax2.set_ylabel("loss, second half (zoomed)")
        ax2.grid(True, lw=0.3)
        ax2.legend()
    ax2.set_xlabel("step")
    ax3.plot(steps, [h["grad_norm"] for h in history], lw=0.8, color="tab:red")
    ax3.set_xlabel("step"); ax3.set_ylabel("gradient norm (before clipping)"); ax3.set_yscale("log")
    _plain_log_ticks(ax3)
    return fig


def _plain_log_ticks(ax) -> None:
    """Log-axis ticks at 1, 2, 5 x 10^k labelled 0.05, 0.1, 0.2 (mathtext labels are slow)."""
    from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(NullFormatter())
