"""The toy tasks as text-to-text pairs with task prefixes (Raffel et al. 2020, T5, Sec. 2.4:
"translate English to German: ...", "summarize: ...", "sst2 sentence: ..." answered by
a word, "stsb sentence1: ... sentence2: ..." answered by a number written as text).

Every example is ``{"task", "input", "target"}``:

- ``translate toy: <sentence>`` -> the sentence in the invented toy language
  (``toy_text_tasks.translation``);
- ``summarize: <2-3 sentences>`` -> the same without adjectives and place phrases
  (``toy_text_tasks.compression``);
- ``sentiment: <sentence>`` -> ``positive`` or ``negative`` (``toy_tasks.sentiment``);
- ``similarity sentence1: <a> sentence2: <b>`` -> how much of who-did-what-to-what-where
  the two share on T5's STS-B scale: 5 * (shared core words) / (core words), rounded to
  the nearest 0.2 and written with one decimal ("5.0", "3.8", ...). The pairs are drawn
  as in ``toy_tasks.similarity`` (same core, modifiers varied; or one content word swapped).

A **mixture** samples a training stream over the tasks with T5's rates (Sec. 3.5.2):
examples-proportional with an artificial limit K, r_m = min(e_m, K) / sum_n min(e_n, K),
optionally temperature-scaled (r_m^(1/T), renormalised); ``equal`` gives each task 1/M.

**Scoring** (``score``): exact match of the answer's words for every task (accuracy
for sentiment, whose answer is one word). Answers are compared word by word after the
tokenizer's split, so "3.8" and "3 . 8" are the same answer.

**An unknown prefix** is not an error: ``task_of`` returns None for it, the tokenizer
encodes its words (unseen words become ``<unk>``) and a trained model answers whatever
it has learnt to answer for the nearest thing it has seen; there is no reference to
score it against, so ``score`` refuses it by name and ``minipt generate`` prints a note.
"""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from ..models.protocol import IGNORE
from ..tokenizers.special import BOS, EOS, PAD
from ..tokenizers.word import WordTokenizer, split_words
from .toy_tasks import (
    DEFAULT_SIZES,
    TaskData,
    core,
    make_splits,
    sentence,
    sentiment,
    swap_content_word,
    text,
    vary_modifiers,
)
from .toy_text_tasks import compression, translation

PREFIXES = {"translate": "translate toy:", "summarize": "summarize:", "sentiment": "sentiment:",
            "similarity": "similarity sentence1:"}
METRICS = {"translate": "exact match", "summarize": "exact match", "sentiment": "accuracy",
           "similarity": "exact match"}
TASKS = tuple(PREFIXES)
UNK = "<unk>"


def similarity_score(a_core: Sequence[str], b_core: Sequence[str]) -> str:
    """5 * shared / len(a_core) (position by position), to the nearest 0.2, as text."""
    shared = sum(x == y for x, y in zip(a_core, b_core))
    steps = int(np.floor(25 * shared / len(a_core) + 0.5))                 # units of 0.2
    return f"{steps / 5:.1f}"


def graded_similarity(sizes=DEFAULT_SIZES, seed: int = 0) -> TaskData:
    """{"a", "b", "score"}: pairs as in ``toy_tasks.similarity``, scored on 0-5 as text."""
    def draw(rng):
        words, states = sentence(rng)
        different = bool(rng.integers(2))
        while True:
            b, b_states = vary_modifiers(words, states, rng)
            if different:
                b = swap_content_word(b, b_states, rng)
            if b != words:
                return {"a": text(words), "b": text(b),
                        "score": similarity_score(core(words, states), core(b, b_states))}
    return make_splits("graded_similarity", draw, lambda e: (e["a"], e["b"]), sizes, seed)


def _pairs(task: str, data: TaskData) -> dict[str, list[dict]]:
    p = PREFIXES[task]
    if task == "sentiment":
        make = lambda e: (f"{p} {e['text']}", data.labels[e["label"]])
    elif task == "similarity":
        make = lambda e: (f"{p} {e['a']} sentence2: {e['b']}", e["score"])
    else:
        make = lambda e: (f"{p} {e['source']}", e["target"])
    return {split: [dict(zip(("task", "input", "target"), (task, *make(e)))) for e in data.split(split)]
            for split in ("train", "val", "test")}


def text_to_text(sizes=DEFAULT_SIZES, seed: int = 0, tasks: Sequence[str] = TASKS) -> dict[str, dict[str, list[dict]]]:
    """{task: {"train"|"val"|"test": [{"task", "input", "target"}, ...]}}, each split disjoint."""
    unknown = [t for t in tasks if t not in PREFIXES]
    if unknown or not tasks:
        raise ValueError(f"unknown text-to-text task(s) {unknown or '(none given)'}; choose from {list(TASKS)}")
    makers = {"translate": translation, "summarize": compression, "sentiment": sentiment,
              "similarity": graded_similarity}
    return {t: _pairs(t, makers[t](sizes, seed + i)) for i, t in enumerate(tasks)}


def task_of(prompt: str) -> str | None:
    """The task whose prefix starts ``prompt``, or None for an unknown prefix (see above)."""
    for task, p in PREFIXES.items():
        if prompt.startswith(p + " ") or prompt == p:
            return task
    return None


def plain_text(prompt: str) -> str:
    """A prompt without its task prefix and field names (the text a pre-training objective
    corrupts): "similarity sentence1: a . sentence2: b ." -> "a . b ."."""
    task = task_of(prompt)
    body = prompt[len(PREFIXES[task]):] if task else prompt
    return " ".join(w for w in body.split() if w != "sentence2:")


