"""The work behind ``minipt export --checkpoint CKPT --to FOLDER`` and ``minipt sample --hf FOLDER``.

- ``export_checkpoint``: the model and tokenizer of a ``minipt train gpt`` run
  (``recipes.char_lm.load_trained``) -> a transformers folder (``save_pretrained``). A byte-level
  BPE tokenizer becomes GPT-2's ``vocab.json`` + ``merges.txt``; the character tokenizer
  of minipt's presets has no transformers form and is written as ``minipt_tokenizer.json``
  (see ``tokenizers/gpt2_files.py``), which the returned note says.
- ``load_hf_for_sampling``: a transformers folder -> (minipt model, tokenizer or None):
  GPT-2 tokenizer files (or ``tokenizer.json``) if present, else ``minipt_tokenizer.json``,
  else None (the caller then works on ids).
"""
from __future__ import annotations

from pathlib import Path

from ..tokenizers.byte_bpe import ByteBPETokenizer
from .pretrained import MINIPT_TOKENIZER, from_pretrained, save_pretrained


def export_checkpoint(checkpoint_path, folder, *, overwrite: bool = False) -> tuple[Path, str]:
    """Export a training run (its ``--out`` folder, or the ``checkpoint.npz`` inside it) to
    ``folder``; returns the folder and a one-line note on the tokenizer files."""
    from ..recipes.char_lm import load_trained

    run = Path(checkpoint_path)
    if run.suffix == ".npz":                      # the checkpoint file itself: its run folder
        run = run.parent
    model, tokenizer = load_trained(str(run))
    out = save_pretrained(model, folder, tokenizer=tokenizer, overwrite=overwrite)
    arch = "LlamaForCausalLM" if model.config.norm == "rms" else "GPT2LMHeadModel"
    if isinstance(tokenizer, ByteBPETokenizer):
        note = (f"{arch} with GPT-2 tokenizer files (vocab.json, merges.txt): "
                f"AutoModelForCausalLM / AutoTokenizer.from_pretrained('{out}') load it")
    else:
        note = (f"{arch}; the {type(tokenizer).__name__} has no transformers form, so it is saved as "
                f"{MINIPT_TOKENIZER} (minipt.tokenizers.Tokenizer.load): encode and decode ids with minipt")
    return out, note


def load_tokenizer(folder):
    """The tokenizer stored beside a model, or None."""
    from ..tokenizers.base import Tokenizer
    from ..tokenizers.gpt2_files import MERGES, TOKENIZER_JSON, VOCAB, load_gpt2_files

    folder = Path(folder)
    if ((folder / VOCAB).is_file() and (folder / MERGES).is_file()) or (folder / TOKENIZER_JSON).is_file():
        return load_gpt2_files(folder)
    if (folder / MINIPT_TOKENIZER).is_file():
        return Tokenizer.load(folder / MINIPT_TOKENIZER)
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
