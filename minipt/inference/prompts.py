"""What happened to a user's text on its way into a model, said in one line each.

Every inference command (``minipt sample``, ``generate``, ``fill``, ``embed``) reads free
text through a tokenizer fitted on a toy vocabulary and into a model with a fixed
context. Two things change the text silently unless someone says so:

- words the vocabulary cannot spell become the tokenizer's unknown token (``[UNK]``,
  ``<unk>``): ``unknown_words`` finds them, word by word (whitespace-separated, as
  WordPiece and the word tokenizers split first), and ``unknown_note`` says which;
- a text longer than the model's context is cut: ``kept_note`` says how much was kept.

A tokenizer without an unknown token (characters with no ``unk_token``, byte-level BPE)
either spells every text or raises a ValueError naming the character, so it has no
unknown words to report.
"""
from __future__ import annotations

from typing import Iterable


def unknown_words(tok, text: str, *, skip: Iterable[str] = ()) -> list[str]:
    """The whitespace-separated words of ``text`` (those in ``skip`` and the tokenizer's
    special tokens excepted) that encode to the tokenizer's unknown token, in order,
    each once."""
    unk = getattr(tok, "unk_token", None)
    if unk is None:
        return []
    unk_id, skip = tok.token_to_id(unk), set(skip) | set(tok.special_tokens)
    found: list[str] = []
    for word in text.split():
        if word not in skip and word not in found and unk_id in tok.encode(word, allow_special=False):
            found.append(word)
    return found


def _shorten(word: str, limit: int = 24) -> str:
    return word if len(word) <= limit else word[:limit - 3] + "..."


def unknown_note(tok, words: list[str], limit: int = 8) -> str | None:
    """``2 unknown words replaced by [UNK]: "zebra", "qux"`` (at most ``limit`` named),
    or None when there are none."""
    if not words:
        return None
    named = ", ".join(f'"{_shorten(w)}"' for w in words[:limit]) + (", ..." if len(words) > limit else "")
    n = len(words)
    return f"{n:,} unknown word{'s' if n > 1 else ''} replaced by {tok.unk_token}: {named}"


def kept_note(kept: int, total: int, *, context: int, what: str = "word pieces", where: str = "first") -> str:
    """``kept the first 254 of 5,012 word pieces (the model reads 256 tokens at a time)``."""
    return f"kept the {where} {kept:,} of {total:,} {what} (the model reads {context:,} tokens at a time)"


def short_label(text: str, limit: int = 40) -> str:
    """``text`` on one line, cut to ``limit`` characters with the count of the rest:
    a table label, never the whole of a long text."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return f"{flat[:limit - 1]}... (+{len(flat) - limit + 1:,} chars)"
