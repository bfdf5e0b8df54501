"""WordPiece, the subword tokenizer of BERT (Devlin et al. 2019), after Schuster &
Nakajima 2012 ("Japanese and Korean Voice Search") and Wu et al. 2016 (GNMT).

Encoding, in BERT's two stages:

1. *Basic pre-tokenisation* (``normalize``, ``basic_tokenize``): drop NUL, U+FFFD and
   control/format/private-use characters; make every CJK ideograph a word of
   its own; optionally strip accents (NFD, then drop combining marks) and lowercase, as
   BERT's uncased models do; split at whitespace; make every punctuation character a
   word of its own. The order and the character classes are those of transformers'
   ``BertTokenizer`` (its ``BertNormalizer`` + ``BertPreTokenizer``), which
   ``tests/tokenizers/test_wordpiece_minilm.py`` checks on MiniLM's vocabulary.
2. *Greedy longest-match-first* per word: take the longest vocabulary entry that starts
   the word, then the longest ``##``-prefixed entry (a continuation) starting where it
   ended, and so on. ``unaffable`` with ``{un, ##aff, ##able}`` -> ``un ##aff ##able``.
   A word that cannot be covered this way, or that is longer than
   ``max_input_chars_per_word`` characters, becomes the single token ``[UNK]``.

Training (``fit``) uses the likelihood-style score of the WordPiece literature, as
popularised by the Hugging Face course: start from the characters (``w ##o ##r ##d``),
then repeatedly merge the adjacent pair with the highest

    score(a, b) = count(a b) / (count(a) * count(b)),

which prefers pairs whose parts rarely occur apart, until the vocabulary reaches
``vocab_size``. Pair and symbol counts are kept incrementally (``bpe.PairStats``);
because every score changes when a symbol count changes, the best pair is found by a
scan of the live pairs (fine at toy scale). Ties: higher count(a b), then code-point
order of the two strings. Pairs seen fewer than ``min_pair_count`` times, and pairs
whose result is already a token or a special token, are not merged. The merges only
build the vocabulary: encoding uses greedy longest match, not the merge order.

Decoding joins words with spaces and glues ``##`` continuations (lossy, like BERT's).
"""
from __future__ import annotations

import unicodedata
from typing import Iterable

from ..core.checks import check_positive_int
from .base import Tokenizer
from .bpe import PairStats
from .special import BERT_SPECIALS, UNK, check_special_token

