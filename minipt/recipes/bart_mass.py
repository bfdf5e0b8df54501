"""The recipes behind ``minipt train bart`` and ``minipt train mass``: denoising
pre-training on the toy language's texts, then the text-to-text mixture of toy tasks
(``recipes/seq2seq.py``'s ``make_recipe``, whose run folder, report and ``minipt generate``
they share).

- **BART** (Lewis et al. 2020, Sec. 2.2): the encoder reads a noised text, the decoder
  (started from ``</s>``, as transformers' BART) rebuilds the original followed by
  ``</s>``. ``NOISES`` names the five noises of ``objectives/bart_noise.py`` (token
  masking 15 %, token deletion 15 %, text infilling 30 % with Poisson(3) spans, sentence
  permutation at each ``.``, document rotation), their paper's best combination
  ``infilling+permutation``, and ``none`` (the identity: an autoencoder with nothing to
  repair). The preset pre-trains with ``infilling+permutation``.
- **MASS** (Song et al. 2019): one fragment of half of each text masked in the encoder,
  predicted by the decoder (``models/seq2seq/mass.py``: ``mass_batch``,
  ``mass_decoder_input``); the decoder starts from ``[MASK]``.

The texts are the toy tasks' inputs without their prefixes (sentences and short
documents of the toy language); ``[MASK]`` is one more special token of the task
tokenizer (``data/text_to_text.build_tokenizer``).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ..models.protocol import IGNORE
from ..models.registry import Preset
from ..objectives import bart_noise as bn
from ..tokenizers.special import EOS, MASK, PAD
from .seq2seq import Seq2SeqHooks, make_recipe

NOISE_NAMES = ("none", "masking", "deletion", "infilling", "permutation", "rotation", "infilling+permutation")
MAX_LEN = 48                                         # source and target positions of the presets


def noise(name: str, tok):
    """The noising function ``f(ids, rng) -> ids`` called ``name`` (see ``NOISE_NAMES``)."""
    mask, stop = tok.token_to_id(MASK), tok.token_to_id(".")
    fns = {"none": lambda ids, rng: np.asarray(ids),
           "masking": partial(bn.token_masking, mask_id=mask, p=0.15),
           "deletion": partial(bn.token_deletion, p=0.15),
           "infilling": partial(bn.text_infilling, mask_id=mask, mask_ratio=0.3, poisson_lambda=3.0),
           "permutation": partial(bn.sentence_permutation, eos_id=stop),
           "rotation": bn.document_rotation}
    if name == "infilling+permutation":
        return bn.compose(fns["permutation"], fns["infilling"])
    if name not in fns:
        raise ValueError(f"unknown noise {name!r}; choose one of {list(NOISE_NAMES)}")
    return fns[name]


def pretraining_texts(data: dict, split: str) -> list[str]:
    """The toy tasks' inputs of ``split`` without their prefixes (what pre-training reads)."""
    return [e["input"].split(":", 1)[1].strip() for task in data.values() for e in task[split]]


def _pad(rows: list, value: int) -> np.ndarray:
    out = np.full((len(rows), max(len(r) for r in rows)), value, dtype=np.int64)   # (B, T)
    for b, r in enumerate(rows):
        out[b, :len(r)] = r
    return out


def _sample(tok, texts, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    if not texts:
        raise ValueError("pre-training needs texts; got none")
    picks = rng.integers(0, len(texts), size=batch_size)
    return [np.array(tok.encode(texts[i])[:MAX_LEN - 1], dtype=np.int64) for i in picks]


def denoising_batch(tok, texts, batch_size: int, rng: np.random.Generator, noise_name: str = "infilling+permutation"):
    """BART's objective on ``batch_size`` random texts -> source (B, S) noised and padded,
    target_in (B, T) = </s> x, targets (B, T) = x </s> (IGNORE on padding)."""
    f, pad, eos, mask = noise(noise_name, tok), tok.token_to_id(PAD), tok.token_to_id(EOS), tok.token_to_id(MASK)
    rows = _sample(tok, texts, batch_size, rng)
    src = [f(r, rng)[:MAX_LEN] for r in rows]
    src = [s if len(s) else np.array([mask]) for s in src]                  # everything deleted: one [MASK]
    target_in = _pad([np.concatenate([[eos], r]) for r in rows], pad)
    targets = _pad([np.concatenate([r, [eos]]) for r in rows], IGNORE)
    return _pad(src, pad), target_in, targets


def mass_pretrain_batch(tok, texts, batch_size: int, rng: np.random.Generator, fragment: float = 0.5):
    """MASS's objective on ``batch_size`` random texts -> source (B, m) with a fragment
    masked, target_in (B, m) (the fragment shifted, [MASK] elsewhere), targets (B, m)."""
    from ..models.seq2seq.mass import mass_batch, mass_decoder_input
    mask = tok.token_to_id(MASK)
    src, targets = mass_batch(_sample(tok, texts, batch_size, rng), rng, mask, fragment, pad_id=tok.token_to_id(PAD))
    return src, mass_decoder_input(targets, mask), targets


def _settings(tok, **extra) -> dict:
    return dict(vocab_size=tok.vocab_size, pad_id=tok.token_to_id(PAD), eos_id=tok.token_to_id(EOS), **extra)


BART_HOOKS = Seq2SeqHooks(model_settings=lambda tok: _settings(tok, decoder_start_id=tok.token_to_id(EOS)),
                          start_token=EOS, extra_specials=(MASK,), pretrain_batch=denoising_batch)
MASS_HOOKS = Seq2SeqHooks(model_settings=lambda tok: _settings(tok, mask_id=tok.token_to_id(MASK)),
                          start_token=MASK, extra_specials=(MASK,), pretrain_batch=mass_pretrain_batch)
train_bart = make_recipe(BART_HOOKS)
train_mass = make_recipe(MASS_HOOKS)

_MODEL = dict(encoder_layers=2, decoder_layers=2, n_head=4, d_model=64, max_source_len=MAX_LEN, max_target_len=24)
# 300 pre-training steps, then 1500 on the mixture on a fresh schedule (experiments/protocol.py):
# the fine-tuning budget of `minipt train t5` and `minipt train transformer`. With 500 the
# fresh schedule leaves translate and summarize at 0.000.
_TRAIN = dict(steps=1800, lr=2e-3, min_lr=2e-4, warmup=60, weight_decay=0.01, eval_every=300, eval_batches=4,
              grad_clip=1.0)
# BART at lr 2e-3 sat on a knife's edge: the same run gave translate exact match 0.885,
# 0.420, 0.170 or 0.095 depending on float32 rounding alone (attention path, loss kernel,
# commit), training loss 0.15-1.0. At 1e-3 it gave 0.965 and 0.965 on one thread and on two.
_BART_TRAIN = {**_TRAIN, "lr": 1e-3, "min_lr": 1e-4}
BART_PRESETS = {"toy": Preset(model=_MODEL, batch_size=32, train=_BART_TRAIN,
                              data=dict(sizes=(2000, 100, 200), limit=None, pretrain_steps=300),
                              expected="300 steps of infilling + permutation, then 1500 of the mixture; results: "
                                       "reports/presets/bart.json (the README's table)")}
MASS_PRESETS = {"toy": Preset(model=_MODEL, batch_size=32, train=_TRAIN,
                              data=dict(sizes=(2000, 100, 200), limit=None, pretrain_steps=300),
                              expected="300 steps of MASS (k = m/2), then 1500 of the mixture; results: "
                                       "reports/presets/mass.json (the README's table)")}
