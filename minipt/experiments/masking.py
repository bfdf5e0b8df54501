"""What to mask in BERT pre-training: single tokens (Devlin et al. 2019), whole words
(BERT's later release), SpanBERT's geometric spans (Joshi et al. 2020) or ERNIE's
phrases (Sun et al. 2019), compared downstream on span question answering.

SpanBERT claims that masking contiguous spans helps span selection tasks (SpanBERT,
table 1: SQuAD). Here four BERTs of one size pre-train on the same toy stories
(``data/encoder_corpus.py``, MLM + NSP, through ``minipt train bert``'s recipe with a
batch hook) for the same steps with the same masking rate
(15 % of the non-special tokens, 80/10/10 per unit, ``objectives/span_masking.py``), so
compute is equal; only the units differ:

- ``token``: independent tokens (``EncoderCorpus.get_batch``'s own dynamic masking);
- ``whole word``: every piece of a chosen word (a word starts at a piece without ``##``);
- ``span``: SpanBERT spans, lengths ~ Geometric(0.2) clipped at 10;
- ``phrase``: noun phrases of the toy grammar (determiner, adjectives, noun: "the old
  king") and every other word as a unit of its own; the toy grammar's word classes
  play the chunker ERNIE used.

Each is then fine-tuned (``fine_tuning.fine_tune``) on ``span_qa`` (whose answers are
noun phrases) and scored by exact match; also reported: the recipe's masked-token accuracy
on held-out stories under *token* masking (the same test for all four). One seed per run
(the ledger runs seeds 0, 1, 2); floor: always the training split's commonest answer span
(``fine_tuning.majority``). Every figure is reported whichever way it comes out.
"""
from __future__ import annotations

import numpy as np

from ..data.toy_grammar import ADJECTIVE_STATES, NOUN_STATES, STATES
from ..objectives.common import IGNORE
from ..objectives.span_masking import entity_masking, span_masking, whole_word_masking
from ..recipes.encoder import EncoderHooks
from .fine_tuning import fine_tune, majority, pretrain, task_data

SCHEMES = ("token", "whole word", "span", "phrase")
BUDGETS = {"tiny": dict(pretrain=20, finetune=10, docs=100, examples=(32, 0, 32)),   # for tests
           "quick": dict(pretrain=600, finetune=150, docs=1000, examples=(400, 0, 200)),
           "full": dict(pretrain=600, finetune=150, docs=1000, examples=(400, 0, 400),
                        schemes=("token", "whole word", "span"))}   # the ledger's claims' arms only
PHRASE_WORDS = frozenset(w for s, words in STATES.items()
                         if s.startswith("det") or s in ADJECTIVE_STATES or s in NOUN_STATES for w in words)


def word_starts(tokens: list[str]) -> np.ndarray:
    """True where a WordPiece token begins a word (it has no ``##``)."""
    return np.array([not t.startswith("##") for t in tokens])


def phrase_units(tokens: list[str]) -> list[tuple[int, int]]:
    """Token spans [start, end) of noun phrases (maximal runs of determiners, adjectives
    and nouns) and of every other word."""
    starts = list(np.flatnonzero(word_starts(tokens))) + [len(tokens)]
    words = [("".join(t.removeprefix("##") for t in tokens[s:e]), s, e) for s, e in zip(starts, starts[1:])]
    units: list[list[int]] = []
    in_phrase = False
    for w, s, e in words:
        if w in PHRASE_WORDS and in_phrase:
            units[-1][1] = e
        else:
            units.append([s, e])
        in_phrase = w in PHRASE_WORDS
    return [(int(s), int(e)) for s, e in units]


class SchemeBatches:
    """``get_batch(split, rng)`` of MLM + NSP batches masked by ``scheme``."""

    def __init__(self, corpus, scheme: str):
        if scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
        self.corpus, self.scheme = corpus, scheme
        special = np.asarray(corpus.special_ids)
        self.random_ids = np.setdiff1d(np.arange(corpus.vocab_size), special)

    def get_batch(self, split: str, rng: np.random.Generator) -> tuple:
        """The batch's non-special tokens are masked as one sequence (rows in a row), so the
        15 % budget holds for the batch: per short row, one SpanBERT span (mean 3.8, up to
        10 tokens) would overshoot it. Rows start at a word, so no word or phrase crosses
        two rows; a span may (it then masks the end of one row and the start of the next)."""
        c = self.corpus
        if self.scheme == "token":
            return c.get_batch(split, rng)
        ids, segments, attention_mask, labels = c.unmasked(split, rng)
        body = ~np.isin(ids, c.special_ids)                                         # (B, T) A and B tokens
        flat = ids[body]                                                            # (N,) row after row
        tokens = [c.tok.id_to_token(int(i)) for i in flat]
        kw = dict(mask_id=c.mask_id, random_ids=self.random_ids, mask_prob=c.mask_prob)
        if self.scheme == "whole word":
            inputs, targets = whole_word_masking(flat, word_starts(tokens), rng, **kw)
        elif self.scheme == "span":
            inputs, targets = span_masking(flat, rng, **kw)
        else:
            units, at = [], 0
            for n in body.sum(axis=1):                                              # phrases found row by row
                units += [(at + s, at + e) for s, e in phrase_units(tokens[at:at + n])]
                at += n
            inputs, targets = entity_masking(flat, units, rng, **kw)
        out_inputs, out_targets = ids.copy(), np.full(ids.shape, IGNORE, dtype=np.int64)   # (B, T) each
        out_inputs[body], out_targets[body] = inputs, targets
        if not (out_targets != IGNORE).any():
            raise ValueError("batch has no masked position: it is too short for the masking budget")
        return out_inputs, segments, attention_mask, out_targets, labels


def run(budget: str = "quick", *, seed: int = 0, progress: bool = True) -> dict:
    """-> {"rows": [{"masking", "span QA exact match", "MLM accuracy"}], "arms", "floors", "items"}."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    b = BUDGETS[budget]
    qa = task_data(b, seed)["span_qa"]
    arms, items, tok = {}, {}, None
    for scheme in b.get("schemes", SCHEMES):
        hooks = EncoderHooks(batches=lambda corpus, model, scheme=scheme: SchemeBatches(corpus, scheme).get_batch)
        pre, tok, report = pretrain(b, seed=seed, progress=progress, hooks=hooks)
        em = fine_tune("span_qa", qa, tok, pre, frozen=False, steps=b["finetune"], config=pre.config, seed=seed,
                       progress=progress, items=True)
        arms[scheme] = {"exact match": float(em.mean()), "MLM accuracy": report["mlm_accuracy"]}
        items[scheme] = {"exact match": [float(x) for x in em]}
    rows = [{"masking": scheme, "span QA exact match": a["exact match"], "MLM accuracy": a["MLM accuracy"]}
            for scheme, a in arms.items()]
    return {"rows": rows, "arms": arms, "floors": {"baseline": majority("span_qa", qa, tok)}, "items": items,
            "budget": budget, "pretrain steps": b["pretrain"], "finetune steps": b["finetune"]}
