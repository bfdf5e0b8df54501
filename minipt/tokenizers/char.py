"""Character tokenizer: one id per character seen in the training text.

The simplest tokenizer and the one of the character-level language models (Karpathy's
char-rnn, the character models in Sutskever et al. 2011): the vocabulary is the set of
distinct characters (Unicode code points) of the training text, sorted by code point.
Decoding is exact: ``decode(encode(text)) == text`` whenever every character was seen.

Unknown characters (a documented choice, both implemented):

* ``unk_token=None`` (default): encoding raises ValueError naming the character, its
  code point and its position in the text -- nothing is silently lost;
* ``unk_token="<unk>"``: the character becomes the ``<unk>`` id (a special token), and
  decoding gives back the string ``"<unk>"`` in its place.
"""
from __future__ import annotations

from typing import Iterable

from .base import Tokenizer


class CharTokenizer(Tokenizer):
    def __init__(self, specials: Iterable[str] = (), unk_token: str | None = None) -> None:
        super().__init__(specials)
        self._set_unk(unk_token)

    def fit(self, text: str) -> "CharTokenizer":
        """Vocabulary = special tokens, then the distinct characters of ``text`` (outside
        special tokens) in code-point order."""
        chars: set[str] = set()
        for piece in self._training_pieces(text):
            chars.update(piece)
        if not chars:
            raise ValueError("fit: the training text holds only special tokens; "
                             "expected at least one ordinary character")
        self._build_vocab(sorted(chars))
        return self

    def _encode_ordinary(self, text: str, offset: int) -> list[int]:
        stoi = self._stoi
        unk = None if self.unk_token is None else stoi[self.unk_token]
        ids = []
        for j, ch in enumerate(text):
            i = stoi.get(ch)
            if i is None or ch in self._special_ids:
                if unk is None:
                    raise ValueError(f"character {ch!r} (U+{ord(ch):04X}) at position {offset + j} "
                                     "is not in the vocabulary; fit on text that contains it or "
                                     "pass unk_token='<unk>'")
                i = unk
            ids.append(i)
        return ids

    def _decode(self, ids: list[int]) -> str:
        itos = self._itos
        return "".join(itos[i] for i in ids)

    def _config(self) -> dict:
        return {"unk_token": self.unk_token}

    def _load_config(self, config: dict) -> None:
        self.unk_token = config["unk_token"]
