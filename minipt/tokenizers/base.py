"""The Tokenizer base class: a vocabulary, special tokens, encode/decode, JSON save/load.

A tokenizer maps text to a sequence of integer ids and back. Every tokenizer in this
package (characters, words, BPE of Sennrich et al. 2016, byte-level BPE of Radford et
al. 2019, WordPiece of Schuster & Nakajima 2012 / Devlin et al. 2019) shares

* a vocabulary: ``id_to_token(i)`` / ``token_to_id(s)``, ``vocab_size`` ids ``0..V-1``;
* special tokens (``special.py``): registered strings that always encode to one id;
* ``encode(text) -> list[int]``, ``encode_array(text) -> (T,) int64``,
  ``decode(ids) -> str``; an id outside ``[0, V)`` raises IndexError naming it;
* ``save(path)`` / ``Tokenizer.load(path)``: one JSON file (no pickle) holding the
  class name, the vocabulary in id order, the special tokens and the learned rules.

A subclass supplies ``_encode_ordinary`` (text without special tokens -> ids),
``_decode`` (ids -> text) and ``_config`` / ``_load_config`` for its own settings.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Iterable

import numpy as np

from ..core.checks import check_ids, check_positive_int  # noqa: F401  (re-exported for the tokenizers)
from .special import check_special_token, special_pattern, split_on_specials

FORMAT_VERSION = 1
_REGISTRY: dict[str, type["Tokenizer"]] = {}


class Tokenizer:
    #: where registered special tokens go when the vocabulary is built: ids 0.. (BERT
    #: puts [PAD] at 0) or after the learned tokens (GPT-2's <|endoftext|> is the last id).
    specials_first = True
    #: what ``decode`` puts between tokens: a continuation is joined to its prompt with it
    #: (the word tokenizer's "Hi , you !" needs a space before the first new word)
    separator = ""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _REGISTRY[cls.__name__] = cls

    def __init__(self, specials: Iterable[str] = ()) -> None:
        if isinstance(specials, str):
            raise TypeError(f"specials: expected a list of strings, got the string {specials!r}")
        self._specials: list[str] = []          # registration order
        self._itos: list[str] = []              # id -> token string
        self._stoi: dict[str, int] = {}         # token string -> id
        self._special_ids: dict[str, int] = {}  # special token -> id (once the vocab exists)
        self._pattern = None
        for tok in specials:
            if check_special_token(tok) not in self._specials:
                self._specials.append(tok)

    def _set_unk(self, unk_token: str | None) -> None:
        """The token that stands for what the vocabulary cannot spell (None: such input
        is an error); registered as a special token."""
        self.unk_token = None if unk_token is None else check_special_token(unk_token)
        if self.unk_token is not None and self.unk_token not in self._specials:
            self._specials.append(self.unk_token)

    # -- vocabulary -------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return len(self._itos)

    @property
    def fitted(self) -> bool:
        return bool(self._itos)

    @property
    def special_tokens(self) -> dict[str, int]:
        """Registered special tokens and their ids (empty ids until the vocabulary exists)."""
        return dict(self._special_ids)

    def id_to_token(self, i: int) -> str:
        if not isinstance(i, (int, np.integer)) or isinstance(i, bool):
            raise TypeError(f"id_to_token: expected an int id, got {type(i).__name__}")
        if not 0 <= i < len(self._itos):
            raise IndexError(f"token id {int(i)} is outside the vocabulary [0, {len(self._itos)})")
        return self._itos[i]

    def token_to_id(self, token: str) -> int:
        try:
            return self._stoi[token]
        except KeyError:
            raise KeyError(f"token {token!r} is not in the vocabulary ({self.vocab_size} tokens)") from None

    def _build_vocab(self, learned: list[str]) -> None:
        """Set the vocabulary to the registered specials plus ``learned`` (in this order or
        the reverse, see ``specials_first``). A learned token equal to a special -> error."""
        specials = set(self._specials)
        for tok in learned:
            if tok in specials:
                raise ValueError(f"special token {tok!r} collides with a learned token of the same "
                                 "string; pick another special string or retrain with it registered")
        if len(set(learned)) != len(learned):
            dup = next(t for t in learned if learned.count(t) > 1)
            raise ValueError(f"learned vocabulary holds {dup!r} twice")
        itos = self._specials + learned if self.specials_first else learned + self._specials
        self._set_itos(itos)

    def _set_itos(self, itos: list[str]) -> None:
        self._itos = list(itos)
        self._stoi = {t: i for i, t in enumerate(self._itos)}
        self._special_ids = {t: self._stoi[t] for t in self._specials}
        self._pattern = special_pattern(self._specials)
        self._vocab_changed()

    def _vocab_changed(self) -> None:
        """Hook: subclasses drop caches that depend on the vocabulary."""

    def add_special_tokens(self, tokens: Iterable[str]) -> list[int]:
        """Register special tokens. On a built vocabulary new ones get the next free ids;
        a string that is already a learned (non-special) token raises ValueError.
        Returns their ids (an empty list while the vocabulary is not built yet)."""
        if isinstance(tokens, str):
            tokens = [tokens]
        tokens = [check_special_token(t) for t in tokens]
        for tok in tokens:
            if tok in self._stoi and tok not in self._special_ids:
                raise ValueError(f"special token {tok!r} collides with the learned token id "
                                 f"{self._stoi[tok]}; pick another special string or retrain with "
                                 "it registered before fitting")
        for tok in tokens:
            if tok not in self._specials:
                self._specials.append(tok)
        if self.fitted:
            self._set_itos(self._itos + [t for t in self._specials if t not in self._stoi])
            return [self._stoi[t] for t in tokens]
        return []

    def _training_pieces(self, text: str) -> list[str]:
        """The ordinary stretches of a training text, cut at registered special tokens
        (which are thereby never counted, merged or learned)."""
        check_training_text(text)
        pattern = special_pattern(self._specials)
        return [piece for _, piece, sid in
                split_on_specials(text, pattern, dict.fromkeys(self._specials, -1)) if sid is None]

    def _count_training_words(self, text: str, split) -> "Counter[str]":
        """Counts of the words ``split(piece)`` finds in each ordinary stretch of a
        training text; ValueError when there is none."""
        counts: Counter[str] = Counter()
        for piece in self._training_pieces(text):
            counts.update(split(piece))
        if not counts:
            raise ValueError("fit: the training text holds no word (only whitespace or special tokens)")
        return counts

    # -- encode / decode ----------------------------------------------------------
    CACHE_LIMIT = 100_000           # words whose ids are remembered (Zipf: the frequent ones come first)

    def _cached_ids(self, word: str, encode) -> list[int]:
        """The ids of ``word``, from the cache or ``encode(word)`` (then remembered)."""
        ids = self._cache.get(word)
        if ids is None:
            ids = encode(word)
            if len(self._cache) < self.CACHE_LIMIT:
                self._cache[word] = ids
        return ids

    def _require_fitted(self) -> None:
        if not self.fitted:
            raise RuntimeError(f"{type(self).__name__} has no vocabulary yet: call fit(text) first")

    def encode(self, text: str, *, allow_special: bool = True) -> list[int]:
        """Text -> ids. Registered special tokens in the text become their single id
        (with ``allow_special=False`` they are encoded as ordinary text instead)."""
        if not isinstance(text, str):
            raise TypeError(f"encode: expected a str, got {type(text).__name__}")
        self._require_fitted()
        ids: list[int] = []
        pattern = self._pattern if allow_special else None
        for start, piece, sid in split_on_specials(text, pattern, self._special_ids):
            if sid is None:
                ids.extend(self._encode_ordinary(piece, start))
            else:
                ids.append(sid)
        return ids

    def encode_array(self, text: str, *, allow_special: bool = True) -> np.ndarray:
        """Like ``encode``, as an int64 array of shape (T,)."""
        return np.asarray(self.encode(text, allow_special=allow_special), dtype=np.int64)  # (T,)

    def decode(self, ids, *, skip_special: bool = False) -> str:
        """Ids (list, tuple or 1-D integer array) -> text."""
        if isinstance(ids, (list, tuple)) and len(ids) == 0:
            return ""
        arr = np.asarray(ids)
        if arr.ndim != 1:
            raise ValueError(f"decode: expected a 1-D sequence of ids, got shape {arr.shape}")
        check_ids("decode ids", arr, self.vocab_size)
        out = arr.tolist()
        if skip_special:
            special = set(self._special_ids.values())
            out = [i for i in out if i not in special]
        return self._decode(out)

    def _encode_ordinary(self, text: str, offset: int) -> list[int]:
        """Text holding no special token -> ids. ``offset`` is where ``text`` starts in
        the string given to ``encode`` (for error messages)."""
        raise NotImplementedError

    def _decode(self, ids: list[int]) -> str:
        raise NotImplementedError

    # -- save / load ----------------------------------------------------------------
    def _config(self) -> dict:
        """Subclass settings and learned rules, JSON-serialisable."""
        return {}

    def _load_config(self, config: dict) -> None:
        pass

    def save(self, path) -> None:
        state = {"class": type(self).__name__, "format": FORMAT_VERSION,
                 "tokens": self._itos, "specials": self._specials, "config": self._config()}
        # ensure_ascii keeps any string (even a lone surrogate) representable in the file
        Path(path).write_text(json.dumps(state, ensure_ascii=True, indent=1), encoding="utf-8")

    @classmethod
    def load(cls, path) -> "Tokenizer":
        """Read a file written by ``save``; ``Tokenizer.load`` returns the saved class.
        A damaged, truncated or foreign file is a ValueError naming it."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no tokenizer file at {path}")
        try:
            state = json.loads(path.read_bytes().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{path} is damaged or not a minipt tokenizer file: not valid UTF-8 JSON ({e})") from None
        if not isinstance(state, dict) or "class" not in state:
            raise ValueError(f"{path}: not a minipt tokenizer file (no 'class' field)")
        if state.get("format") != FORMAT_VERSION:
            raise ValueError(f"{path}: expected tokenizer format {FORMAT_VERSION}, got {state.get('format')!r}")
        klass = _REGISTRY.get(state["class"]) if isinstance(state["class"], str) else None
        if klass is None:
            raise ValueError(f"{path}: unknown tokenizer class {state['class']!r}")
        if not issubclass(klass, cls):
            raise ValueError(f"{path}: holds a {klass.__name__}, not a {cls.__name__}")
        tokens, specials = state.get("tokens"), state.get("specials")
        for key, value in (("tokens", tokens), ("specials", specials)):
            if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
                raise ValueError(f"{path} is damaged: {key!r} must be a list of strings")
        if len(set(tokens)) != len(tokens) or not set(specials) <= set(tokens):
            raise ValueError(f"{path} is damaged: its vocabulary repeats a token or lacks a special token")
        tok = klass.__new__(klass)
        try:
            Tokenizer.__init__(tok, specials)
            tok._load_config(state.get("config"))
            tok._set_itos(tokens)
        except Exception as e:                     # a subclass's rules that do not parse
            raise ValueError(f"{path} is damaged: {type(e).__name__}: {e}") from None
        return tok


def check_training_text(text) -> str:
    """Training text must be a non-empty str."""
    if not isinstance(text, str):
        raise TypeError(f"fit: expected the training text as a str, got {type(text).__name__}")
    if not text:
        raise ValueError("fit: the training text is empty; expected at least one character")
    return text

