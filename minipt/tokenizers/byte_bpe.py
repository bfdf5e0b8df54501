"""Byte-level BPE in the manner of GPT-2 (Radford et al. 2019, "Language Models are
Unsupervised Multitask Learners", section 2.2).

Character BPE (``bpe.py``) needs a base symbol for every character it may meet, and
Unicode has over 150,000. Byte-level BPE starts instead from the 256 byte values of the
text's UTF-8 encoding, so *any* string encodes with no ``<unk>`` and decodes back
exactly: Chinese, emoji, control characters, the empty string.

1. **Bytes as printable characters.** So that tokens stay strings (for ``vocab.json``
   and ``merges.txt``), each byte is shown as one printable character:
   ``bytes_to_unicode()`` keeps the 188 bytes that are printable Latin-1 characters
   (``!``..``~``, ``¡``..``¬``, ``®``..``ÿ``) as themselves and maps the other 68
   (control bytes, space, ...) to the code points 256, 257, ... in byte order; a space
   becomes ``Ġ`` (U+0120). Base token ids follow GPT-2's order: the 188 kept bytes
   first, so ``!`` is id 0 and ``Ġ`` id 220.
2. **Pre-split.** A regex cuts the text into chunks (contractions, letter runs, digit
   runs, punctuation runs, whitespace) and merges never cross a chunk, so ``dog.``,
   ``dog!`` and ``dog?`` share the token ``dog``. GPT-2's pattern uses the ``regex``
   package's ``\\p{L}`` (letter) and ``\\p{N}`` (number); with only the standard ``re``
   we approximate ``\\p{L}`` by ``[^\\W\\d_]`` (word characters that are not decimal
   digits or ``_``: letters, plus the non-decimal numerics such as ``²`` or ``Ⅻ``) and
   ``\\p{N}`` by ``\\d`` (decimal digits only). Every character still falls in exactly
   one class, so the chunks always concatenate back to the text.
3. **Merges on bytes** are learned by the incremental trainer of ``bpe.py`` (same
   tie-breaking: highest count, then code-point order of the two token strings).

The model is ``vocab`` (token string in the bytes-to-unicode alphabet -> id, special
tokens included under their own text) and ``merges`` (ordered pairs of token strings):
exactly the contents of GPT-2's ``vocab.json`` and ``merges.txt`` (see
``to_vocab_merges`` / ``from_vocab_merges``). Lone surrogates are not Unicode scalar
values and have no UTF-8 encoding; ``encode`` rejects them with a ValueError.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Iterable, Mapping

from .bpe import MergeTokenizer, apply_merges
from .special import ENDOFTEXT

GPT2_SPLIT = re.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")


def bytes_to_unicode() -> dict[int, str]:
    """Byte value -> the printable character that stands for it (GPT-2's table),
    in GPT-2's id order (the printable bytes first)."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in kept}
    shifted = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + shifted)
            shifted += 1
    return table


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}
BYTE_ALPHABET = list(BYTE_TO_CHAR.values())    # the 256 base tokens in id order


def pre_split(text: str) -> list[str]:
    """GPT-2-style chunks of ``text`` (their concatenation is ``text``)."""
    return GPT2_SPLIT.findall(text)


def to_byte_string(chunk: str, offset: int = 0) -> str:
    """A text chunk -> its UTF-8 bytes written in the bytes-to-unicode alphabet."""
    try:
        data = chunk.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"character {chunk[e.start]!r} at position {offset + e.start} is a lone "
                         "surrogate, which has no UTF-8 encoding") from None
    return "".join(BYTE_TO_CHAR[b] for b in data)


class ByteBPETokenizer(MergeTokenizer):
    """Byte-level BPE. Usable untrained (256 byte tokens + specials); ``fit`` learns
    merges. Special tokens follow the learned tokens (GPT-2: ``<|endoftext|>`` last)."""

    specials_first = False

    def __init__(self, specials: Iterable[str] = (ENDOFTEXT,)) -> None:
        super().__init__(specials)
        self._init_merges()
        self._build_vocab(list(BYTE_ALPHABET))

    def fit(self, text: str, num_merges: int, min_pair_count: int = 2) -> "ByteBPETokenizer":
        counts: Counter[str] = Counter()
        for piece in self._training_pieces(text):
            for chunk in pre_split(piece):
                counts[to_byte_string(chunk)] += 1
        word_counts = {tuple(w): c for w, c in counts.items()}
        return self._learn(word_counts, num_merges, min_pair_count, [*BYTE_ALPHABET, *self._specials],
                           list(BYTE_ALPHABET))

    def _encode_ordinary(self, text: str, offset: int) -> list[int]:
        ids: list[int] = []
        stoi = self._stoi
        pos = offset
        for chunk in pre_split(text):
            ids.extend(self._cached_ids(chunk, lambda c: [stoi[p] for p in apply_merges(list(to_byte_string(c, pos)),
                                                                                         self._ranks)]))
            pos += len(chunk)
        return ids

    def _decode(self, ids: list[int]) -> str:
        itos, special = self._itos, self._special_ids
        data = bytearray()
        for i in ids:
            tok = itos[i]
            if tok in special and special[tok] == i:
                data += tok.encode("utf-8", errors="surrogatepass")
            else:
                data += bytes(CHAR_TO_BYTE[c] for c in tok)
        # a sampled id sequence may cut a character's bytes: show U+FFFD there, as GPT-2
        return data.decode("utf-8", errors="replace")

    def token_bytes(self, i: int) -> bytes:
        """The raw bytes a (non-special) token id stands for."""
        tok = self.id_to_token(i)
        if self._special_ids.get(tok) == i:
            return tok.encode("utf-8")
        return bytes(CHAR_TO_BYTE[c] for c in tok)

    # -- the GPT-2 file layout ------------------------------------------------------
    def to_vocab_merges(self) -> tuple[dict[str, int], list[tuple[str, str]]]:
        """``(vocab, merges)``: what GPT-2's ``vocab.json`` and ``merges.txt`` hold."""
        return dict(self._stoi), list(self.merges)

    @classmethod
    def from_vocab_merges(cls, vocab: Mapping[str, int], merges: Iterable[tuple[str, str]],
                          specials: Iterable[str] = (ENDOFTEXT,)) -> "ByteBPETokenizer":
        """Build from a GPT-2-style vocabulary and merge list (e.g. read from its files)."""
        ids = sorted(vocab.values())
        if ids != list(range(len(ids))):
            raise ValueError("vocab: expected ids 0..V-1 each used once")
        itos = [""] * len(ids)
        for tok, i in vocab.items():
            itos[i] = tok
        specials = list(specials)
        for s in specials:
            if s not in vocab:
                raise ValueError(f"special token {s!r} is not in the vocab")
        missing = [c for c in BYTE_ALPHABET if c not in vocab]
        if missing:
            raise ValueError(f"vocab: expected all 256 byte tokens, {len(missing)} missing "
                             f"(first {missing[0]!r})")
        merges = [tuple(m) for m in merges]
        for a, b in merges:
            if a not in vocab or b not in vocab or a + b not in vocab:
                raise ValueError(f"merge {a!r} {b!r}: its parts and result must all be in the vocab")
        tok = cls(specials=specials)
        tok.merges = merges
        tok._set_itos(itos)
        return tok

    def _config(self) -> dict:
        return {"merges": [list(m) for m in self.merges]}

    def _load_config(self, config: dict) -> None:
        self.merges = [tuple(m) for m in config["merges"]]
        self._ranks, self._cache = {}, {}
