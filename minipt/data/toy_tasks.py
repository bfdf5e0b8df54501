"""Fine-tuning and zero/few-shot tasks generated from the toy language, with known answers.

Every task draws sentences from the toy HMM (``hmm_language``, ``toy_grammar``) and
labels them by a rule, so the right answer is never in doubt:

- ``sentiment``: single-sentence classification; the label is the polarity of the
  sentence's sentiment adjectives (sentences with none, or with both kinds, are skipped).
- ``entailment``: premise / hypothesis; the hypothesis drops the premise's modifiers
  (entailed) or also swaps one content word (not entailed), as in GPT-1's entailment
  transformation (Radford et al. 2018).
- ``similarity``: a pair is similar when both say who did what to what (same subject,
  verb, object, place), whatever their determiners and adjectives; symmetric, so
  GPT-1's "both orders" trick applies.
- ``multiple_choice``: a sentence cut after its verb and four endings, exactly one of
  which the grammar allows (the oracle gives the others probability 0: wrong gender of
  "his"/"her", an object after an intransitive verb, ...).
- ``span_qa``: a short document and "who <predicate> ?"; the answer is the subject's
  span, unique in the document (SQuAD-style extraction).
- ``tagging``: per-word tags from the generator's own states, plus each word's sense.

Text-to-text pairs and dialogue sessions are in ``toy_text_tasks``. Every task returns
train / validation / test splits with no example shared between them, from one seed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

import numpy as np

from .hmm_language import HMMLanguage
from .toy_grammar import (
    ADJECTIVE_STATES,
    NEGATIVE,
    NOUN_STATES,
    POSITIVE,
    SENSES,
    STATES,
    TAGS,
)

Example = dict
Sentence = tuple[list[str], list[str]]        # (words, states)


@dataclass
class TaskData:
    """One task's examples in three disjoint splits."""
    name: str
    train: list[Example]
    val: list[Example]
    test: list[Example]
    labels: list[str] = field(default_factory=list)     # class names, where the task has classes

    def split(self, name: str) -> list[Example]:
        if name not in ("train", "val", "test"):
            raise KeyError(f"split must be 'train', 'val' or 'test', got {name!r}")
        return getattr(self, name)


@lru_cache(maxsize=1)
def language() -> HMMLanguage:
    return HMMLanguage.build()


def make_splits(name: str, draw: Callable[[np.random.Generator], Example], key: Callable[[Example], object],
                sizes: tuple[int, int, int], seed: int, labels: list[str] | None = None) -> TaskData:
    """Draw distinct examples (by ``key``) until train + val + test are filled."""
    if len(sizes) != 3 or any(int(n) < 0 for n in sizes) or sum(sizes) < 1:
        raise ValueError(f"sizes must be three counts (train, val, test) with a positive total, got {sizes}")
    total = sum(sizes)
    rng = np.random.default_rng(seed)
    seen: set = set()
    examples: list[Example] = []
    for _ in range(50 * total + 1000):
        ex = draw(rng)
        k = key(ex)
        if k not in seen:
            seen.add(k)
            examples.append(ex)
            if len(examples) == total:
                a, b = sizes[0], sizes[0] + sizes[1]
                return TaskData(name, examples[:a], examples[a:b], examples[b:], labels or [])
    raise ValueError(f"{name}: only {len(examples)} distinct examples found for the {total} asked; ask for fewer")


# -- sentence surgery ------------------------------------------------------------------
def sentence(rng: np.random.Generator) -> Sentence:
    return language().sample_sentence(rng)


def text(words: list[str]) -> str:
    return " ".join(words)


def is_verb(state: str) -> bool:
    return state.startswith("verb")


def verb_index(states: list[str]) -> int:
    return next(i for i, s in enumerate(states) if is_verb(s))


def core(words: list[str], states: list[str]) -> tuple[str, ...]:
    """Who did what to what, where: the nouns and the verb, without determiners or adjectives."""
    return tuple(w for w, s in zip(words, states) if s in NOUN_STATES or is_verb(s))


def reduce(words: list[str], states: list[str]) -> Sentence:
    """Drop adjectives and the place phrase: "the old cat eats a fish near the river ." ->
    "the cat eats a fish ."."""
    keep = [i for i, s in enumerate(states) if s not in ADJECTIVE_STATES and s not in ("prep", "det_p", "place")]
    return [words[i] for i in keep], [states[i] for i in keep]


def swap_content_word(words: list[str], states: list[str], rng: np.random.Generator) -> list[str]:
    """Replace one noun or verb by another word of the same state (grammar kept, meaning changed)."""
    slots = [i for i, s in enumerate(states) if s in NOUN_STATES or is_verb(s)]
    i = slots[int(rng.integers(len(slots)))]
    others = [w for w in STATES[states[i]] if w != words[i]]
    out = list(words)
    out[i] = others[int(rng.integers(len(others)))]
    return out


def vary_modifiers(words: list[str], states: list[str], rng: np.random.Generator) -> Sentence:
    """Redraw determiners and drop or redraw adjectives; the core is untouched."""
    out, out_states = [], []
    for w, s in zip(words, states):
        if s.startswith("det") or (s in ADJECTIVE_STATES and rng.random() < 0.5):
            w = STATES[s][int(rng.integers(len(STATES[s])))]
        elif s in ADJECTIVE_STATES:
            continue
        out.append(w)
        out_states.append(s)
    return out, out_states


