"""The recipe behind ``minipt train bert`` (and, through their hooks, the rest of the BERT
family): pre-training an encoder on the toy stories of ``data/encoder_corpus.py``, then a
report measured on held-out data.

The data: stories of the toy language (one protagonist, places in a fixed cycle, so that
sentence-pair tasks have something to learn), a WordPiece vocabulary fitted on them,
``[CLS] A [SEP] B [SEP]`` instances with dynamic 80/10/10 masking (or packed full
sentences). ``--corpus FILE`` reads BERT's own input format instead: one sentence per
line, a blank line between documents; the last tenth of the documents is held out.

The report (``report.json``, and printed):
- masked-token accuracy on held-out masked positions (every validation instance once,
  one fixed mask draw), next to the most-frequent-token baseline (always guessing the
  commonest non-special token of the training instances);
- for a model with a sentence-pair head, its accuracy on the held-out pairs next to
  chance (0.5) and the majority label's share;
- the validation loss (MLM + sentence loss, as trained).

**Reuse by the other encoders.** The model-specific part is an ``EncoderHooks``: which
corpus mode it reads (``"nsp"``, ``"sop"`` or ``"packed"``), the name of its sentence
task, and two functions, ``batches(corpus, model)`` -> ``get_batch(split, rng)`` for the
trainer, and ``evaluate(model, corpus, rng)`` -> (summary lines, metrics). The defaults
(``EncoderHooks()``) are BERT's; ``tokenizer`` replaces WordPiece (RoBERTa's byte-level
BPE), and a preset's ``position_offset`` is added to ``max_position``. RoBERTa registers
``recipe=encoder_recipe(EncoderHooks(mode="packed", sentence_task=None))``; ALBERT
``EncoderHooks(mode="sop", sentence_task="SOP")``; ELECTRA passes a ``batches`` that
masks ``corpus.unmasked(...)`` with its generator and an ``evaluate`` that scores
replaced-token detection, and may call ``mlm_metrics`` for its generator. Everything
else (run folder, presets, trainer, report file) is shared.

Run-folder rules (``run_folder.py``): a second run into a folder is refused; ``--overwrite``
replaces it; ``--resume`` continues it with the preset, steps, seed and corpus saved in
``run.json`` (another value given is refused, and the rebuilt vocabulary must equal
``tokenizer.json``); on Ctrl-C the checkpoint is saved and the report says how to continue (the
held-out evaluation runs on a finished run only).
"""
from __future__ import annotations

import functools
import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..core.module import eval_mode
from ..data.encoder_corpus import (
    EncoderCorpus,
    encode_documents,
    encoder_corpus,
    wordpiece_tokenizer,
)
from ..models.registry import Preset
from ..objectives.common import IGNORE
from ..train import TrainConfig, train
from . import with_steps
from .run_folder import (
    check_out,
    check_tokenizer,
    clear_run_files,
    run_corpus,
    run_settings,
    write_settings,
)

RUN_FILES = ("run.json", "checkpoint.npz", "tokenizer.json", "metrics.jsonl", "loss.png", "report.json")

PRESETS = {
    "toy": Preset(model=dict(n_layer=2, n_head=4, d_model=64, d_ff=256, dropout=0.1), batch_size=32,
                  train=dict(steps=600, lr=2e-3, min_lr=2e-4, warmup=60, weight_decay=0.01, eval_every=100,
                             eval_batches=8, grad_clip=1.0, betas=(0.9, 0.999)),
                  data=dict(n_docs=1000, vocab_size=250, max_length=32, n_instances={"train": 8000, "val": 600}),
                  expected="masked-token accuracy 0.390 (most-frequent-token baseline 0.111); NSP accuracy 0.497 "
                           "(chance 0.5, majority 0.502); validation loss 2.385; 600 steps, 89 s on a shared "
                           "2-core machine at load 17"),
}


