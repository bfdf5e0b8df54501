"""Special tokens: strings that always stand for one id and are never split or merged.

Every pretrained model reserves a few tokens that the text itself cannot spell with
ordinary pieces: BERT's ``[PAD] [UNK] [CLS] [SEP] [MASK]`` (Devlin et al. 2019),
GPT-2's document separator ``<|endoftext|>`` (Radford et al. 2019), the ``<s> </s>``
sentence markers of BART/RoBERTa, and T5's sentinels ``<extra_id_0>, <extra_id_1>, ...``
that stand in for dropped spans (Raffel et al. 2020).

A tokenizer registers them explicitly. Before any learned splitting happens, the text
is cut at every occurrence of a registered special token (longest token first, so
``<extra_id_10>`` wins over ``<extra_id_1>``); each occurrence becomes its single id and
only the pieces in between reach the char/word/BPE/WordPiece machinery. Trainers are
told the special strings too, so no merge can ever produce one.
"""
from __future__ import annotations

import re
from typing import Iterable, Iterator

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"   # PAD: the one padding token
BERT_SPECIALS = (PAD, UNK, CLS, SEP, MASK)
BOS, EOS = "<s>", "</s>"
ENDOFTEXT = "<|endoftext|>"
START, DELIM, EXTRACT = BOS, "<$>", "<e>"      # GPT-1's task tokens (Radford et al. 2018, section 3.3)


def t5_sentinels(n: int) -> list[str]:
    """The first ``n`` T5 sentinel tokens ``<extra_id_0> ... <extra_id_{n-1}>``."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"t5_sentinels: expected a non-negative int, got {n!r}")
    return [f"<extra_id_{i}>" for i in range(n)]


def check_special_token(token) -> str:
    """A special token is a non-empty string; returns it unchanged."""
    if not isinstance(token, str):
        raise TypeError(f"special token: expected a str, got {type(token).__name__} {token!r}")
    if not token:
        raise ValueError("special token: expected a non-empty string, got ''")
    return token


def special_pattern(tokens: Iterable[str]) -> re.Pattern | None:
    """A regex matching any of ``tokens`` (longest first), or None when there are none."""
    ordered = sorted(set(tokens), key=lambda t: (-len(t), t))
    if not ordered:
        return None
    return re.compile("|".join(re.escape(t) for t in ordered))


def split_on_specials(text: str, pattern: re.Pattern | None,
                      ids: dict[str, int]) -> Iterator[tuple[int, str, int | None]]:
    """Cut ``text`` at special tokens.

    Yields ``(start, piece, special_id)``: ``special_id`` is the token's id for a special
    token and ``None`` for the ordinary text between them (empty pieces are skipped);
    ``start`` is the piece's offset in ``text``, used in error messages.
    """
    if pattern is None:
        if text:
            yield 0, text, None
        return
    pos = 0
    for m in pattern.finditer(text):
        if m.start() > pos:
            yield pos, text[pos:m.start()], None
        yield m.start(), m.group(), ids[m.group()]
        pos = m.end()
    if pos < len(text):
        yield pos, text[pos:], None