def mixture_rates(sizes: dict[str, int], limit: int | None = None, temperature: float = 1.0,
                  equal: bool = False) -> dict[str, float]:
    """T5's mixing rates: examples-proportional with limit K (None: no limit), then
    temperature-scaled; or equal."""
    if not sizes or any(n < 1 for n in sizes.values()):
        raise ValueError(f"every task of a mixture needs at least one example, got sizes {sizes}")
    if temperature <= 0 or (limit is not None and limit < 1):
        raise ValueError(f"temperature must be > 0 and limit >= 1, got {temperature} and {limit}")
    r = np.array([1.0 if equal else min(n, limit or n) for n in sizes.values()]) ** (1.0 / temperature)
    return dict(zip(sizes, (r / r.sum()).tolist()))


class Mixture:
    """Samples training pairs: a task by its rate, then one of its examples uniformly."""

    def __init__(self, pairs: dict[str, list[dict]], limit: int | None = None, temperature: float = 1.0,
                 equal: bool = False):
        self.pairs = pairs
        self.rates = mixture_rates({t: len(p) for t, p in pairs.items()}, limit, temperature, equal)
        self.tasks, self.p = list(self.rates), np.array(list(self.rates.values()))

    def sample(self, n: int, rng: np.random.Generator) -> list[dict]:
        which = rng.choice(len(self.tasks), size=n, p=self.p)
        return [self.pairs[self.tasks[k]][int(rng.integers(len(self.pairs[self.tasks[k]])))] for k in which]


def build_tokenizer(data: dict[str, dict[str, list[dict]]], extra_specials: Sequence[str] = ()) -> WordTokenizer:
    """A word tokenizer over every input and target (the toy vocabulary is closed, so all
    splits are read: nothing about the answers is learnt from it). Specials: PAD (id 0),
    ``<s>`` (the decoder's start), ``</s>`` (end of target), ``<unk>``, then ``extra_specials``
    (T5's sentinels)."""
    words = " ".join(f"{e['input']} {e['target']}" for task in data.values() for split in task.values()
                     for e in split)
    tok = WordTokenizer(specials=(PAD, BOS, EOS, *extra_specials), unk_token=UNK).fit(words)
    return tok


def _padded(rows: list[list[int]], fill: int) -> np.ndarray:
    out = np.full((len(rows), max(map(len, rows))), fill, dtype=np.int64)    # (B, longest)
    for b, r in enumerate(rows):
        out[b, :len(r)] = r
    return out


def encode_sources(tok: WordTokenizer, inputs: Sequence[str], max_source_len: int) -> np.ndarray:
    """Prompts -> source (B, S) ids, padded with PAD on the right (what ``generate`` and the
    held-out scoring feed the encoder). Empty or too long: ValueError."""
    if not inputs:
        raise ValueError("no inputs given")
    rows = [tok.encode(x) for x in inputs]
    for x, r in zip(inputs, rows):
        if not r:
            raise ValueError(f"an empty input: {x!r}")
        if len(r) > max_source_len:
            raise ValueError(f"input too long: {len(r)} tokens (max {max_source_len}): {x[:60]!r}")
    return _padded(rows, tok.token_to_id(PAD))


def encode_pairs(tok: WordTokenizer, pairs: Sequence[dict], max_source_len: int, max_target_len: int):
    """-> source (B, S) as ``encode_sources``; target_in (B, T) = <s> y_1 .. y_n, padded with
    PAD; targets (B, T) = y_1 .. y_n </s>, IGNORE at padding. Too long or empty: ValueError."""
    if not pairs:
        raise ValueError("encode_pairs: no pairs given")
    source = encode_sources(tok, [e["input"] for e in pairs], max_source_len)   # (B, S)
    bos, eos = tok.token_to_id(BOS), tok.token_to_id(EOS)
    tgts = [tok.encode(e["target"]) for e in pairs]
    for e, t in zip(pairs, tgts):
        if not t:
            raise ValueError(f"an empty target in pair {e!r}")
        if len(t) + 1 > max_target_len:
            raise ValueError(f"target too long: {len(t)} tokens + </s> (max {max_target_len}): {e['target'][:60]!r}")
    target_in = _padded([[bos, *t] for t in tgts], tok.token_to_id(PAD))       # (B, T)
    targets = _padded([[*t, eos] for t in tgts], IGNORE)                       # (B, T)
    return source, target_in, targets


def answer_text(tok: WordTokenizer, ids: Sequence[int]) -> str:
    """Decoded answer ids as text, numbers rejoined ("3 . 4" -> "3.4"; the word tokenizer
    splits "3.4" into three words and decodes with spaces)."""
    return re.sub(r"(?<=\d) \. (?=\d)", ".", tok.decode(list(ids)))


def answer_words(answer: str) -> list[str]:
    """An answer as the tokenizer's words (how answers are compared)."""
    return split_words(answer)


def score(task: str, predictions: Sequence[str], references: Sequence[str]) -> float:
    """Exact match (accuracy for a one-word answer) of predictions against references."""
    if task not in METRICS:
        raise ValueError(f"no scorer for task {task!r} (an unknown prefix has no reference answers); "
                         f"scored tasks: {list(METRICS)}")
    if len(predictions) != len(references) or not references:
        raise ValueError(f"score: {len(predictions)} predictions for {len(references)} references")
    return float(np.mean([answer_words(p) == answer_words(r) for p, r in zip(predictions, references)]))
