"""ALBERT (Lan, Chen, Goodman, Gimpel, Sharma & Soricut 2020, "ALBERT: A Lite BERT for
Self-supervised Learning of Language Representations").

Three changes to BERT (``bert.py``), the first two to cut parameters:
1. **Factorised embedding** (section 3.1): tokens are embedded in E << H dimensions and
   projected up, x = (W_tok[ids] + W_seg[s] + W_pos[t]) normalised, then x W_proj^T + b;
   V H embedding parameters become V E + E H. The MLM head maps H -> E and decodes with
   the tied (V, E) table.
2. **Cross-layer parameter sharing** (section 3.1, table 4): the L layers use one set of
   weights; ``share`` = ``"all"`` (ALBERT's default), ``"attention"`` (only the attention
   sub-layer) or ``"ffn"`` (only the feed-forward one), ``None`` none. The shared arrays
   receive the sum of every layer's gradient (``nn/stack.py``: ``tie_layers``).
3. **Sentence-order prediction** (section 3.2) replaces NSP: both segments come from the
   same document, consecutive; label 1 = in order, 0 = swapped. The head is the same
   pooled 2-way classifier as BERT's (named ``nsp.*``, its labels ``nsp_labels``); only the
   data differ (the pair maker of the data module).
ALBERT also drops dropout (section 4.9); the presets do.

``parameter_count`` gives the count from the configuration by formula (the model's own
``num_parameters()`` agrees, tested); ``paper_counts()`` evaluates it at the paper's
BERT-base and ALBERT-base sizes (table 1: 108M and 12M).

Parameters: as BERT's (``bert.py``) with E = ``embedding_size``, plus
``encoder.embedding_projection.weight`` (H, E) and ``.bias`` (H,); with sharing, only
``encoder.stack.blocks.0.*`` holds the shared arrays (``blocks.i`` for i > 0 names only
what is not shared).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ...recipes.encoder import PRESETS, EncoderHooks, encoder_recipe
from ..registry import ModelEntry, register
from .bert import TINY, BertConfig, BertForPreTraining, perturbed, tiny_batch

SHARE_MODES = ("all", "attention", "ffn")


@dataclass
class AlbertConfig(BertConfig):
    embedding_size: int | None = 16      # E; ALBERT-base: 128 with H 768
    share: str | None = "all"            # "all" | "attention" | "ffn" | None
    dropout: float = 0.0                 # ALBERT trains without dropout

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.share is not None and self.share not in SHARE_MODES:
            raise ValueError(f"share must be one of {', '.join(SHARE_MODES)} or None, got {self.share!r}")
        if not self.nsp:
            raise ValueError("ALBERT keeps its 2-way head for sentence-order prediction; nsp must be True")


class AlbertForPreTraining(BertForPreTraining):
    """BERT with a factorised embedding, shared layers, and its 2-way head used for SOP.
    ``loss, logits = model(input_ids, token_type_ids, attention_mask, mlm_labels, sop_labels)``."""

    def __init__(self, config: AlbertConfig, *, rng: np.random.Generator, dtype=np.float32, name: str = "albert"):
        super().__init__(config, rng=rng, dtype=dtype, name=name)
        if config.share is not None and config.n_layer > 1:
            self.encoder.stack.tie_layers(config.share)


def parameter_count(*, vocab_size: int, max_position: int, d_model: int, d_ff: int, n_layer: int,
                    type_vocab_size: int = 2, embedding_size: int | None = None, share: str | None = None,
                    nsp: bool = True) -> int:
    """Parameters of BERT / ALBERT pre-training models (encoder, MLM head, pooler and
    2-way head) from the sizes: V vocab, P positions, H hidden, F feed-forward, L layers,
    E embedding size (None: E = H, no projection)."""
    V, P, H, F, L = vocab_size, max_position, d_model, d_ff, n_layer
    E = H if embedding_size is None else embedding_size
    embeddings = (V + P + type_vocab_size) * E + 2 * E                  # tables + LayerNorm
    projection = 0 if embedding_size is None else E * H + H             # E -> H
    attention = 4 * (H * H + H)                                         # q, k, v, o with biases
    ffn = H * F + F + F * H + H
    norms = 2 * 2 * H                                                   # ln_1, ln_2
    if share is None:
        layers = L * (attention + ffn + norms)
    elif share == "all":
        layers = attention + ffn + norms
    elif share == "attention":
        layers = attention + L * (ffn + norms)
    elif share == "ffn":
        layers = ffn + L * (attention + norms)
    else:
        raise ValueError(f"share must be one of {', '.join(SHARE_MODES)} or None, got {share!r}")
    mlm = H * E + E + 2 * E + V                                          # transform, LayerNorm, output bias
    pooler_and_head = (H * H + H + 2 * H + 2) if nsp else 0
    return embeddings + projection + layers + mlm + pooler_and_head


BERT_BASE = dict(vocab_size=30000, max_position=512, d_model=768, d_ff=3072, n_layer=12)   # ALBERT table 1


def paper_counts() -> dict[str, int]:
    """BERT-base against ALBERT-base (E 128, all shared), V 30000 as in ALBERT's table 1."""
    return {"BERT-base": parameter_count(**BERT_BASE),
            "ALBERT-base": parameter_count(**BERT_BASE, embedding_size=128, share="all")}


# -- registry entry -------------------------------------------------------------------
ALBERT_TINY = {**TINY, "n_layer": 3, "embedding_size": 4, "dropout": 0.1}   # E 4 < H 8; three layers share


def build(*, rng: np.random.Generator, dtype=np.float32, **settings) -> AlbertForPreTraining:
    return AlbertForPreTraining(AlbertConfig(**settings), rng=rng, dtype=dtype, name="albert")


def tiny(share: str | None = "all") -> tuple[AlbertForPreTraining, tuple]:
    """Float64, perturbed after tying (so the shared arrays stay shared), the BERT batch
    with its 2-way labels read as sentence order."""
    model = build(rng=np.random.default_rng(0), dtype=np.float64, **{**ALBERT_TINY, "share": share})
    return perturbed(model), tiny_batch()


_bert = PRESETS["toy"]
ALBERT_PRESETS = {   # BERT's toy run with E 16, four layers sharing one set of weights, no dropout, SOP pairs
    "toy": replace(_bert, model={**_bert.model, "n_layer": 4, "embedding_size": 16, "share": "all", "dropout": 0.0},
                   expected="masked-token accuracy 0.346 (most-frequent-token baseline 0.124); SOP accuracy 0.495 "
                            "(chance 0.5: not learned at this budget); validation loss 3.132; 600 steps, 480 s on a "
                            "shared 2-core machine at load 20"),
}

register(ModelEntry(
    name="albert", title="ALBERT", paper="Lan et al. 2020, ALBERT: A Lite BERT for Self-supervised Learning "
    "of Language Representations", objective="MLM + SOP", build=build, tiny=tiny,
    lesson="16_bert_variants", presets=ALBERT_PRESETS, recipe=encoder_recipe(EncoderHooks(mode="sop",
                                                                                        sentence_task="SOP")),
    language_model=False, verbs=("fill", "embed")))