def mlm_metrics(model, corpus: EncoderCorpus, rng: np.random.Generator) -> tuple[dict, list[np.ndarray]]:
    """Masked-token accuracy over every validation instance once (one mask draw from
    ``rng``) and the most-frequent-token baseline; also returns the sentence logits and
    labels of the same pass (for models with a sentence head)."""
    guess = corpus.most_frequent_token("train")
    hit = base = n = 0
    sentence = []
    with eval_mode(model):
        for batch in corpus.in_order("val", rng):
            out = model.outputs(*batch)
            chosen = batch[3] != IGNORE
            hit += int((out.logits.argmax(-1)[chosen] == batch[3][chosen]).sum())
            base += int((batch[3][chosen] == guess).sum())
            n += int(chosen.sum())
            if out.nsp_logits is not None and len(batch) == 5:
                sentence.append((out.nsp_logits.argmax(-1), batch[4]))
    return {"mlm_accuracy": hit / n, "mlm_baseline": base / n, "masked_positions": n,
            "baseline_token": corpus.tok.id_to_token(guess)}, sentence


def default_evaluate(model, corpus: EncoderCorpus, rng: np.random.Generator, task: str | None = "NSP"):
    """BERT's report: masked-token accuracy against the baseline, and the sentence-pair
    task's accuracy against chance and the majority label."""
    found, sentence = mlm_metrics(model, corpus, rng)
    lines = [f"masked-token accuracy {found['mlm_accuracy']:.3f} on {found['masked_positions']} held-out masked "
             f"positions (most-frequent-token baseline {found['mlm_baseline']:.3f}: always {found['baseline_token']!r})"]
    if task and sentence:
        pred = np.concatenate([s[0] for s in sentence])
        labels = np.concatenate([s[1] for s in sentence])
        found.update(sentence_task=task, sentence_accuracy=float((pred == labels).mean()), sentence_chance=0.5,
                     sentence_majority=float(max(labels.mean(), 1 - labels.mean())), sentence_pairs=int(len(labels)))
        lines.append(f"{task} accuracy {found['sentence_accuracy']:.3f} on {len(labels)} held-out pairs (chance 0.5, "
                     f"majority label {found['sentence_majority']:.3f})")
    return lines, found


@dataclass(frozen=True)
class EncoderHooks:
    """What differs between the encoders of the family (see the module docstring)."""
    mode: str = "nsp"
    sentence_task: str | None = "NSP"
    batches: Callable | None = None          # (corpus, model) -> get_batch; default corpus.get_batch
    evaluate: Callable | None = None         # (model, corpus, rng) -> (lines, metrics)
    tokenizer: Callable | None = None        # (documents, vocab_size) -> tokenizer; default WordPiece

    def get_batch(self, corpus, model):
        return corpus.get_batch if self.batches is None else self.batches(corpus, model)

    def report(self, model, corpus, rng):
        if self.evaluate is not None:
            return self.evaluate(model, corpus, rng)
        return default_evaluate(model, corpus, rng, self.sentence_task)


def read_documents(path) -> list[list[list[str]]]:
    """BERT's pre-training text format: one sentence per line, blank lines between
    documents -> documents of sentences of whitespace-separated words."""
    from ..data.text import load_text
    docs, current = [], []
    for line in load_text(path).splitlines():
        if line.strip():
            current.append(line.split())
        elif current:
            docs.append(current)
            current = []
    if current:
        docs.append(current)
    return docs


