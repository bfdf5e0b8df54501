"""The work behind ``minipt export --checkpoint CKPT --to FOLDER`` and ``minipt sample --hf FOLDER``.

- ``export_checkpoint``: the model and tokenizer of a training run
  (``recipes.char_lm.load_trained``) -> a transformers folder (``save_pretrained``), the
  tokenizer in the form ``AutoTokenizer`` reads (``tokenizers/hf_files.py``); a family with
  no Hugging Face layout is refused in one line (``pretrained.layout_of``). The returned
  note names the class and the tokenizer files.
- ``load_hf_for_sampling``: a transformers folder -> (minipt model, tokenizer or None):
  ``minipt_tokenizer.json`` if present (an export writes it for every tokenizer but
  byte-level BPE), else GPT-2 tokenizer files (or ``tokenizer.json``), else None (the
  caller then works on ids).
"""
from __future__ import annotations

import json
from pathlib import Path

from ..tokenizers.hf_files import has_hf_form
from .pretrained import (
    MINIPT_TOKENIZER,
    export_files,
    from_pretrained,
    layout_of,
    save_pretrained,
)


def export_checkpoint(checkpoint_path, folder, *, overwrite: bool = False) -> tuple[Path, str]:
    """Export a training run (its ``--out`` folder, or the ``checkpoint.npz`` inside it) to
    ``folder``; returns the folder and a one-line note on what was written. An existing,
    non-empty ``folder`` needs ``overwrite`` (``--overwrite``), which replaces only the
    files an export writes. A model without a Hugging Face layout is a ValueError."""
    from ..recipes.char_lm import load_trained

    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise FileExistsError(f"--to {folder} is a file; --to names the folder to write")
    if (folder / "checkpoint.npz").is_file():
        raise FileExistsError(f"--to {folder} holds a training run (checkpoint.npz): the export's tokenizer.json "
                              "(transformers' form) would replace the run's; export to another folder")
    if folder.is_dir() and any(folder.iterdir()) and not overwrite:
        raise FileExistsError(f"--to {folder} exists and is not empty; pass --overwrite to replace the files an "
                              f"export writes there ({', '.join(sorted(export_files()))}); other files are kept")
    model, tokenizer = load_trained(checkpoint_path)
    layout = layout_of(model)                          # refuses a family without a layout, in one line
    out = save_pretrained(model, folder, tokenizer=tokenizer, overwrite=overwrite)
    parts = list(getattr(layout, "PARTS", ()))       # ELECTRA: discriminator/ and generator/
    where = f"{out}/{{{','.join(parts)}}}" if parts else str(out)
    tokenizer_files = export_files() - {"config.json", "model.safetensors"}
    files = sorted(p.name for p in (out / parts[0] if parts else out).iterdir() if p.name in tokenizer_files)
    arch = " + ".join(layout.PARTS.values()) if parts else layout.ARCHITECTURE
    if has_hf_form(tokenizer):
        note = (f"{arch} with the {type(tokenizer).__name__} as {', '.join(files)}: "
                f"transformers' {arch} and AutoTokenizer .from_pretrained('{where}') load it")
    else:
        note = (f"{arch}; the {type(tokenizer).__name__} has no transformers form, so it is saved as "
                f"{MINIPT_TOKENIZER} (minipt.tokenizers.Tokenizer.load): encode and decode ids with minipt")
    return out, note


GPT2_CLASSES = ("GPT2Tokenizer", "GPT2TokenizerFast")


def _check_gpt2_tokenizer(folder: Path) -> None:
    """Refuse, by name, tokenizer files that are not GPT-2's byte-level BPE: a
    ``tokenizer_config.json`` naming another class, or OpenAI GPT's own BPE (the
    ``openai-gpt`` release: lowercased text, word ends marked ``</w>``), which minipt does
    not implement and which would otherwise fail later with a less helpful message."""
    from ..tokenizers.gpt2_files import TOKENIZER_CONFIG, VOCAB

    config = folder / TOKENIZER_CONFIG
    if config.is_file():
        try:
            cls = json.loads(config.read_text(encoding="utf-8")).get("tokenizer_class")
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
            cls = None
        if cls is not None and cls not in GPT2_CLASSES:
            raise ValueError(f"{config}: tokenizer_class {cls!r} is not a tokenizer minipt reads (GPT-2's "
                             "byte-level BPE, or minipt_tokenizer.json)")
    try:
        vocab = json.loads((folder / VOCAB).read_text(encoding="utf-8")) if (folder / VOCAB).is_file() else {}
    except (json.JSONDecodeError, UnicodeDecodeError):
        vocab = {}                                    # load_gpt2_files names the damage
    if isinstance(vocab, dict) and sum(t.endswith("</w>") for t in vocab) > len(vocab) // 10:
        raise ValueError(f"{folder / VOCAB}: tokens ending in '</w>' are OpenAI GPT's BPE (lowercased, word-end "
                         "marks), not GPT-2's byte-level BPE; minipt does not implement it")


def load_tokenizer(folder):
    """The tokenizer stored beside a model, or None."""
    from ..tokenizers.base import Tokenizer
    from ..tokenizers.gpt2_files import MERGES, TOKENIZER_JSON, VOCAB, load_gpt2_files

    folder = Path(folder)
    if (folder / MINIPT_TOKENIZER).is_file():        # minipt's own form first: an export writes it beside
        return Tokenizer.load(folder / MINIPT_TOKENIZER)   # the transformers files of words, characters, WordPiece
    if ((folder / VOCAB).is_file() and (folder / MERGES).is_file()) or (folder / TOKENIZER_JSON).is_file():
        _check_gpt2_tokenizer(folder)
        return load_gpt2_files(folder)
    return None


def load_hf_for_sampling(folder, *, dtype=None):
    """(minipt GPT, tokenizer or None) from a transformers folder, in eval mode."""
    model = from_pretrained(folder, dtype=dtype)
    model.eval()
    tokenizer = load_tokenizer(folder)
    if tokenizer is not None and tokenizer.vocab_size > model.config.vocab_size:
        raise ValueError(f"{folder}: tokenizer has {tokenizer.vocab_size} tokens but the model's vocab_size "
                         f"is {model.config.vocab_size}")
    return model, tokenizer
