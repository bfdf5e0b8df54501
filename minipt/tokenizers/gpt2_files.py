"""GPT-2's tokenizer files: ``vocab.json`` + ``merges.txt`` (Radford et al. 2019, Sec. 2.2).

A byte-level BPE tokenizer (``byte_bpe.py``) *is* two tables, and GPT-2 released them as
two files, the format ``transformers``' ``GPT2Tokenizer`` reads:

- ``vocab.json``: one JSON object, token string -> id. Tokens are written in the
  bytes-to-unicode alphabet (``bytes_to_unicode``: a space is ``Ġ``, a newline ``Ċ``, the
  bytes of a Chinese character are three Latin-1-looking characters), so every token is
  printable text. Special tokens (GPT-2: ``<|endoftext|>``, the last id) are in it too.
- ``merges.txt``: the header line ``#version: 0.2``, then one merge per line, the two
  token strings separated by one space, in the order they were learned (their rank).
  No token holds a space (it is ``Ġ``), so the split is unambiguous.

``save_gpt2_files`` writes both plus a ``tokenizer_config.json`` naming the class and
the special tokens; ``load_gpt2_files`` reads them back into a ``ByteBPETokenizer``, and
also reads the single ``tokenizer.json`` that transformers 5 writes for a GPT-2-style
tokenizer (a byte-level ``BPE`` model with its vocab and merges). A vocab entry that is
neither one of the 256 byte tokens nor the result of a merge is a special token.

Character-level models (``CharTokenizer``, what ``minipt train gpt`` uses) have no GPT-2
file form: their ids are code points of the training text, not byte-level BPE, and
transformers has no tokenizer class that reproduces them. ``minipt export`` then writes the
model plus ``minipt_tokenizer.json`` (minipt's own format, ``Tokenizer.load``) and says so;
in transformers the model works on ids, encoded and decoded with minipt.
"""
from __future__ import annotations

import json
from pathlib import Path

from .base import Tokenizer
from .byte_bpe import BYTE_ALPHABET, ByteBPETokenizer
from .special import ENDOFTEXT

VOCAB, MERGES, TOKENIZER_CONFIG, TOKENIZER_JSON = "vocab.json", "merges.txt", "tokenizer_config.json", "tokenizer.json"
HEADER = "#version: 0.2"


def check_exportable(tok: Tokenizer, vocab_size: int | None = None) -> ByteBPETokenizer:
    """``tok`` must be a byte-level BPE tokenizer whose ids fit a model of ``vocab_size``."""
    if not isinstance(tok, ByteBPETokenizer):
        raise ValueError(f"only a byte-level BPE tokenizer has GPT-2 files; got a {type(tok).__name__} "
                         "(save it with its own .save(path) instead)")
    if vocab_size is not None and tok.vocab_size > vocab_size:
        raise ValueError(f"tokenizer has {tok.vocab_size} tokens but the model's vocab_size is {vocab_size}")
    return tok


def save_gpt2_files(tok: ByteBPETokenizer, folder, *, model_max_length: int | None = None,
                    roles: dict | None = None) -> list[Path]:
    """Write ``vocab.json``, ``merges.txt`` and ``tokenizer_config.json`` into ``folder``.
    ``roles``: the special-token attributes (``hf_files.special_roles``); by default
    ``<|endoftext|>`` is bos, eos and unk, as in GPT-2's release, and the rest additional."""
    check_exportable(tok)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab, merges = tok.to_vocab_merges()
    specials = list(tok.special_tokens)
    eot = ENDOFTEXT if ENDOFTEXT in specials else None
    if roles is None:
        roles = {"bos_token": eot, "eos_token": eot, "unk_token": eot, "pad_token": None,
                 "additional_special_tokens": [s for s in specials if s != ENDOFTEXT]}
    elif roles.get("unk_token") is None:                  # byte-level BPE spells everything; GPT-2 names one
        roles = {**roles, "unk_token": eot}
    config = {"tokenizer_class": "GPT2Tokenizer", "add_prefix_space": False, "errors": "replace", **roles}
    if model_max_length is not None:
        config["model_max_length"] = model_max_length
    paths = [folder / VOCAB, folder / MERGES, folder / TOKENIZER_CONFIG]
    paths[0].write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    paths[1].write_text("\n".join([HEADER, *(f"{a} {b}" for a, b in merges)]) + "\n", encoding="utf-8")
    paths[2].write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return paths


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not valid UTF-8 JSON ({e})") from None


