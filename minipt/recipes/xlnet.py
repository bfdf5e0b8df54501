"""The recipe behind ``minipt train xlnet``: XLNet's permutation LM on the toy language's
characters (or ``--corpus FILE``).

Each training sequence is a random window of T characters with its own factorisation
order and targets from ``objectives.permutation.permutation_lm`` (the last 1/K of the
order predicted); the validation loss is the same objective on held-out text, in nats
per predicted character. The report adds the left-to-right loss of the validation text
(the query stream in the natural order, every character predicted from those before it
in the window) next to the oracle loss of the toy language.

The run folder (``run_folder.py``'s rules) holds ``run.json``: preset, steps, seed and
corpus, which a ``--resume`` takes and may not change; the tokenizer it rebuilds must
equal the saved ``tokenizer.json``.
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np

from ..core.module import eval_mode
from ..models.registry import Preset
from ..objectives.permutation import permutation_lm
from ..tokenizers.char import CharTokenizer
from ..train import TrainConfig, train
from . import run_folder, with_steps

PRESETS = {
    "toy": Preset(model=dict(n_layer=2, n_head=4, d_model=64, activation="gelu_tanh"), batch_size=16,
                  train=dict(steps=1000, lr=3e-3, min_lr=3e-4, warmup=50, weight_decay=0.1, eval_every=100,
                             eval_batches=10, grad_clip=1.0), data=dict(n_tokens=200_000, block_size=32, K=4),
                  expected="permuted 0.447 nats per predicted char; left to right 1.616 (oracle 0.422); "
                           "52 s of one core"),
}
RUN_FILES = ("run.json", "checkpoint.npz", "tokenizer.json", "metrics.jsonl", "loss.png", "report.json")


class PermutedWindows:
    """``get_batch(split, rng)`` -> (idx, targets, order), each (B, T): random windows, each
    with its own sampled order; targets are the window's tokens at the last 1/K of the order."""

    def __init__(self, train_ids: np.ndarray, val_ids: np.ndarray, T: int, batch_size: int, K: int):
        for name, ids in (("train", train_ids), ("val", val_ids)):
            if len(ids) < T + 1:
                raise ValueError(f"{name} text has {len(ids)} tokens; a window needs {T + 1}")
        self.splits = {"train": train_ids, "val": val_ids}
        self.T, self.B, self.K = T, batch_size, K

    def get_batch(self, split: str, rng: np.random.Generator):
        data = self.splits[split]
        starts = rng.integers(0, len(data) - self.T, size=self.B)
        idx = data[starts[:, None] + np.arange(self.T)]                   # (B, T)
        made = [permutation_lm(row, rng, self.K) for row in idx]
        return idx, np.stack([m["targets"] for m in made]), np.stack([m["order"] for m in made])

    def left_to_right_loss(self, model, split: str = "val") -> float:
        """Mean nats per character over non-overlapping windows of ``split``, natural order."""
        data = self.splits[split]
        n = (len(data) // self.T) * self.T
        windows = data[:n].reshape(-1, self.T)                            # (N, T)
        total = count = 0.0
        with eval_mode(model):
            for i in range(0, len(windows), 64):
                w = windows[i:i + 64]
                total += -model.log_prob(w, w)
                count += w.size
        return total / count


def train_xlnet(entry, preset: str | None = None, *, corpus: str | None = None, steps: int | None = None,
                out_dir: str = "runs/xlnet", seed: int | None = None, resume: bool = False,
                overwrite: bool = False, progress: bool = True) -> dict:
    out = Path(out_dir)
    run_folder.check_out(out, RUN_FILES, resume=resume, overwrite=overwrite)
    preset, steps, seed = run_folder.run_settings(entry, out, resume, preset, steps, seed)
    corpus = run_folder.run_corpus(out, resume, corpus)
    if preset not in entry.presets:
        raise ValueError(f"unknown --preset {preset!r} for {entry.name}; choose one of {sorted(entry.presets)}")
    p = entry.presets[preset]
    T = p.data["block_size"]
    from ..data.text import char_corpus
    train_text, val_text, oracle, source = char_corpus(corpus, p.data["n_tokens"], T, seed)
    tok = CharTokenizer().fit(train_text + val_text)
    data = PermutedWindows(tok.encode_array(train_text).astype(np.int64), tok.encode_array(val_text).astype(np.int64),
                           T, p.batch_size, p.data["K"])
    model = entry.build(rng=np.random.default_rng(seed), vocab_size=tok.vocab_size, **p.model)
    if resume:
        run_folder.check_tokenizer(out, tok)
    if overwrite and not resume:
        run_folder.clear_run_files(out, RUN_FILES)
    out.mkdir(parents=True, exist_ok=True)
    if not resume:
        tok.save(out / "tokenizer.json")
        run_folder.write_settings(entry, out, preset, steps, seed, corpus=corpus)
    tc = TrainConfig(**with_steps(p.train, steps), seed=seed, out_dir=str(out), progress=progress)
    if progress:
        print(f"minipt train {entry.name}: {entry.title}, preset {preset}, {model.num_parameters():,} parameters, "
              f"{len(data.splits['train']):,} characters of {source}, windows of {T}, predicting the last "
              f"1/{p.data['K']} of each order")
    result = train(model, data.get_batch, tc, model_config=model.spec(), resume=resume)
    l2r = data.left_to_right_loss(model)
    report = {"model": entry.name, "preset": preset, "steps": result.step, "train_loss": result.train_loss,
              "val_loss": result.val_loss, "left_to_right_loss": l2r, "oracle_loss": oracle,
              "seconds": round(result.seconds, 1), "interrupted": result.interrupted, "total_steps": tc.steps,
              "resume_command": f"minipt train {entry.name} --out {shlex.quote(str(out))} --resume"
              if result.interrupted else None}
    val = f"{result.val_loss:.4f}" if result.val_loss is not None else "not evaluated"
    summary = [f"permutation LM validation loss {val} nats per predicted char after {result.step} steps "
               f"({result.seconds:.0f}s)",
               f"left-to-right loss of the validation text {l2r:.4f} nats/char (windows of {T}, no memory)"]
    if oracle is not None:
        summary.append(f"oracle loss of this validation text {oracle:.4f} nats/char (left to right, whole text)")
    report["summary"] = summary
    (out / "report.json").write_text(json.dumps(report, indent=2))
    report["files"] = [str(q) for q in (out / "run.json", result.checkpoint, out / "tokenizer.json", out / "metrics.jsonl",
                                         result.plot, out / "report.json") if q is not None]
    return report
