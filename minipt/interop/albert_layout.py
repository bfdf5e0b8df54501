"""minipt's ALBERT <-> transformers' ``AlbertForPreTraining`` (Lan et al. 2020, ``albert``).

Tensor names (g a layer group; minipt name on the right; plain copies, q/k/v as rows of
the fused ``c_attn``; nothing is transposed):

    albert.embeddings.*  (V, E), (P, E), (2, E), (E,)            encoder.embeddings.*
    albert.encoder.embedding_hidden_mapping_in.* (H, E), (H,)    encoder.embedding_projection.*
    albert.encoder.albert_layer_groups.g.albert_layers.0.        encoder.stack.blocks.g.
        attention.query / key / value.*   (H, H)                   attn.c_attn.* rows 0:H, H:2H, 2H:3H
        attention.dense.*                 (H, H)                   attn.c_proj.*
        attention.LayerNorm.*             (H,)                     ln_1.*  (post-LN, after attention)
        ffn.*                             (F, H)                   mlp.c_fc.*
        ffn_output.*                      (H, F)                   mlp.c_proj.*
        full_layer_layer_norm.*           (H,)                     ln_2.*
    albert.pooler.weight / .bias          (H, H)                 pooler.dense.*
    predictions.dense.*                   (E, H)                 mlm.dense.*
    predictions.LayerNorm.*               (E,)                   mlm.ln.*
    predictions.bias                      (V,)                   mlm.bias
    sop_classifier.classifier.*           (2, H)                 nsp.* rows swapped (``flip``): transformers' sentence_order_label 0 = in order, minipt's 1

- **Sharing.** transformers shares by *layer groups*: layer i runs group
  i * num_hidden_groups // num_hidden_layers. ``num_hidden_groups`` 1 is ALBERT's
  all-shared model, minipt's ``share="all"`` (only ``blocks.0`` holds arrays);
  ``num_hidden_groups`` = ``num_hidden_layers`` shares nothing (``share=None``).
  Other group counts, ``inner_group_num`` > 1, and minipt's attention-only / FFN-only
  sharing have no counterpart in the other library and are refused by name.
- **Tied decoder.** ``predictions.decoder.weight`` is the (V, E) word embedding and its
  bias ``predictions.bias``; stored copies in older files are checked and dropped.
- **Other classes.** ``AlbertForMaskedLM`` (albert-base-v2's ``architectures``) stores no
  pooler and no SOP head, ``AlbertModel`` (names without ``albert.``) no MLM head and no SOP
  head: they load into ``AlbertForPreTraining`` with those heads (``HEADS``) left at their
  initialisation, named in one note (``pretrained.py``).
- **Options.** As BERT's (``bert_layout.read_encoder_config``) with ALBERT's defaults
  (``hidden_act`` "gelu_new", dropout 0) and ``embedding_size`` (default 128) -> E.
  ``classifier_dropout_prob`` (dropout before the SOP classifier, training only) is read
  and not used.
"""
from __future__ import annotations

from ..models.encoder.albert import AlbertConfig, AlbertForPreTraining
from .bert_layout import (
    _EXPORT_ACT,
    ACTIVATION,
    encoder_config_to_hf,
    layer_entries,
    read_encoder_config,
)
from .hf_config import get_float, get_int
from .layout import Entry

MODEL_TYPE = "albert"
ARCHITECTURE = "AlbertForPreTraining"
ACCEPTED = (ARCHITECTURE, "AlbertModel", "AlbertForMaskedLM")
HEADS = {"MLM head": "predictions.", "pooler": "albert.pooler.", "SOP head": "sop_classifier."}
PREFIX = "albert."
CONFIG = AlbertConfig
_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")
_ALBERT_NAMES = {"attention.self.": "attention.", "attention.output.dense.": "attention.dense.",
                 "attention.output.LayerNorm.": "attention.LayerNorm.", "intermediate.dense.": "ffn.",
                 "output.dense.": "ffn_output.", "output.LayerNorm.": "full_layer_layer_norm."}


def _groups(config: AlbertConfig) -> int:
    return 1 if config.share == "all" else config.n_layer


def _albert_name(bert_name: str, hf: str) -> str:
    rest = bert_name[len(hf):]
    for bert, albert in _ALBERT_NAMES.items():
        if rest.startswith(bert):
            return hf + albert + rest[len(bert):]
    raise AssertionError(rest)


