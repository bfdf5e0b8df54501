"""The recipe behind ``minipt train transformer``: an encoder-decoder trained on the
text-to-text mixture of toy tasks (``data/text_to_text.py``: ``translate toy:``,
``summarize:``, ``sentiment:``, ``similarity sentence1: ... sentence2:``) by teacher
forcing, then scored per task on held-out pairs with greedy decoding
(``inference/seq2seq_decoding.py``).

**Reuse by T5, BART and MASS.** ``make_recipe(hooks)`` returns a recipe for a registry
entry; a ``Seq2SeqHooks`` says what differs from the Transformer's:

- ``model_settings(tok)``: settings added to the preset's ``model`` dict when the entry
  builds the model (the default gives ``vocab_size`` and ``pad_id``);
- ``start_token``: what the decoder reads first (``<s>`` here; T5 starts from the pad);
- ``extra_specials``: tokens the tokenizer reserves (T5's sentinels);
- ``pretrain_batch(tok, texts, batch_size, rng) -> (source, target_in, targets)``: a
  pre-training objective (span corruption, BART's noises, MASS's fragments) over the
  training inputs' plain texts, used for the first ``data["pretrain_steps"]`` steps;
  the text-to-text mixture follows for the rest of ``train["steps"]``, on a fresh
  warm-up + cosine schedule with a fresh optimiser state (``experiments/protocol.py``,
  the one rule for pre-training then fine-tuning: a preset "from scratch" gives the
  same fine-tuning steps, so the two compare at equal fine-tuning budget).

So ``t5.py`` registers ``recipe=make_recipe(Seq2SeqHooks(start_token=PAD,
extra_specials=t5_sentinels(20), pretrain_batch=span_corruption_batch))`` and a preset
with ``pretrain_steps``; the run folder, the report and ``minipt generate`` are shared.

The run folder holds ``run.json`` (preset, steps, seed and the start/end tokens that
``minipt generate`` reads; a ``--resume`` takes the settings from here),
``tokenizer.json``, ``checkpoint.npz``, ``metrics.jsonl``, ``loss.png`` and
``report.json``. A second run into the folder is refused; ``--overwrite`` replaces it,
``--resume`` continues it, Ctrl-C saves and the report says how to continue (the
held-out scoring runs on a finished run only). ``--corpus`` does not apply.
"""
from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..core.checkpoint import load_checkpoint
from ..data import text_to_text as t2t
from ..experiments.protocol import Budget, PhasedBatches
from ..inference.seq2seq_decoding import greedy
from ..models.registry import Preset
from ..tokenizers.special import BOS, EOS, PAD
from ..train import train
from . import with_steps
from .run_folder import _settings, check_out, clear_run_files

RUN_FILES = ("run.json", "tokenizer.json", "checkpoint.npz", "metrics.jsonl", "loss.png", "report.json")

PRESETS = {
    "toy": Preset(model=dict(n_encoder_layers=2, n_decoder_layers=2, n_head=4, d_model=64, max_source_len=40,
                             max_target_len=24),
                  batch_size=32,
                  train=dict(steps=1500, lr=2e-3, min_lr=2e-4, warmup=100, weight_decay=0.01, eval_every=250,
                             eval_batches=4, grad_clip=1.0),
                  data=dict(sizes=(2000, 100, 200), limit=None, pretrain_steps=0),
                  expected="held-out greedy answers: translate exact match 1.000, summarize 0.995, sentiment "
                           "accuracy 0.995, similarity exact match 0.600 (its majority answer: 0.420); 181 s on 2 "
                           "cores shared with other jobs at load 8-10 (236 s at load 21)"),
}


@dataclass(frozen=True)
class Seq2SeqHooks:
    """What an encoder-decoder's recipe changes (see the module docstring)."""
    model_settings: Callable | None = None           # tok -> dict; None: vocab_size and pad_id
    start_token: str = BOS
    extra_specials: Sequence[str] = ()
    pretrain_batch: Callable | None = None           # (tok, texts, batch_size, rng) -> batch


class _Batches(PhasedBatches):
    """``get_batch(split, rng)`` for ``train``: the pre-training objective for the first
    ``pretrain_steps`` steps, then the mixture (``experiments/protocol.PhasedBatches``)."""

    def __init__(self, tok, data, p: Preset, hooks: Seq2SeqHooks, step: int):
        self.tok, self.p = tok, p
        self.mix = {s: t2t.Mixture({t: d[s] for t, d in data.items()}, p.data.get("limit")) for s in ("train", "val")}
        self.texts = {s: [t2t.plain_text(e["input"]) for t in data.values() for e in t[s]] for s in ("train", "val")}
        self.start = tok.token_to_id(hooks.start_token)
        pre = hooks.pretrain_batch
        super().__init__(None if pre is None else lambda split, rng: pre(tok, self.texts[split], p.batch_size, rng),
                         self.mixture, p.data.get("pretrain_steps", 0) if pre else 0, step)

    def mixture(self, split: str, rng: np.random.Generator):
        src, tin, tgt = t2t.encode_pairs(self.tok, self.mix[split].sample(self.p.batch_size, rng),
                                         self.p.model["max_source_len"], self.p.model["max_target_len"])
        tin[:, 0] = self.start
        return src, tin, tgt


