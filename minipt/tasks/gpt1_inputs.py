"""GPT-1's task-specific input transformations (Radford et al. 2018, section 3.3).

A pre-trained GPT reads one contiguous token sequence, so structured inputs are turned
into sequences with three added tokens: a start ``<s>``, a delimiter ``<$>`` and an
extract token ``<e>`` whose final hidden state feeds the task head:

- classification:   ``<s> text <e>``
- entailment:       ``<s> premise <$> hypothesis <e>``
- similarity:       both orders, ``<s> a <$> b <e>`` and ``<s> b <$> a <e>``; their final
                    states are added before the head (no inherent order)
- multiple choice:  ``<s> context <$> answer_k <e>`` for every k; each gives one score,
                    and the scores are softmaxed across the answers.

Every example becomes K sequences (K = 1, 2 or the number of answers). A batch holds
ids (B, K, T) padded with ``<pad>``, the extract positions (B, K), next-token targets
for the auxiliary LM loss (B, K, T; IGNORE on padding) and the labels (B,).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.checks import check_positive_int
from ..objectives.common import IGNORE
from ..tokenizers.base import Tokenizer

START, DELIM, EXTRACT, PAD = "<s>", "<$>", "<e>", "<pad>"
KINDS = ("classification", "entailment", "similarity", "multiple_choice")


@dataclass
class TaskBatch:
    idx: np.ndarray          # (B, K, T) token ids
    extract: np.ndarray      # (B, K) position of <e> in each sequence
    lm_targets: np.ndarray   # (B, K, T) next token, IGNORE where nothing is predicted
    labels: np.ndarray       # (B,) class (or right answer) of each example

    def as_tuple(self) -> tuple[np.ndarray, ...]:
        return self.idx, self.extract, self.lm_targets, self.labels


def transform(kind: str, example: dict, tok: Tokenizer) -> list[list[int]]:
    """One example of a toy task (``minipt.data.toy_tasks``) -> its K token sequences."""
    s, d, e = (tok.token_to_id(t) for t in (START, DELIM, EXTRACT))
    enc = tok.encode
    if kind == "classification":
        return [[s] + enc(example["text"]) + [e]]
    if kind == "entailment":
        return [[s] + enc(example["premise"]) + [d] + enc(example["hypothesis"]) + [e]]
    if kind == "similarity":
        a, b = enc(example["a"]), enc(example["b"])
        return [[s] + a + [d] + b + [e], [s] + b + [d] + a + [e]]
    if kind == "multiple_choice":
        context = enc(example["context"])
        return [[s] + context + [d] + enc(answer) + [e] for answer in example["choices"]]
    raise ValueError(f"unknown task kind {kind!r}; choose one of {KINDS}")


def make_batch(kind: str, examples: list[dict], tok: Tokenizer, block_size: int) -> TaskBatch:
    """Transform, pad to the longest sequence, and build the LM targets."""
    if not examples:
        raise ValueError("make_batch: no examples")
    seqs = [transform(kind, ex, tok) for ex in examples]
    K = len(seqs[0])
    if any(len(x) != K for x in seqs):
        raise ValueError("make_batch: every example needs the same number of sequences (answers)")
    T = max(len(s) for x in seqs for s in x)
    if T > block_size:
        raise ValueError(f"a transformed example has {T} tokens; the model's context is {block_size}")
    pad = tok.token_to_id(PAD)
    B = len(examples)
    idx = np.full((B, K, T), pad, dtype=np.int64)
    lm_targets = np.full((B, K, T), IGNORE, dtype=np.int64)
    extract = np.zeros((B, K), dtype=np.int64)
    for b, x in enumerate(seqs):
        for k, s in enumerate(x):
            idx[b, k, :len(s)] = s
            lm_targets[b, k, :len(s) - 1] = s[1:]
            extract[b, k] = len(s) - 1
    labels = np.array([ex["label"] for ex in examples], dtype=np.int64)
    return TaskBatch(idx, extract, lm_targets, labels)


class TaskBatches:
    """Random batches of one toy task for ``minipt.train.train`` (``get_batch(split, rng)``),
    and the whole of a split in order for evaluation."""

    def __init__(self, kind: str, data, tok: Tokenizer, block_size: int, batch_size: int):
        check_positive_int("batch_size", batch_size)
        self.kind, self.data, self.tok = kind, data, tok
        self.block_size, self.batch_size = block_size, batch_size

    def get_batch(self, split: str, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
        examples = self.data.split(split)
        if not examples:
            raise ValueError(f"the {split} split of {self.data.name} is empty")
        pick = rng.integers(0, len(examples), size=self.batch_size)
        return make_batch(self.kind, [examples[i] for i in pick], self.tok, self.block_size).as_tuple()

    def all_batches(self, split: str):
        examples = self.data.split(split)
        for lo in range(0, len(examples), self.batch_size):
            yield make_batch(self.kind, examples[lo:lo + self.batch_size], self.tok, self.block_size)