def entries(config: AlbertConfig) -> list[Entry]:
    table = [Entry(f"albert.embeddings.{n}.weight", f"encoder.embeddings.{n}.weight")
             for n in ("word_embeddings", "position_embeddings", "token_type_embeddings")]
    for k in ("weight", "bias"):
        table += [Entry(f"albert.embeddings.LayerNorm.{k}", f"encoder.embeddings.ln.{k}"),
                  Entry(f"albert.encoder.embedding_hidden_mapping_in.{k}", f"encoder.embedding_projection.{k}")]
    for g in range(_groups(config)):
        hf = f"albert.encoder.albert_layer_groups.{g}.albert_layers.0."
        table += [Entry(_albert_name(e.theirs, hf), e.ours, e.how, e.part, e.parts)
                  for e in layer_entries(g, hf, f"encoder.stack.blocks.{g}.")]
    for k in ("weight", "bias"):
        table += [Entry(f"albert.pooler.{k}", f"pooler.dense.{k}"), Entry(f"predictions.dense.{k}", f"mlm.dense.{k}"),
                  Entry(f"predictions.LayerNorm.{k}", f"mlm.ln.{k}"),
                  Entry(f"sop_classifier.classifier.{k}", f"nsp.{k}", "flip")]
    table.append(Entry("predictions.bias", "mlm.bias"))
    return table


def tied_copies(config: AlbertConfig) -> dict[str, str]:
    return {"predictions.decoder.weight": "albert.embeddings.word_embeddings.weight",
            "predictions.decoder.bias": "predictions.bias"}


def build(config: AlbertConfig, rng, dtype) -> AlbertForPreTraining:
    return AlbertForPreTraining(config, rng=rng, dtype=dtype)


def is_buffer(name: str) -> bool:
    return name.endswith(_BUFFERS)


def export_problem(config) -> str | None:
    if not isinstance(config, AlbertConfig):
        return f"{type(config).__name__}: AlbertForPreTraining holds minipt's ALBERT only"
    if config.share not in ("all", None) and config.n_layer > 1:
        return (f"share={config.share!r}: AlbertForPreTraining shares whole layers (all of them, or none), "
                "not the attention or the feed-forward sub-layer alone")
    if config.embedding_size is None:
        return "embedding_size=None: AlbertForPreTraining always has a factorised embedding (E -> H)"
    if config.position_offset:
        return f"position_offset={config.position_offset}: AlbertForPreTraining numbers positions from 0"
    if config.activation not in _EXPORT_ACT:
        return f"activation={config.activation!r}: AlbertForPreTraining reads {sorted(ACTIVATION)}"
    return None


def config_from_hf(hf: dict) -> AlbertConfig:
    """An ``AlbertConfig`` dictionary -> minipt's ``AlbertConfig``; unsupported options raise."""
    L, G = get_int(hf, "num_hidden_layers", 12), get_int(hf, "num_hidden_groups", 1)
    if G not in (1, L):
        raise ValueError(f"config.json: num_hidden_groups = {G} is not supported: minipt shares every layer "
                         f"(num_hidden_groups 1) or none (num_hidden_groups = num_hidden_layers = {L})")
    if get_int(hf, "inner_group_num", 1) != 1:
        raise ValueError(f"config.json: inner_group_num = {hf['inner_group_num']!r} is not supported: minipt's "
                         "ALBERT has one layer per group")
    get_float(hf, "classifier_dropout_prob", 0.1)
    return read_encoder_config(hf, ACCEPTED, cls=AlbertConfig, act_default="gelu_new", dropout_default=0.0,
                               embedding_size=get_int(hf, "embedding_size", 128), share="all" if G == 1 else None)


def config_to_hf(c: AlbertConfig, dtype: str, bos: int | None = None, eos: int | None = None) -> dict:
    return {"architectures": [ARCHITECTURE], "model_type": MODEL_TYPE, **encoder_config_to_hf(c, dtype),
            "embedding_size": c.embedding_size, "num_hidden_groups": _groups(c), "inner_group_num": 1,
            "classifier_dropout_prob": 0.1, "pad_token_id": 0, "bos_token_id": 2 if bos is None else bos,
            "eos_token_id": 3 if eos is None else eos}
