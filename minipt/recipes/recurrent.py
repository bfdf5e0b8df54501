"""Recipes behind ``minipt train lstm`` and ``minipt train elmo``.

- ``lstm``: a character-level LSTM LM on the toy language (or ``--corpus FILE``), the
  same data and oracle as ``minipt train gpt``: the validation loss is printed next to
  the oracle loss of the validation text.
- ``elmo``: the biLM on the toy language at word level (``toy_word_stream``); each
  direction's validation loss and perplexity is printed next to the oracle's. The
  oracle's entropy per word is the same for both factorisations of a long stream
  (P(w_1..w_N) does not depend on the order it is expanded in), so one oracle serves both.

The run folder (``run_folder.py``'s rules) holds ``run.json``: preset, steps, seed and
corpus, which a ``--resume`` takes and may not change; the tokenizer it rebuilds must
equal the saved ``tokenizer.json``.
"""
from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

import numpy as np

from ..core.module import eval_mode
from ..data.batching import TokenStream
from ..train import TrainConfig, train
from . import run_folder, with_steps

RUN_FILES = ("run.json", "checkpoint.npz", "tokenizer.json", "metrics.jsonl", "loss.png", "report.json")


def recipe(entry, preset: str | None = None, *, corpus: str | None = None, steps: int | None = None,
           out_dir: str = "runs/lstm", seed: int | None = None, resume: bool = False, overwrite: bool = False,
           progress: bool = True) -> dict:
    out = Path(out_dir)
    run_folder.check_out(out, RUN_FILES, resume=resume, overwrite=overwrite)
    preset, steps, seed = run_folder.run_settings(entry, out, resume, preset, steps, seed)
    corpus = run_folder.run_corpus(out, resume, corpus)
    if preset not in entry.presets:
        raise ValueError(f"unknown preset {preset!r} for {entry.name}; choose one of {sorted(entry.presets)}")
    p = entry.presets[preset]
    tc = TrainConfig(**with_steps(p.train, steps), seed=seed, out_dir=str(out), progress=progress)
    if entry.name == "elmo":
        if corpus:
            raise ValueError("minipt train elmo trains on the toy language's words only; --corpus is not supported")
        from ..data.toy_words import toy_word_stream, word_tokenizer
        tok = word_tokenizer()
        data, oracle = toy_word_stream(p.data["n_words"], p.data["block_size"], p.batch_size, seed)
        vocab = [tok.decode([i]) for i in range(tok.vocab_size)]
        model = entry.build(rng=np.random.default_rng(seed), vocab=vocab, **p.model)
        unit, source = "word", "the toy language (words)"
    else:
        from ..data.text import char_corpus
        from ..tokenizers.char import CharTokenizer
        train_text, val_text, oracle, source = char_corpus(corpus, p.data.get("n_tokens"), p.data["block_size"],
                                                           seed)
        tok = CharTokenizer().fit(train_text + val_text)
        data = TokenStream(tok.encode_array(train_text), tok.encode_array(val_text), p.data["block_size"],
                           p.batch_size)
        model = entry.build(rng=np.random.default_rng(seed), vocab_size=tok.vocab_size, **p.model)
        unit = "char"
    if resume:                        # a resumed run keeps the tokenizer it was trained with
        run_folder.check_tokenizer(out, tok)
    else:
        if overwrite:                 # every check has passed: replace the old run's files only
            run_folder.clear_run_files(out, RUN_FILES)
        out.mkdir(parents=True, exist_ok=True)
        tok.save(out / "tokenizer.json")
        run_folder.write_settings(entry, out, preset, steps, seed, corpus=corpus)
    if progress:
        print(f"minipt train {entry.name}: {entry.title}, preset {preset}, {model.num_parameters():,} parameters, "
              f"{source}, vocabulary {tok.vocab_size}")
    result = train(model, data.get_batch, tc, model_config=model.spec(), resume=resume)
    report = {"model": entry.name, "preset": preset, "steps": result.step, "train_loss": result.train_loss,
              "val_loss": result.val_loss, "oracle_loss": oracle, "seconds": round(result.seconds, 1),
              "checkpoint": str(result.checkpoint), "plot": str(result.plot), "interrupted": result.interrupted,
              "total_steps": tc.steps}
    if result.interrupted:
        report["resume_command"] = f"minipt train {entry.name} --out {shlex.quote(str(out))} --resume"
    val = f"{result.val_loss:.4f}" if result.val_loss is not None else "not evaluated"
    gap = f"; oracle {oracle:.4f} (gap {result.val_loss - oracle:+.4f})" if oracle is not None and \
        result.val_loss is not None else ""
    summary = [f"validation loss {val} nats/{unit} after {result.step} steps ({result.seconds:.0f}s){gap}"]
    if entry.name == "elmo":
        rng = np.random.default_rng(seed + 1)
        fwd, bwd = [], []
        with eval_mode(model):
            for _ in range(tc.eval_batches):
                model(*data.get_batch("val", rng))
                fwd.append(model.direction_loss[0])
                bwd.append(model.direction_loss[1])
        f, b = float(np.mean(fwd)), float(np.mean(bwd))
        report.update(forward_loss=f, backward_loss=b)
        summary.append(f"forward LM {f:.4f} nats/word (perplexity {math.exp(f):.2f}), backward LM {b:.4f} "
                       f"(perplexity {math.exp(b):.2f}); oracle {oracle:.4f} (perplexity {math.exp(oracle):.2f})")
    else:
        from ..inference.decoding import SamplingConfig, generate
        prompt = data.splits["val"][:16]
        sample = generate(model, prompt, SamplingConfig(max_new_tokens=120, temperature=0.8, top_k=20),
                          np.random.default_rng(seed))
        report["sample"] = tok.decode(prompt) + tok.decode(sample)
        summary.append(f"sample: {report['sample']!r}")
    report["summary"] = summary
    (out / "report.json").write_text(json.dumps(report, indent=2))
    report["files"] = [str(q) for q in (out / "run.json", result.checkpoint, out / "tokenizer.json", out / "metrics.jsonl",
                                         result.plot, out / "report.json") if q is not None]
    return report
