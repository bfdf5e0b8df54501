"""MASS: masked sequence-to-sequence pre-training (Song, Tan, Qin, Lu & Liu 2019, "MASS:
Masked Sequence to Sequence Pre-training for Language Generation").

A sentence x of length m; a contiguous fragment x^{u:v} of length k = v - u + 1 is
replaced by [MASK] in the encoder input (x^{\\u:v}); the decoder predicts the fragment,
    L = sum_{t=u..v} log P(x_t | x^{<t within u:v}, x^{\\u:v}),
and its other positions are masked (Sec. 2.2, Fig. 1): the decoder's input at position t
is x_{t-1} when t-1 and t both lie in the fragment and [MASK] elsewhere (the first
fragment position reads [MASK] too), so the decoder learns from the encoder what it
cannot see, and only the fragment is scored. Positions keep their place in the sentence.

k moves MASS between the two pre-training families it unifies (Sec. 2.3, Table 1):
k = 1 predicts one masked token from the rest of the sentence with no decoder context
(BERT's masked LM); k = m masks the whole encoder input, so the decoder is a standard
left-to-right LM (GPT). ``mass_batch`` builds examples with ``objectives.unified.mass``
(fragment = k / m; 0 gives k = 1).

The network is BART's encoder-decoder (``bart.py``: post-LN, GELU, learned positions,
tied output layer; the MASS paper uses the same Transformer as XLM), with the decoder
input rule above; its parameters and their names are BART's (see that docstring).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.checks import check_ndim
from ...objectives.unified import mass
from ..protocol import IGNORE
from ..registry import GradcheckCase, ModelEntry, register
from .bart import Bart, BartConfig, positions_setting, tiny_model


@dataclass
class MASSConfig(BartConfig):
    mask_id: int = 3                      # [MASK]: the encoder's hidden fragment, the decoder's masked inputs

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 <= self.mask_id < self.vocab_size:
            raise ValueError(f"mask_id {self.mask_id} is outside the vocabulary [0, {self.vocab_size})")
        self.decoder_start_id = self.mask_id          # generation starts from [MASK], as training does


class MASS(Bart):
    def __init__(self, config: MASSConfig, *, rng: np.random.Generator, dtype=np.float32, name: str = "mass"):
        super().__init__(config, rng=rng, dtype=dtype, name=name)

    def decoder_input(self, targets: np.ndarray) -> np.ndarray:
        return mass_decoder_input(targets, self.config.mask_id)


def mass_decoder_input(targets: np.ndarray, mask_id: int) -> np.ndarray:
    """targets (B, T), IGNORE off the fragment -> decoder input (B, T): x_{t-1} where t-1
    and t are both in the fragment, [MASK] everywhere else."""
    check_ndim("targets", targets, 2)
    prev = np.full_like(targets, IGNORE)                                       # (B, T)
    prev[:, 1:] = targets[:, :-1]
    keep = (prev != IGNORE) & (targets != IGNORE)
    return np.where(keep, prev, mask_id)


def mass_batch(rows, rng: np.random.Generator, mask_id: int, fragment: float = 0.5, pad_id: int | None = None):
    """rows (B, m) of sentences, or B sentences of any lengths with ``pad_id`` -> encoder
    input (B, m) with one fragment (``fragment`` of each length, at least 1) masked per row,
    targets (B, m) holding the fragment and IGNORE elsewhere (``objectives.unified.mass``)."""
    if isinstance(rows, np.ndarray):
        check_ndim("rows", rows, 2)
    elif pad_id is None:
        raise ValueError("mass_batch: sentences of different lengths need a pad_id")
    if not len(rows):
        raise ValueError("mass_batch: no sentences given")
    m = max(len(r) for r in rows)
    enc = np.full((len(rows), m), -1 if pad_id is None else pad_id, dtype=np.int64)   # (B, m)
    targets = np.full((len(rows), m), IGNORE, dtype=np.int64)                       # (B, m)
    for b, ids in enumerate(rows):
        e, _, frag, start = mass(np.asarray(ids), rng, mask_id, fragment)
        enc[b, :len(e)] = e
        targets[b, start:start + len(frag)] = frag
    return enc, targets


def build(*, rng, dtype=np.float32, **settings) -> MASS:
    return MASS(MASSConfig(**positions_setting(settings)), rng=rng, dtype=dtype)


def tiny():
    """A fragment of 3 in row 0 and of 6 (k = m, every source token masked) in row 1."""
    rows = np.array([[0, 5, 6, 7, 8, 2], [0, 8, 9, 4, 6, 2]])
    enc, targets = rows.copy(), np.full_like(rows, IGNORE)
    enc[0, 2:5], targets[0, 2:5] = 3, rows[0, 2:5]
    enc[1], targets[1] = 3, rows[1]
    model = tiny_model(seed=7, cls=lambda c, **kw: MASS(MASSConfig(**vars(c)), **kw))
    return model, (enc, model.decoder_input(targets), targets)


def _check_k1():
    """k = 1 in both rows: no decoder context at all, one scored position per row."""
    from ...core.gradcheck import check_module
    model, _ = tiny()
    rows = np.array([[0, 5, 6, 7, 8, 2], [0, 8, 9, 4, 6, 2]])
    enc, targets = mass_batch(rows, np.random.default_rng(0), 3, fragment=0.0)
    return check_module(model, enc, model.decoder_input(targets), targets, select=lambda out: out[0], max_checks=4)


from ...recipes.bart_mass import MASS_PRESETS, train_mass  # noqa: E402

register(ModelEntry(
    name="mass", title="MASS", paper="Song et al. 2019, MASS: Masked Sequence to Sequence Pre-training for "
    "Language Generation", objective="masked fragment, predicted by the decoder",
    build=build, tiny=tiny, lesson="20_bart_mass", language_model=False, presets=MASS_PRESETS, recipe=train_mass,
    verbs=("generate",),
    gradchecks=(GradcheckCase("MASS with k = 1", "one masked token per row (BERT-like)", _check_k1),)))
