"""Every minipt tokenizer in a form transformers' ``AutoTokenizer.from_pretrained`` reads.

``save_hf_tokenizer(tok, folder)`` writes, beside a model that ``save_pretrained`` exports,
the files of the transformers tokenizer that gives the same ids on the same text:

- **WordPiece** (BERT, Devlin et al. 2019; ``wordpiece.py``) -> ``vocab.txt``, one token a
  line, the line number its id, the file BERT was released with; ``tokenizer_config.json``
  names ``BertTokenizer`` and says ``do_lower_case`` (minipt's ``lowercase``: it lowercases
  and strips accents, as BERT's uncased normaliser does).
- **Byte-level BPE** (GPT-2, Radford et al. 2019; ``byte_bpe.py``) -> GPT-2's
  ``vocab.json`` + ``merges.txt`` (``gpt2_files.py``), read by ``GPT2Tokenizer``.
- **Words and characters** (``word.py``, ``char.py``): transformers has no such class, but
  it reads any ``tokenizer.json`` of the ``tokenizers`` library. minipt writes one by hand
  (no dependency): a ``WordLevel`` model (token -> id, ``<unk>`` for the rest), a ``Split``
  pre-tokenizer whose regex cuts the text as minipt does (``WORD_PATTERN``: runs of
  letters, digits and ``_``, or one other non-space character; ``CHAR_PATTERN``: every
  code point), a ``Lowercase`` normaliser when the word tokenizer lowercases, and a
  decoder joining words with spaces (transformers' default) or characters with nothing
  (``Fuse``).

In every form the special tokens are "added tokens": matched in the text before any
splitting, longest first, as ``special.split_on_specials`` does. ``special_roles`` says
which of them is transformers' pad / unk / cls / sep / mask / bos / eos token; the
rest are ``additional_special_tokens``.

What may differ: Python's ``\\w`` knows characters added in recent Unicode versions that
the Oniguruma tables of ``tokenizers`` do not (none below U+1C89); such a character is a
word character in minipt and a one-character piece in transformers.
"""
from __future__ import annotations

import json
from pathlib import Path

from .base import Tokenizer
from .byte_bpe import ByteBPETokenizer
from .char import CharTokenizer
from .gpt2_files import TOKENIZER_CONFIG, TOKENIZER_JSON, save_gpt2_files
from .word import WordTokenizer
from .wordpiece import WordPieceTokenizer

VOCAB_TXT = "vocab.txt"
# Python's whitespace (str.isspace, what ``re``'s \s matches), spelled out: Oniguruma's \s
# leaves out the four separators \x1c-\x1f.
WHITESPACE = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_SPACE = "".join(f"\\x{{{ord(c):x}}}" if c != "-" else "-" for c in WHITESPACE)
WORD_PATTERN = rf"[\p{{L}}\p{{N}}_]+|[^\p{{L}}\p{{N}}_{_SPACE}]"    # word.WORD_SPLIT: \w+|[^\w\s]
CHAR_PATTERN = r"[\s\S]"                                         # one code point
ROLES = (("pad_token", ("[PAD]", "<pad>")), ("unk_token", ("[UNK]", "<unk>")), ("cls_token", ("[CLS]",)),
         ("sep_token", ("[SEP]",)), ("mask_token", ("[MASK]", "<mask>")),
         ("bos_token", ("<s>", "<|endoftext|>")), ("eos_token", ("</s>", "<|endoftext|>")))


def special_roles(tok: Tokenizer) -> dict:
    """transformers' special-token attributes for ``tok``'s special tokens, by their
    strings (``[PAD]`` / ``<pad>`` is the pad token, ...; the unknown-word token is the
    tokenizer's own), and the rest as ``additional_special_tokens``."""
    specials = tok.special_tokens
    roles = {role: next((s for s in names if s in specials), None) for role, names in ROLES}
    if getattr(tok, "unk_token", None) is not None:
        roles["unk_token"] = tok.unk_token
    named = set(roles.values())
    roles["additional_special_tokens"] = [s for s in specials if s not in named]
    return roles


def has_hf_form(tok: Tokenizer) -> bool:
    """Whether ``save_hf_tokenizer`` writes ``tok`` (the character BPE of ``bpe.py`` has no form)."""
    return isinstance(tok, (ByteBPETokenizer, WordPieceTokenizer, WordTokenizer, CharTokenizer))


def save_hf_tokenizer(tok: Tokenizer, folder, *, model_max_length: int | None = None) -> list[str]:
    """Write ``tok`` into ``folder`` as transformers reads it (see the module docstring);
    returns the names written. A tokenizer with no transformers form is a ValueError."""
    folder = Path(folder)
    if isinstance(tok, ByteBPETokenizer):
        return sorted(p.name for p in save_gpt2_files(tok, folder, model_max_length=model_max_length,
                                                      roles=special_roles(tok)))
    if isinstance(tok, WordPieceTokenizer):
        written = _save_vocab_txt(tok, folder)
        config = {"tokenizer_class": "BertTokenizer", "do_lower_case": tok.lowercase, "strip_accents": None,
                  "tokenize_chinese_chars": True}
    elif isinstance(tok, (WordTokenizer, CharTokenizer)):
        written = TOKENIZER_JSON
        (folder / written).write_text(json.dumps(tokenizer_json(tok), indent=1, ensure_ascii=False) + "\n",
                                      encoding="utf-8")
        config = {"tokenizer_class": "PreTrainedTokenizerFast"}
    else:
        raise ValueError(f"a {type(tok).__name__} has no transformers form (minipt writes WordPiece, byte-level BPE, "
                         "word and character tokenizers)")
    config.update(special_roles(tok))
    if model_max_length is not None:
        config["model_max_length"] = model_max_length
    (folder / TOKENIZER_CONFIG).write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return sorted([written, TOKENIZER_CONFIG])


def _save_vocab_txt(tok: WordPieceTokenizer, folder: Path) -> str:
    """BERT's ``vocab.txt``: token i on line i. A token holding a line break cannot be written."""
    tokens = [tok.id_to_token(i) for i in range(tok.vocab_size)]
    bad = next((t for t in tokens if "\n" in t or "\r" in t), None)
    if bad is not None:
        raise ValueError(f"token {bad!r} holds a line break, which vocab.txt (one token a line) cannot store")
    (folder / VOCAB_TXT).write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
    return VOCAB_TXT


def tokenizer_json(tok: WordTokenizer | CharTokenizer) -> dict:
    """The ``tokenizers`` library's JSON for a word or character tokenizer (see the module docstring)."""
    words = isinstance(tok, WordTokenizer)
    vocab = {tok.id_to_token(i): i for i in range(tok.vocab_size)}
    added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for s, i in sorted(tok.special_tokens.items(), key=lambda si: si[1])]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Lowercase"} if words and tok.lowercase else None,
        "pre_tokenizer": {"type": "Split", "pattern": {"Regex": WORD_PATTERN if words else CHAR_PATTERN},
                          "behavior": "Removed" if words else "Isolated", "invert": words},
        "post_processor": None,
        "decoder": None if words else {"type": "Fuse"},
        # a character tokenizer without unk_token refuses unseen characters; WordLevel then errs too
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": tok.unk_token or "<unk>"},
    }
