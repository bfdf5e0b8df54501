"""Recipes behind ``minipt train ngram | nnlm | word2vec | glove``.

All four read the toy language at word level (``minipt.data.hmm_language``): a training
stream and an independent validation stream of a tenth of its size. The LMs are scored on
the whole validation stream, every word predicted after a document end (the state the
language starts in), and reported next to the oracle (the HMM's exact -log P per word, by
the forward algorithm) on the same words, in nats, bits per word and perplexity. The
vector models are scored against the language's analogies and categories, next to the
count-vector baseline (PPMI + SVD on the same words). ``corpus`` replaces the toy language
by a whitespace-tokenised text file (last tenth for validation; no oracle).
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np

from ..data.hmm_language import HMMLanguage
from ..data.toy_grammar import END_WORD
from ..models.classic.ngram import NGramVocab
from . import run_folder, with_steps

NL = "<nl>"          # the document end as a word (the toy language writes it as a newline)


def word_splits(n_words: int, corpus: str | None, seed: int) -> tuple[list[str], list[str], float | None, str]:
    """(train words, validation words, oracle nats/word of the validation words or None, source)."""
    if corpus:
        from ..data.text import load_text
        lines = load_text(corpus).split("\n")
        words = [w for line in lines for w in line.split() + [NL]]
        cut = len(words) - max(len(words) // 10, 1)
        if cut < 2:
            raise ValueError(f"{corpus} has {len(words)} words; training needs at least 3")
        return words[:cut], words[cut:], None, corpus
    lang, rng = HMMLanguage.build(), np.random.default_rng(seed)
    train, val = lang.sample_words(n_words, rng), lang.sample_words(max(n_words // 10, 1), rng)
    oracle = -lang.log_prob(val) / len(val)
    as_words = lambda ws: [NL if w == END_WORD else w for w in ws]
    return as_words(train), as_words(val), oracle, f"the toy HMM language ({len(train):,} training words)"


def documents(ids: np.ndarray, nl: int) -> list[np.ndarray]:
    """Split a stream at the document ends (each document keeps its end token)."""
    cuts = np.flatnonzero(ids == nl) + 1
    return [d for d in np.split(ids, cuts) if len(d)]


def result_lines(name: str, nats: float, oracle: float | None) -> list[str]:
    line = (f"{name}: validation {nats:.3f} nats/word, {nats / math.log(2):.3f} bits/word, "
            f"perplexity {math.exp(nats):.2f}")
    if oracle is None:
        return [line]
    return [line, f"oracle (the toy language's exact probability of the same words): {oracle:.3f} nats/word, "
                  f"{oracle / math.log(2):.3f} bits/word, perplexity {math.exp(oracle):.2f}; "
                  f"gap {nats - oracle:+.3f} nats/word"]


def stream_nats(model, val: np.ndarray, first: int) -> float:
    """Mean -log P per word of the whole validation stream, the first word after ``first``."""
    idx = np.concatenate([[first], val[:-1]])[None, :]                      # (1, T)
    return -model.log_prob(idx, val[None, :]) / len(val)


def word_tokenizer(vocab: NGramVocab):
    """A ``WordTokenizer`` giving every word of ``vocab`` its id there (what ``minipt
    sample`` reads from a run's ``tokenizer.json``)."""
    from ..tokenizers.word import WordTokenizer
    tok = WordTokenizer(specials=vocab.words[:3], unk_token=vocab.UNK)
    tok._build_vocab(vocab.words[3:])
    if tok.vocab_size != len(vocab) or tok.token_to_id(vocab.words[-1]) != len(vocab) - 1:
        raise AssertionError("the word tokenizer's ids differ from the vocabulary's")
    return tok


def _settings(entry, preset: str) -> tuple:
    if preset not in entry.presets:
        raise ValueError(f"unknown preset {preset!r} for {entry.name}; choose one of {sorted(entry.presets)}")
    p = entry.presets[preset]
    return p, dict(p.model), dict(p.train), dict(p.data)


def _write(out_dir: str, report: dict) -> tuple[Path, Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "report.json"
    path.write_text(json.dumps(report, indent=2))
    return out, path


LM_FILES = ("run.json", "tokenizer.json", "checkpoint.npz", "metrics.jsonl", "loss.png", "report.json")
VECTOR_FILES = ("vectors.npz", "report.json")


def lm_recipe(entry, preset: str | None = None, *, corpus: str | None = None, steps: int | None = None,
              out_dir: str = "runs/lm", seed: int | None = None, resume: bool = False, overwrite: bool = False,
              progress: bool = True) -> dict:
    """The n-gram (counted) or the NNLM (trained by ``minipt.train``), scored against the oracle."""
    out = Path(out_dir)
    run_folder.check_out(out, LM_FILES, resume=resume, overwrite=overwrite, can_resume=entry.has_backward)
    preset, steps, seed = run_folder.run_settings(entry, out, resume, preset, steps, seed)
    corpus = run_folder.run_corpus(out, resume, corpus)     # the NNLM's saved settings; a resume keeps them
    p, model_kw, train_kw, data = _settings(entry, preset)
    train_w, val_w, oracle, source = word_splits(data.get("n_words", 200_000), corpus, seed)
    vocab = NGramVocab([train_w], min_count=data.get("min_count", 1))
    train_ids, val_ids = vocab.encode(train_w), vocab.encode(val_w)
    nl = vocab.index.get(NL, vocab.index[vocab.EOS])
    if overwrite:                                            # every check has passed: replace the old files
        run_folder.clear_run_files(out, LM_FILES)
    if not resume:
        out.mkdir(parents=True, exist_ok=True)
        run_folder.write_settings(entry, out, preset, steps, seed, corpus=corpus)
    files, t0 = [str(out / "run.json")], time.perf_counter()
    if entry.name == "ngram":
        model = entry.build(vocab_size=len(vocab), **model_kw).fit(train_ids)
    else:
        from ..data.batching import TokenStream
        from ..train import TrainConfig, train
        model = entry.build(rng=np.random.default_rng(seed), vocab_size=len(vocab), pad_id=nl, **model_kw)
        word_tokenizer(vocab).save(out / "tokenizer.json")
        files.append(str(out / "tokenizer.json"))
        stream = TokenStream(train_ids, val_ids, data["block_size"], p.batch_size)
        train_kw = with_steps(train_kw, steps)
        if progress:
            print(f"minipt train {entry.name}: {model.num_parameters():,} parameters, {source}, "
                  f"vocabulary {len(vocab)}")
        result = train(model, stream.get_batch, TrainConfig(**train_kw, seed=seed, out_dir=str(out),
                                                            progress=progress),
                       model_config=model.spec(), resume=resume)
        files += [str(f) for f in (result.checkpoint, result.plot) if f]
    seconds = time.perf_counter() - t0
    nats = stream_nats(model, val_ids, nl)
    summary = result_lines(f"{entry.title} ({preset})", nats, oracle) + [f"time {seconds:.1f} s"]
    report = {"model": model.spec(), "preset": preset, "val_nats_per_word": nats, "oracle_nats_per_word": oracle,
              "val_words": len(val_ids), "seconds": seconds, "source": source, "summary": summary}
    _, path = _write(out_dir, report)
    return {**report, "files": files + [str(path)]}


def vectors_recipe(entry, preset: str | None = None, *, corpus: str | None = None, steps: int | None = None,
                   out_dir: str = "runs/vectors", seed: int | None = None, resume: bool = False,
                   overwrite: bool = False, progress: bool = True) -> dict:
    """word2vec or GloVe on the training words, scored on analogies and categories."""
    from ..tasks.word_vectors import StaticVectors, evaluate, ppmi_svd
    preset, seed = preset or "toy", 0 if seed is None else seed
    run_folder.check_out(Path(out_dir), VECTOR_FILES, resume=resume, overwrite=overwrite, can_resume=False)
    p, model_kw, train_kw, data = _settings(entry, preset)
    if overwrite:
        run_folder.clear_run_files(Path(out_dir), VECTOR_FILES)
    train_w, _, _, source = word_splits(data.get("n_words", 300_000), corpus, seed)
    vocab = sorted(set(train_w))
    index = {w: i for i, w in enumerate(vocab)}
    ids = np.array([index[w] for w in train_w], dtype=np.int64)
    docs = documents(ids, index.get(NL, -1))
    counts = np.bincount(ids, minlength=len(vocab))
    rng = np.random.default_rng(seed)
    epochs = steps if steps is not None else train_kw.get("epochs", 1)
    t0 = time.perf_counter()
    if entry.name == "word2vec":
        model = entry.build(rng=rng, vocab_size=len(vocab), counts=counts, **model_kw)
        stats = model.fit(docs, epochs=epochs, rng=rng, progress=progress)
        extra = f"{stats['words_per_second']:,.0f} words/s"
    else:
        from ..models.classic.glove import cooccurrence
        model = entry.build(rng=rng, vocab_size=len(vocab), **model_kw)
        i, j, x = cooccurrence(docs, len(vocab), window=data.get("window", 5))
        history = model.fit(i, j, x, epochs=epochs, lr=train_kw.get("lr", 0.05), batch_size=p.batch_size,
                            rng=rng, progress=progress)
        extra = f"{len(x):,} non-zero co-occurrences, final J/N {history[-1]:.4f}"
    seconds = time.perf_counter() - t0
    vectors = model.vectors()
    scores = evaluate(vectors, vocab)
    base = evaluate(ppmi_svd(docs, len(vocab), window=2, dim=min(20, len(vocab))), vocab)
    sv = StaticVectors(vectors, vocab)
    summary = [f"{entry.title} ({preset}): analogies {scores['analogy']:.2f} of {scores['asked']} "
               f"(PPMI+SVD baseline {base['analogy']:.2f}; chance {1 / (len(vocab) - 3):.3f}), category gap "
               f"{scores['category_gap']:.2f} (baseline {base['category_gap']:.2f}), neighbour purity "
               f"{scores['purity']:.2f} (baseline {base['purity']:.2f})",
               f"trained on {source} in {seconds:.1f} s ({extra})"]
    for w in ("king", "bread", "river"):
        if w in sv.index:
            summary.append(f"nearest to {w!r}: " + ", ".join(f"{n} {s:.2f}" for n, s in sv.nearest(w, 4)))
    out, path = _write(out_dir, {"model": model.spec() | {"counts": None}, "preset": preset, "scores": scores,
                                 "baseline": base, "seconds": seconds, "summary": summary})
    np.savez(out / "vectors.npz", vectors=vectors, vocab=np.array(vocab))
    return {"summary": summary, "scores": scores, "baseline": base, "seconds": seconds,
            "files": [str(path), str(out / "vectors.npz")]}