def read_merges(path) -> list[tuple[str, str]]:
    """The merges of a ``merges.txt``: ``#version`` header and blank lines skipped."""
    merges = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").split("\n"), 1):
        if (n == 1 and line.startswith("#version")) or not line.strip():
            continue
        parts = line.rstrip("\r").split(" ")
        if len(parts) != 2 or not all(parts):
            raise ValueError(f"{path}, line {n}: expected two tokens separated by one space, got {line!r}")
        merges.append((parts[0], parts[1]))
    return merges


def _from_tokenizer_json(path: Path) -> tuple[dict, list, list[str]]:
    """vocab, merges and special tokens of a transformers ``tokenizer.json`` (GPT-2 style only)."""
    data = _read_json(path)
    model = data.get("model") or {}
    pre = data.get("pre_tokenizer") or {}
    if model.get("type") != "BPE":
        raise ValueError(f"{path}: model type {model.get('type')!r}; only byte-level BPE (GPT-2) is read")
    if pre.get("type") != "ByteLevel" or pre.get("add_prefix_space") or not pre.get("use_regex", True):
        raise ValueError(f"{path}: pre_tokenizer {pre}; expected GPT-2's ByteLevel (regex split, no prefix space)")
    for key in ("continuing_subword_prefix", "end_of_word_suffix", "dropout", "byte_fallback"):
        if model.get(key):
            raise ValueError(f"{path}: model.{key} = {model[key]!r} is not part of GPT-2's byte-level BPE")
    if data.get("normalizer"):
        raise ValueError(f"{path}: a normalizer ({data['normalizer'].get('type')}) is not part of GPT-2's BPE")
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model.get("merges", [])]
    specials = [t["content"] for t in data.get("added_tokens", []) if t.get("special")]
    return dict(model.get("vocab", {})), merges, specials


def load_gpt2_files(folder) -> ByteBPETokenizer:
    """A ``ByteBPETokenizer`` from GPT-2's ``vocab.json`` + ``merges.txt`` in ``folder`` (or,
    failing those, a transformers ``tokenizer.json`` of the same model)."""
    folder = Path(folder)
    if (folder / VOCAB).is_file() and (folder / MERGES).is_file():
        vocab, merges, specials = _read_json(folder / VOCAB), read_merges(folder / MERGES), []
        if not isinstance(vocab, dict):
            raise ValueError(f"{folder / VOCAB}: expected a JSON object token -> id")
    elif (folder / TOKENIZER_JSON).is_file():
        vocab, merges, specials = _from_tokenizer_json(folder / TOKENIZER_JSON)
    else:
        raise FileNotFoundError(f"{folder} has no {VOCAB} + {MERGES} (nor a {TOKENIZER_JSON})")
    for tok, i in vocab.items():
        if not isinstance(i, int) or isinstance(i, bool):
            raise ValueError(f"vocab: token {tok!r} has id {i!r}; expected an integer")
    made = {a + b for a, b in merges}
    byte_tokens = set(BYTE_ALPHABET)
    orphans = sorted((t for t in vocab if t not in byte_tokens and t not in made), key=vocab.get)
    specials = list(dict.fromkeys([*specials, *orphans]))
    return ByteBPETokenizer.from_vocab_merges(vocab, merges, specials=[s for s in specials if s in vocab])
