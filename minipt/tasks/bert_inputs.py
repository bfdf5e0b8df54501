"""The toy tasks (``data/toy_tasks.py``) in BERT's input format (Devlin et al. 2019,
section 3 and figure 4), batched for the fine-tuning models (``models/encoder/finetune.py``).

Every example is ``[CLS] A [SEP]`` or ``[CLS] A [SEP] B [SEP]``, segment ids 0 on
``[CLS] A [SEP]`` and 1 on ``B [SEP]``, padded with ``[PAD]`` (attention mask 0):

- ``sentiment`` (single sentence): A = the sentence; label = its polarity.
- ``entailment`` (sentence pair, as MNLI): A = premise, B = hypothesis.
- ``tagging``: A = the sentence; each word's tag on its *first* piece, IGNORE on the
  other pieces and on the special tokens (BERT, section 5.3).
- ``span_qa`` (as SQuAD): A = question, B = context; the answer's character span is
  mapped to the first piece of its first word and the last piece of its last word;
  ``context`` marks the tokens of B without the final [SEP].

Words are encoded one by one (``tok.encode(word)``), so any tokenizer with the BERT
specials works and the word -> piece alignment is exact.

Length: an example longer than ``max_length`` is refused with a ValueError naming its
length, except for sentence pairs, which are truncated as BERT's ``run_classifier``
does: the longer of A and B (A on ties) loses its last token until the pair fits (the
"longest first" rule, ``objectives.sentence_pairs.truncate_pair``). Tags and answers are never cut silently.
"""
from __future__ import annotations

import numpy as np

from ..core.checks import check_positive_int
from ..data.toy_tasks import TAG_SET
from ..objectives.common import IGNORE
from ..objectives.sentence_pairs import truncate_pair
from ..tokenizers.base import Tokenizer
from ..tokenizers.special import CLS, PAD, SEP

KINDS = {"sentiment": "classify", "entailment": "classify", "similarity": "classify", "tagging": "tag",
         "span_qa": "qa"}
PAIRS = {"entailment": ("premise", "hypothesis"), "similarity": ("a", "b")}


def pieces(tok: Tokenizer, words: list[str]) -> list[list[int]]:
    """Each word's token ids (a word may become several WordPiece pieces)."""
    out = [tok.encode(w) for w in words]
    empty = [w for w, p in zip(words, out) if not p]
    if empty:
        raise ValueError(f"the tokenizer gives no token for the word {empty[0]!r}")
    return out


def encode_example(kind: str, ex: dict, tok: Tokenizer, max_length: int) -> dict:
    """One example -> {"ids", "segments", and per kind "label" | "tags" | "context", "start", "end"}."""
    if kind not in KINDS:
        raise ValueError(f"unknown task {kind!r}; choose one of {', '.join(KINDS)}")
    cls, sep = tok.token_to_id(CLS), tok.token_to_id(SEP)
    flat = lambda ps: [i for p in ps for i in p]
    if kind in PAIRS:
        a, b = (flat(pieces(tok, ex[k].split())) for k in PAIRS[kind])
        a, b = truncate_pair(a, b, max_length)
        ids = [cls] + a + [sep] + b + [sep]
        return {"ids": ids, "segments": [0] * (len(a) + 2) + [1] * (len(b) + 1), "label": int(ex["label"])}
    if kind in ("sentiment", "tagging"):
        words = ex["text"].split() if kind == "sentiment" else ex["words"]
        ps = pieces(tok, words)
        ids = [cls] + flat(ps) + [sep]
        _check_length(ids, max_length, kind)
        out = {"ids": ids, "segments": [0] * len(ids)}
        if kind == "sentiment":
            out["label"] = int(ex["label"])
        else:
            tags = [IGNORE]
            for p, tag in zip(ps, ex["tags"]):
                if tag not in TAG_SET:
                    raise ValueError(f"tag {tag!r} is not one of the tag set {TAG_SET}")
                tags += [TAG_SET.index(tag)] + [IGNORE] * (len(p) - 1)
            out["tags"] = tags + [IGNORE]
        return out
    return _encode_qa(ex, tok, max_length, cls, sep)


def _check_length(ids: list[int], max_length: int, what: str) -> None:
    if len(ids) > max_length:
        raise ValueError(f"{what}: the example has {len(ids)} tokens with [CLS] and [SEP], more than max_length "
                         f"{max_length}; shorten it or raise max_length")