PREFIX = "##"
_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
               (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def is_punctuation(ch: str) -> bool:
    """Unicode punctuation (category P*) and the ASCII symbols such as $ + < = > ^ ` | ~."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def _is_control(ch: str) -> bool:
    """Controls, formats, surrogates and private use (categories Cc, Cf, Cs, Co), except
    tab, newline and carriage return, which count as whitespace. Unassigned code points
    (Cn) are kept, as transformers' BertTokenizer keeps them (they become [UNK])."""
    return ch not in "\t\n\r" and unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co")


def normalize(text: str, lowercase: bool = True) -> str:
    """BERT's normaliser, in its order: drop NUL, U+FFFD and other/control characters and
    turn every whitespace character into a space; put spaces around CJK ideographs; then,
    when ``lowercase``, strip accents (NFD, drop combining marks, category Mn) and lowercase
    character by character (so a final capital sigma becomes σ, not ς, as in transformers'
    BertTokenizer)."""
    out = []
    for ch in text:
        if ch == "\x00" or ch == "\ufffd" or _is_control(ch):
            continue
        out.append(" " if ch.isspace() else f" {ch} " if is_cjk(ch) else ch)
    text = "".join(out)
    if lowercase:
        text = "".join(ch.lower() for ch in unicodedata.normalize("NFD", text) if unicodedata.category(ch) != "Mn")
    return text


def basic_tokenize(text: str, lowercase: bool = True) -> list[str]:
    """BERT's pre-tokenisation: ``normalize``, then split at whitespace and make every
    punctuation character a word of its own."""
    words, current = [], []
    for ch in normalize(text, lowercase):
        if ch.isspace() or is_punctuation(ch):
            if current:
                words.append("".join(current))
                current = []
            if not ch.isspace():
                words.append(ch)
        else:
            current.append(ch)
    if current:
        words.append("".join(current))
    return words


def greedy_longest_match(word: str, vocab, max_chars: int = 100) -> list[str] | None:
    """Split ``word`` into vocabulary pieces, longest first, ``##`` after the first piece;
    None when it cannot be covered or has more than ``max_chars`` characters."""
    if len(word) > max_chars:
        return None
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else PREFIX + word[start:end]
            if piece in vocab:
                break
            end -= 1
        else:
            return None
        pieces.append(piece)
        start = end
    return pieces


class WordPieceTokenizer(Tokenizer):
    def __init__(self, specials: Iterable[str] = BERT_SPECIALS, unk_token: str = UNK,
                 lowercase: bool = True, max_input_chars_per_word: int = 100) -> None:
        super().__init__(specials)
        self.unk_token = check_special_token(unk_token)
        if self.unk_token not in self._specials:
            self._specials.append(self.unk_token)
        self.lowercase = bool(lowercase)
        self.max_input_chars_per_word = check_positive_int("max_input_chars_per_word",
                                                           max_input_chars_per_word)
        self._cache: dict[str, list[int]] = {}

    @classmethod
    def from_vocab(cls, tokens: Iterable[str], **kwargs) -> "WordPieceTokenizer":
        """A tokenizer over a given vocabulary (a BERT ``vocab.txt`` as a list): ids are
        positions in ``tokens``; registered specials missing from it are appended."""
        tok = cls(**kwargs)
        tokens = list(tokens)
        if len(set(tokens)) != len(tokens):
            dup = next(t for t in tokens if tokens.count(t) > 1)
            raise ValueError(f"vocabulary lists {dup!r} twice")
        tok._set_itos(tokens + [s for s in tok._specials if s not in set(tokens)])
        return tok

    @classmethod
    def from_vocab_file(cls, path, **kwargs) -> "WordPieceTokenizer":
        """A BERT ``vocab.txt`` (one token a line, UTF-8; the line number is the id)."""
        from pathlib import Path
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no vocabulary file {path}")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}: not UTF-8 text ({e})") from None
        tokens = text.split("\n")
        if tokens and tokens[-1] == "":
            tokens.pop()                                  # the last line's newline
        if not tokens:
            raise ValueError(f"{path}: the vocabulary file is empty")
        return cls.from_vocab(tokens, **kwargs)

    def fit(self, text: str, vocab_size: int, min_pair_count: int = 2) -> "WordPieceTokenizer":
        check_positive_int("vocab_size", vocab_size)
        counts = self._count_training_words(text, lambda piece: basic_tokenize(piece, self.lowercase))
        word_counts = {(w[0],) + tuple(PREFIX + c for c in w[1:]): n for w, n in counts.items()}
        stats = PairStats(word_counts)
        alphabet = sorted(stats.symbols)
        room = vocab_size - len(self._specials) - len(alphabet)
        if room < 0:
            raise ValueError(f"vocab_size: expected at least {len(self._specials) + len(alphabet)} "
                             f"({len(self._specials)} specials + {len(alphabet)} characters), got {vocab_size}")
        taken = set(stats.symbols) | set(self._specials)
        learned: list[str] = []
        sym, sc = stats.symbols, stats.symbol_counts
        while len(learned) < room:
            best, best_key = None, None
            for (a, b), c in stats.pair_counts.items():
                if c < min_pair_count:
                    continue
                key = (-c / (sc[a] * sc[b]), -c, sym[a], sym[b])
                if best_key is None or key < best_key:
                    merged = sym[a] + sym[b][len(PREFIX):]
                    if merged not in taken:
                        best, best_key = (a, b, merged), key
            if best is None:
                break
            a, b, merged = best
            taken.add(merged)
            learned.append(merged)
            stats.merge(a, b, stats.add_symbol(merged))
        self._build_vocab(alphabet + learned)
        return self

    def _vocab_changed(self) -> None:
        self._cache = {}
        self._pieces = {t for t in self._itos if t not in self._special_ids}  # matchable

    def _encode_ordinary(self, text: str, offset: int) -> list[int]:
        ids: list[int] = []
        stoi, unk = self._stoi, self._stoi[self.unk_token]
        def encode(word: str) -> list[int]:
            pieces = greedy_longest_match(word, self._pieces, self.max_input_chars_per_word)
            return [unk] if pieces is None else [stoi[p] for p in pieces]
        for word in basic_tokenize(text, self.lowercase):
            ids.extend(self._cached_ids(word, encode))
        return ids

    def tokenize(self, text: str) -> list[str]:
        """The token strings of ``encode(text)``."""
        return [self._itos[i] for i in self.encode(text)]

    def _decode(self, ids: list[int]) -> str:
        out = ""
        special = set(self._special_ids.values())
        for i in ids:
            tok = self._itos[i]
            if tok.startswith(PREFIX) and i not in special and out:
                out += tok[len(PREFIX):]
            else:
                out += (" " if out else "") + tok
        return out

    def _config(self) -> dict:
        return {"unk_token": self.unk_token, "lowercase": self.lowercase,
                "max_input_chars_per_word": self.max_input_chars_per_word}

    def _load_config(self, config: dict) -> None:
        self.unk_token = config["unk_token"]
        self.lowercase = config["lowercase"]
        self.max_input_chars_per_word = config["max_input_chars_per_word"]
        self._cache = {}