def evaluate(model, tok, pairs: list[dict], start_token: str, max_source_len: int,
             batch_size: int = 50) -> tuple[dict[str, float], dict[str, list[str]]]:
    """Greedy answers to held-out ``pairs`` -> ({task: score} as ``text_to_text.score``,
    {task: the answers, in the order of ``pairs``})."""
    start, eos = tok.token_to_id(start_token), tok.token_to_id(EOS)
    by_task: dict[str, tuple[list, list]] = {}
    for i in range(0, len(pairs), batch_size):
        chunk = pairs[i:i + batch_size]
        src = t2t.encode_sources(tok, [e["input"] for e in chunk], max_source_len)
        for e, out in zip(chunk, greedy(model, src, start_id=start, eos_id=eos)):
            preds, refs = by_task.setdefault(e["task"], ([], []))
            preds.append(t2t.answer_text(tok, out))
            refs.append(e["target"])
    return ({task: t2t.score(task, p, r) for task, (p, r) in by_task.items()},
            {task: p for task, (p, _) in by_task.items()})


def make_recipe(hooks: Seq2SeqHooks = Seq2SeqHooks()) -> Callable[..., dict]:
    def recipe(entry, preset: str | None = None, *, corpus: str | None = None, steps: int | None = None,
               out_dir: str | None = None, seed: int | None = None, resume: bool = False, overwrite: bool = False,
               progress: bool = True) -> dict:
        if corpus:
            raise ValueError(f"minipt train {entry.name} trains on the toy text-to-text tasks, whose answers are "
                             "known; --corpus is not supported")
        out = Path(out_dir or f"runs/{entry.name}")
        check_out(out, RUN_FILES, resume=resume, overwrite=overwrite)
        preset, steps, seed = _settings(out, resume, preset, steps, seed)
        if preset not in entry.presets:
            raise ValueError(f"unknown preset {preset!r} for {entry.name}; choose one of {sorted(entry.presets)}")
        p = entry.presets[preset]
        data = t2t.text_to_text(tuple(p.data["sizes"]), seed=seed)
        tok = t2t.build_tokenizer(data, hooks.extra_specials)
        settings = hooks.model_settings(tok) if hooks.model_settings else \
            dict(vocab_size=tok.vocab_size, pad_id=tok.token_to_id(PAD))
        model = entry.build(rng=np.random.default_rng(seed), **p.model, **settings)
        start_step = load_checkpoint(out / "checkpoint.npz").extra["step"] if resume and \
            (out / "checkpoint.npz").is_file() else 0
        batches = _Batches(tok, data, p, hooks, start_step)
        if overwrite and not resume:
            clear_run_files(out, RUN_FILES)
        out.mkdir(parents=True, exist_ok=True)
        if not resume:
            tok.save(out / "tokenizer.json")
            (out / "run.json").write_text(json.dumps({"preset": preset, "steps": steps, "seed": seed,
                                                      "start_token": hooks.start_token, "end_token": EOS}))
        settings = with_steps(p.train, steps)
        pre = min(batches.pretrain_steps, settings["steps"])
        if steps is not None and settings["steps"] > pre:     # the warm-up a fine-tuning run of that length gets
            settings["warmup"] = with_steps(p.train, settings["steps"] - pre)["warmup"]
        budget = Budget(pretrain_steps=pre, finetune_steps=settings["steps"] - pre, batch_size=p.batch_size)
        tc = budget.train_config(**settings, seed=seed, out_dir=str(out), progress=progress)
        if progress:
            sizes = ", ".join(f"{t} {len(d['train'])}" for t, d in data.items())
            print(f"minipt train {entry.name}: {entry.title}, preset {preset}, {model.num_parameters():,} parameters, "
                  f"text-to-text training pairs: {sizes}")
        result = train(model, batches, tc, model_config=model.spec(), resume=resume, callback=batches.callback)
        report = {"model": entry.name, "preset": preset, "steps": result.step, "total_steps": tc.steps,
                  "pretrain_steps": budget.pretrain_steps, "finetune_steps": budget.finetune_steps,
                  "train_loss": result.train_loss, "val_loss": result.val_loss, "seconds": round(result.seconds, 1),
                  "interrupted": result.interrupted}
        summary = [f"trained {result.step} steps in {result.seconds:.0f}s, final training loss "
                   f"{result.train_loss:.3f}" + (f", validation loss {result.val_loss:.3f}"
                                                if result.val_loss is not None else "")]
        if result.interrupted:
            report["resume_command"] = f"minipt train {entry.name} --out {shlex.quote(str(out))} --resume"
        else:
            test = [e for t in data.values() for e in t["test"]]
            scores, answers = evaluate(model, tok, test, hooks.start_token, p.model["max_source_len"])
            report["test_scores"] = scores
            report["test_examples"] = {t: {"input": d["test"][0]["input"], "target": d["test"][0]["target"],
                                           "answer": answers[t][0]} for t, d in data.items()}
            n = {t: len(d["test"]) for t, d in data.items()}
            summary.append("held-out greedy answers: " + ", ".join(
                f"{t} {t2t.METRICS[t]} {s:.3f} (of {n[t]})" for t, s in scores.items()))
        report["summary"] = summary
        (out / "report.json").write_text(json.dumps(report, indent=2))
        report["files"] = [str(q) for q in (out / "run.json", out / "tokenizer.json", result.checkpoint,
                                             out / "metrics.jsonl", result.plot, out / "report.json") if q is not None]
        return report
    return recipe


train_seq2seq = make_recipe()


def load_text_to_text(path) -> tuple[object, object, int, int]:
    """A text-to-text run's (model, tokenizer, start id, end id) from its ``--out`` folder."""
    from .char_lm import load_trained, run_paths
    out, _ = run_paths(path)
    run_path = out / "run.json"
    model, tok = load_trained(path)
    if not hasattr(model, "encode") or not run_path.is_file():
        raise ValueError(f"{out} is not a text-to-text run (no encoder-decoder model and run.json); "
                         "`minipt generate` needs one from `minipt train transformer` (or t5, bart)")
    run = json.loads(run_path.read_text())
    return model, tok, tok.token_to_id(run["start_token"]), tok.token_to_id(run["end_token"])