# -- the tasks ---------------------------------------------------------------------------
DEFAULT_SIZES = (1000, 200, 200)


def sentiment(sizes=DEFAULT_SIZES, seed: int = 0, lang: HMMLanguage | None = None) -> TaskData:
    """{"text", "label"}: 1 if the sentence's sentiment adjectives are positive, 0 if negative.
    ``lang``: another generator of the same grammar (a domain of ``toy_domains``)."""
    def draw(rng):
        want = int(rng.integers(2))
        while True:
            words, _ = sentence(rng) if lang is None else lang.sample_sentence(rng)
            pos, neg = any(w in POSITIVE for w in words), any(w in NEGATIVE for w in words)
            if pos != neg and int(pos) == want:
                return {"text": text(words), "label": want}
    return make_splits("sentiment", draw, lambda e: e["text"], sizes, seed, ["negative", "positive"])


def entailment(sizes=DEFAULT_SIZES, seed: int = 0) -> TaskData:
    """{"premise", "hypothesis", "label"}: 0 entailment, 1 not entailed."""
    def draw(rng):
        while True:
            words, states = sentence(rng)
            short, short_states = reduce(words, states)
            if short != words:
                break
        label = int(rng.integers(2))
        hyp = swap_content_word(short, short_states, rng) if label else short
        return {"premise": text(words), "hypothesis": text(hyp), "label": label}
    return make_splits("entailment", draw, lambda e: (e["premise"], e["hypothesis"]), sizes, seed,
                       ["entailment", "not_entailment"])


def similarity(sizes=DEFAULT_SIZES, seed: int = 0) -> TaskData:
    """{"a", "b", "label"}: 1 when a and b share their core (subject, verb, object, place)."""
    def draw(rng):
        words, states = sentence(rng)
        label = int(rng.integers(2))
        while True:
            b, b_states = vary_modifiers(words, states, rng)
            if label == 0:
                b = swap_content_word(b, b_states, rng)
            if b != words:
                return {"a": text(words), "b": text(b), "label": label}
    return make_splits("similarity", draw, lambda e: (e["a"], e["b"]), sizes, seed, ["different", "similar"])


def multiple_choice(sizes=DEFAULT_SIZES, seed: int = 0, n_choices: int = 4) -> TaskData:
    """{"context", "choices", "label"}: the one ending the grammar allows after the context."""
    if n_choices < 2:
        raise ValueError(f"n_choices must be >= 2, got {n_choices}")
    lang = language()

    def draw(rng):
        words, states = sentence(rng)
        cut = verb_index(states) + 1
        context, answer = words[:cut], words[cut:]
        wrong: list[list[str]] = []
        while len(wrong) < n_choices - 1:
            other, other_states = sentence(rng)
            ending = other[verb_index(other_states) + 1:]
            if ending != answer and ending not in wrong and lang.log_prob(context + ending) == -np.inf:
                wrong.append(ending)
        label = int(rng.integers(n_choices))
        choices = wrong[:label] + [answer] + wrong[label:]
        return {"context": text(context), "choices": [text(c) for c in choices], "label": label}
    return make_splits("multiple_choice", draw, lambda e: (e["context"], *e["choices"]), sizes, seed)


def span_qa(sizes=DEFAULT_SIZES, seed: int = 0, n_sentences: tuple[int, int] = (3, 5)) -> TaskData:
    """{"context", "question", "answer", "start", "end"}: the answer is context[start:end],
    the subject of the one sentence whose predicate the question repeats."""
    def draw(rng):
        while True:
            sents = [sentence(rng) for _ in range(int(rng.integers(n_sentences[0], n_sentences[1] + 1)))]
            q = int(rng.integers(len(sents)))
            predicates = [w[verb_index(s):-1] for w, s in sents]
            if sum(p == predicates[q] for p in predicates) == 1:
                break
        words, states = sents[q]
        answer = text(words[:verb_index(states)])
        start = sum(len(text(w)) + 1 for w, _ in sents[:q])
        context = " ".join(text(w) for w, _ in sents)
        return {"context": context, "question": "who " + text(predicates[q]) + " ?", "answer": answer,
                "start": start, "end": start + len(answer)}
    return make_splits("span_qa", draw, lambda e: (e["context"], e["question"]), sizes, seed)


TAG_SET = sorted(set(TAGS.values()) - {"END"})


def tagging(sizes=DEFAULT_SIZES, seed: int = 0) -> TaskData:
    """{"words", "tags", "senses"}: tags from the generating states (``TAG_SET``); senses
    name the meaning of each polysemous word ("bank/river") and are None elsewhere."""
    def draw(rng):
        words, states = sentence(rng)
        return {"words": words, "tags": [TAGS[s] for s in states],
                "senses": [SENSES.get(w, {}).get(s) for w, s in zip(words, states)]}
    return make_splits("tagging", draw, lambda e: tuple(e["words"]) + tuple(e["tags"]), sizes, seed, TAG_SET)