def build_corpus(p: Preset, hooks: EncoderHooks, corpus_file: str | None, seed: int) -> tuple[EncoderCorpus, str]:
    d = p.data
    kw = dict(mode=hooks.mode, max_length=d["max_length"], batch_size=p.batch_size, n_instances=d["n_instances"])
    if not corpus_file:
        return encoder_corpus(n_docs=d["n_docs"], vocab_size=d["vocab_size"], seed=seed,
                              fit_tokenizer=hooks.tokenizer, **kw), \
            f"{d['n_docs']} toy stories (data/encoder_corpus.py)"
    docs = read_documents(corpus_file)
    n_val = max(len(docs) // 10, 2)
    if len(docs) < 4:
        raise ValueError(f"{corpus_file} holds {len(docs)} documents (blank-line separated); pre-training needs at "
                         "least 4 (2 to train on, 2 held out)")
    tok = (hooks.tokenizer or wordpiece_tokenizer)(docs[:-n_val], d["vocab_size"])
    split = {"train": encode_documents(docs[:-n_val], tok), "val": encode_documents(docs[-n_val:], tok)}
    return EncoderCorpus(split, tok, seed=seed, **kw), f"{corpus_file} ({len(docs)} documents)"


def train_encoder(entry, preset: str | None = None, *, hooks: EncoderHooks = EncoderHooks(), corpus: str | None = None,
                  steps: int | None = None, out_dir: str = "runs/bert", seed: int | None = None, resume: bool = False,
                  overwrite: bool = False, progress: bool = True) -> dict:
    out = Path(out_dir)
    check_out(out, RUN_FILES, resume=resume, overwrite=overwrite)
    preset, steps, seed = run_settings(entry, out, resume, preset, steps, seed)
    if preset not in entry.presets:
        raise ValueError(f"unknown preset {preset!r} for {entry.name}; choose one of {sorted(entry.presets)}")
    p = entry.presets[preset]
    corpus = run_corpus(out, resume, corpus)
    data, source = build_corpus(p, hooks, corpus, seed)
    if resume:
        check_tokenizer(out, data.tok)
    model = entry.build(rng=np.random.default_rng(seed), vocab_size=data.vocab_size,   # RoBERTa: + its offset
                        max_position=data.max_length + p.model.get("position_offset", 0), **p.model)
    if overwrite and not resume:
        clear_run_files(out, RUN_FILES)
    out.mkdir(parents=True, exist_ok=True)
    if not resume:
        data.tok.save(out / "tokenizer.json")
        write_settings(entry, out, preset, steps, seed, corpus=corpus)
    tc = TrainConfig(**with_steps(p.train, steps), seed=seed, out_dir=str(out), progress=progress)
    if progress:
        print(f"minipt train {entry.name}: {entry.title}, preset {preset}, {model.num_parameters():,} parameters, "
              f"{source}, WordPiece vocabulary {data.vocab_size}, {hooks.mode} instances of at most "
              f"{data.max_length} tokens, batch {p.batch_size}")
    result = train(model, hooks.get_batch(data, model), tc, model_config=model.spec(), resume=resume)
    val = f"{result.val_loss:.3f}" if result.val_loss is not None else "not evaluated"
    summary = [f"pre-trained {result.step} steps in {result.seconds:.0f}s: training loss {result.train_loss:.3f}, "
               f"validation loss {val} ({entry.objective})"]
    report = {"model": entry.name, "preset": preset, "steps": result.step, "total_steps": tc.steps,
              "train_loss": result.train_loss, "val_loss": result.val_loss, "seconds": round(result.seconds, 1),
              "interrupted": result.interrupted}
    if result.interrupted:
        report["resume_command"] = f"minipt train {entry.name} --out {shlex.quote(str(out))} --resume"
    else:
        lines, found = hooks.report(model, data, np.random.default_rng(seed + 1))
        summary += lines
        report.update(found)
    report["summary"] = summary
    (out / "report.json").write_text(json.dumps(report, indent=2))
    report["files"] = [str(q) for q in (out / "run.json", result.checkpoint, out / "tokenizer.json",
                                         out / "metrics.jsonl", result.plot, out / "report.json") if q is not None]
    return report


def encoder_recipe(hooks: EncoderHooks = EncoderHooks()) -> Callable[..., dict]:
    """The registry's ``recipe`` for an encoder with these hooks."""
    return functools.partial(train_encoder, hooks=hooks)
