"""Real text: any UTF-8 file, read with errors that say what is wrong."""
from __future__ import annotations

from pathlib import Path


def load_text(path, encoding: str = "utf-8") -> str:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no text file at {path}")
    raw = path.read_bytes()
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as e:
        raise ValueError(f"{path} is not valid {encoding}: byte {e.start} ({raw[e.start:e.start + 1]!r}) "
                         f"cannot be decoded") from None
    if not text.strip():
        raise ValueError(f"{path} is empty: a corpus needs some text")
    return text


def split_text(text: str, block: int, source: str) -> tuple[str, str, None, str]:
    """(train text, validation text, None, ``source``): the last tenth of ``text``, and at
    least ``block`` + 1 characters, is the validation text (a file has no oracle)."""
    cut = len(text) - max(len(text) // 10, block + 1)
    if cut < block + 1:
        raise ValueError(f"{source} has {len(text)} characters; training needs at least {2 * (block + 1)}")
    return text[:cut], text[cut:], None, source


def char_corpus(corpus: str | None, n_chars: int | None, block: int, seed: int) -> tuple[str, str, float | None, str]:
    """(train text, validation text, oracle nats/char or None, description) of a
    character-level run: the text file ``corpus`` split by ``split_text``, or, without
    one, ``n_chars`` characters of the toy language (``hmm_language.toy_corpus``)."""
    if corpus:
        return split_text(load_text(corpus), block, corpus)
    if not n_chars:
        raise ValueError("no --corpus and no toy corpus size (the preset's data n_tokens) to generate")
    from .hmm_language import toy_corpus
    return toy_corpus(n_chars, seed)
