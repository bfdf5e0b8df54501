"""Text-to-text pairs and dialogue sessions from the toy language.

- ``translation``: a rule-based toy translation into an invented language: every word
  (every *sense* of a polysemous word: "bank" by the river and "bank" of money become
  different words) maps to a fixed pseudo-word, and adjectives move after their noun, as
  in French. Learnable, exact, and it needs context for the two senses (T5, BART, MASS).
- ``reversal``: the words in reverse order (a classic seq2seq sanity task).
- ``compression``: a summary-like shortening of a few sentences: adjectives and place
  phrases dropped.
- ``dialogue``: sessions of turns; a reply either picks up the previous turn's subject
  ("the old king sleeps ." -> "the king finds his gold .") or is one of a few bland
  replies ("i see ."). Bland replies are frequent, so a forward model likes them; a
  backward model P(source | reply) does not, which is what DialoGPT's MMI re-ranking
  exploits (Zhang et al. 2020).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from .toy_grammar import ADJECTIVE_STATES, SENSES, STATES, SUBJECT_STATES
from .toy_tasks import (
    DEFAULT_SIZES,
    Sentence,
    TaskData,
    make_splits,
    reduce,
    sentence,
    text,
    verb_index,
)


@lru_cache(maxsize=1)
def lexicon() -> dict[tuple[str, str | None], str]:
    """(word, sense or None) -> its word in the toy target language; fixed, one to one."""
    keys = sorted({(w, SENSES[w][s] if w in SENSES else None)
                   for s, ws in STATES.items() for w in ws if w not in (".", "\n")})
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    rng = np.random.default_rng(1234)
    used: set[str] = set()
    out = {}
    for key in keys:
        n = 1 if len(key[0]) <= 3 else 2
        while True:
            word = "".join(syllables[i] for i in rng.integers(len(syllables), size=n))
            if word not in used:
                break
        used.add(word)
        out[key] = word
    return out


def translate(words: list[str], states: list[str]) -> list[str]:
    """Word by word through ``lexicon()``, adjectives placed after their noun."""
    lex, out, pending = lexicon(), [], []
    for w, s in zip(words, states):
        if w == ".":
            out.append(".")
            continue
        target = lex[(w, SENSES[w].get(s) if w in SENSES else None)]
        if s in ADJECTIVE_STATES:
            pending.append(target)
        else:
            out.append(target)
            if not s.startswith("det"):
                out.extend(pending)
                pending = []
    return out


def translation(sizes=DEFAULT_SIZES, seed: int = 0) -> TaskData:
    """{"source", "target"}: an English-like sentence and its toy translation."""
    def draw(rng):
        words, states = sentence(rng)
        return {"source": text(words), "target": text(translate(words, states))}
    return make_splits("translation", draw, lambda e: e["source"], sizes, seed)


def reversal(sizes=DEFAULT_SIZES, seed: int = 0) -> TaskData:
    """{"source", "target"}: the sentence's words in reverse order, full stop kept last."""
    def draw(rng):
        words, _ = sentence(rng)
        return {"source": text(words), "target": text(words[-2::-1] + ["."])}
    return make_splits("reversal", draw, lambda e: e["source"], sizes, seed)


def compression(sizes=DEFAULT_SIZES, seed: int = 0, n_sentences: tuple[int, int] = (2, 3)) -> TaskData:
    """{"source", "target"}: a few sentences, and the same without adjectives and place phrases."""
    def draw(rng):
        sents = [sentence(rng) for _ in range(int(rng.integers(n_sentences[0], n_sentences[1] + 1)))]
        return {"source": " ".join(text(w) for w, _ in sents),
                "target": " ".join(text(reduce(w, s)[0]) for w, s in sents)}
    return make_splits("compression", draw, lambda e: e["source"], sizes, seed)


BLAND = ("i see .", "ok .", "i do not know .", "yes .")


def reply_about(prev_words: list[str], prev_states: list[str], rng: np.random.Generator) -> Sentence:
    """A new sentence (words, states) whose subject is the previous sentence's subject noun."""
    i = verb_index(prev_states) - 1
    while True:
        words, states = sentence(rng)
        j = verb_index(states) - 1
        if states[j] == prev_states[i] and states[j] in SUBJECT_STATES:
            words[j] = prev_words[i]
            return words, states


def dialogue(sizes=DEFAULT_SIZES, seed: int = 0, p_bland: float = 0.4, turns: tuple[int, int] = (2, 4)) -> TaskData:
    """{"turns", "bland"}: a session of 2-4 turns; ``bland[k]`` says turn k is a stock reply.
    After a bland reply the next speaker starts a new topic."""
    if not 0 <= p_bland <= 1:
        raise ValueError(f"p_bland must be in [0, 1], got {p_bland}")

    def draw(rng):
        prev = sentence(rng)
        out, bland = [text(prev[0])], [False]
        for _ in range(int(rng.integers(turns[0], turns[1] + 1)) - 1):
            if prev is None:
                prev = sentence(rng)
                out.append(text(prev[0]))
                bland.append(False)
            elif rng.random() < p_bland:
                out.append(BLAND[int(rng.integers(len(BLAND)))])
                bland.append(True)
                prev = None
            else:
                prev = reply_about(*prev, rng)
                out.append(text(prev[0]))
                bland.append(False)
        return {"turns": out, "bland": bland}
    return make_splits("dialogue", draw, lambda e: tuple(e["turns"]), sizes, seed)