def _encode_qa(ex: dict, tok: Tokenizer, max_length: int, cls: int, sep: int) -> dict:
    context, s, e = ex["context"], int(ex["start"]), int(ex["end"])
    if not 0 <= s < e <= len(context):
        raise ValueError(f"span_qa: answer span [{s}, {e}) is outside the context of {len(context)} characters")
    words = context.split(" ")
    starts = np.cumsum([0] + [len(w) + 1 for w in words[:-1]])                   # (n_words,) char offsets
    ends = starts + np.array([len(w) for w in words])
    if s not in starts or e not in ends:
        raise ValueError(f"span_qa: answer span [{s}, {e}) ({context[s:e]!r}) does not start and end at word "
                         "boundaries of the context")
    w0, w1 = int(np.flatnonzero(starts == s)[0]), int(np.flatnonzero(ends == e)[0])
    q = [i for p in pieces(tok, ex["question"].split()) for i in p]
    cps = pieces(tok, words)
    first = 2 + len(q)                                                            # [CLS] q [SEP] -> context
    offsets = np.cumsum([first] + [len(p) for p in cps])                          # token index of each word
    ids = [cls] + q + [sep] + [i for p in cps for i in p] + [sep]
    _check_length(ids, max_length, "span_qa")
    context_mask = [0] * first + [1] * (len(ids) - first - 1) + [0]
    return {"ids": ids, "segments": [0] * first + [1] * (len(ids) - first), "context": context_mask,
            "start": int(offsets[w0]), "end": int(offsets[w1 + 1] - 1)}


def make_batch(kind: str, examples: list[dict], tok: Tokenizer, max_length: int) -> tuple[np.ndarray, ...]:
    """Encode and pad: classify -> (ids, segments, mask, labels); tagging -> (ids, segments,
    mask, tags); span_qa -> (ids, segments, mask, context, start, end); all (B, T) or (B,)."""
    if not examples:
        raise ValueError("make_batch: no examples")
    check_positive_int("max_length", max_length)
    enc = [encode_example(kind, ex, tok, max_length) for ex in examples]
    B, T = len(enc), max(len(x["ids"]) for x in enc)
    ids = np.full((B, T), tok.token_to_id(PAD), dtype=np.int64)
    segments, mask = np.zeros((B, T), np.int64), np.zeros((B, T), np.int64)
    for b, x in enumerate(enc):
        n = len(x["ids"])
        ids[b, :n], segments[b, :n], mask[b, :n] = x["ids"], x["segments"], 1
    if KINDS[kind] == "classify":
        return ids, segments, mask, np.array([x["label"] for x in enc], dtype=np.int64)
    if kind == "tagging":
        tags = np.full((B, T), IGNORE, dtype=np.int64)
        for b, x in enumerate(enc):
            tags[b, :len(x["tags"])] = x["tags"]
        return ids, segments, mask, tags
    context = np.zeros((B, T), np.int64)
    for b, x in enumerate(enc):
        context[b, :len(x["context"])] = x["context"]
    return (ids, segments, mask, context, np.array([x["start"] for x in enc], dtype=np.int64),
            np.array([x["end"] for x in enc], dtype=np.int64))


class BertTaskBatches:
    """Random batches of one toy task for ``minipt.train.train`` (``get_batch(split, rng)``),
    and every example of a split in order (``all_batches``) for scoring."""

    def __init__(self, kind: str, data, tok: Tokenizer, max_length: int, batch_size: int):
        if kind not in KINDS:
            raise ValueError(f"unknown task {kind!r}; choose one of {', '.join(KINDS)}")
        check_positive_int("batch_size", batch_size)
        self.kind, self.data, self.tok, self.max_length, self.batch_size = kind, data, tok, max_length, batch_size

    def get_batch(self, split: str, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        examples = self.data.split(split)
        if not examples:
            raise ValueError(f"the {split} split of {self.data.name} is empty")
        pick = rng.integers(0, len(examples), size=self.batch_size)
        return make_batch(self.kind, [examples[i] for i in pick], self.tok, self.max_length)

    def all_batches(self, split: str):
        examples = self.data.split(split)
        for lo in range(0, len(examples), self.batch_size):
            yield make_batch(self.kind, examples[lo:lo + self.batch_size], self.tok, self.max_length)


def score_items(model, batches: BertTaskBatches, split: str = "test") -> np.ndarray:
    """Per scored item of ``split``, in eval mode, 1.0 if right else 0.0: a sentence or pair
    (classes), a tagged word (tags) or a question (exact match of the answer span, start
    and end both right, ``finetune.best_spans``)."""
    from ..core.module import eval_mode
    from ..models.encoder.finetune import best_spans
    found = []
    with eval_mode(model):
        for batch in batches.all_batches(split):
            _, logits = model(*batch[:4 if batches.kind == "span_qa" else 3])   # no labels: scores only
            if KINDS[batches.kind] == "classify":
                found.append(logits.argmax(-1) == batch[3])
            elif batches.kind == "tagging":
                tagged = batch[3] != IGNORE
                found.append((logits.argmax(-1) == batch[3])[tagged])
            else:
                spans = best_spans(logits[:, 0], logits[:, 1])                    # (B, 2) over the context
                found.append((spans[:, 0] == batch[4]) & (spans[:, 1] == batch[5]))
    if not found or not sum(len(f) for f in found):
        raise ValueError(f"the {split} split of {batches.data.name} has nothing to score")
    return np.concatenate(found).astype(np.float64)


def score(model, batches: BertTaskBatches, split: str = "test") -> float:
    """Accuracy (or exact match) in eval mode: the mean of ``score_items``."""
    return float(score_items(model, batches, split).mean())
