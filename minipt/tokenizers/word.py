"""Word tokenizer: whitespace/punctuation split, a frequency cut-off and ``<unk>``.

The vocabulary of the classic word-level language models (Bengio et al. 2003's NNLM,
word2vec, the n-gram models): text is split into words (runs of word characters,
``\\w+``) and single punctuation characters; whitespace only separates. Words seen
fewer than ``min_count`` times in the training text, and words never seen, become
``<unk>`` -- the open-vocabulary problem that subword units (BPE, WordPiece) solve.

Vocabulary order: special tokens (``<unk>`` among them), then words by decreasing
count, ties broken by code-point order of the word. Decoding joins words with single
spaces, so it is lossy: ``decode(encode("Hi, you!"))`` is ``"Hi , you !"``.
"""
from __future__ import annotations

import re
from typing import Iterable

from ..core.checks import check_positive_int
from .base import Tokenizer
from .special import check_special_token

WORD_SPLIT = re.compile(r"\w+|[^\w\s]")


def split_words(text: str, lowercase: bool = False) -> list[str]:
    """Words (``\\w+``) and single punctuation characters of ``text``, in order."""
    return WORD_SPLIT.findall(text.lower() if lowercase else text)


class WordTokenizer(Tokenizer):
    separator = " "

    def __init__(self, specials: Iterable[str] = (), unk_token: str = "<unk>",
                 min_count: int = 1, max_size: int | None = None, lowercase: bool = False) -> None:
        super().__init__(specials)
        self.unk_token = check_special_token(unk_token)
        if self.unk_token not in self._specials:
            self._specials.append(self.unk_token)
        self.min_count = check_positive_int("min_count", min_count)
        self.max_size = None if max_size is None else check_positive_int("max_size", max_size)
        self.lowercase = bool(lowercase)

    def fit(self, text: str) -> "WordTokenizer":
        counts = self._count_training_words(text, lambda piece: split_words(piece, self.lowercase))
        words = [w for w, c in counts.items() if c >= self.min_count]
        words.sort(key=lambda w: (-counts[w], w))
        if self.max_size is not None:
            room = self.max_size - len(self._specials)
            if room < 1:
                raise ValueError(f"max_size: expected more than the {len(self._specials)} special "
                                 f"tokens, got {self.max_size}")
            words = words[:room]
        if not words:
            raise ValueError(f"fit: no word occurs at least min_count={self.min_count} times")
        self._build_vocab(words)
        return self

    def _encode_ordinary(self, text: str, offset: int) -> list[int]:
        stoi, unk = self._stoi, self._stoi[self.unk_token]
        special = self._special_ids
        return [unk if w in special else stoi.get(w, unk) for w in split_words(text, self.lowercase)]

    def _decode(self, ids: list[int]) -> str:
        itos = self._itos
        return self.separator.join(itos[i] for i in ids)

    def _config(self) -> dict:
        return {"unk_token": self.unk_token, "min_count": self.min_count,
                "max_size": self.max_size, "lowercase": self.lowercase}

    def _load_config(self, config: dict) -> None:
        self.unk_token = config["unk_token"]
        self.min_count = config["min_count"]
        self.max_size = config["max_size"]
        self.lowercase = config["lowercase"]
