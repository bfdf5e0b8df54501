"""minipt's RoBERTa <-> transformers' ``RobertaForMaskedLM`` (Liu et al. 2019, ``roberta``).

Tensor names (minipt name on the right; every entry a plain copy or, for q/k/v, rows of
the fused ``c_attn``, exactly as BERT's in ``bert_layout.py``):

    roberta.embeddings.*                 encoder.embeddings.*   (word (V, C), position (P, C), token_type, LayerNorm)
    roberta.encoder.layer.i.*            encoder.stack.blocks.i.*   (bert_layout.layer_entries)
    lm_head.dense.weight / .bias (C, C)  mlm.dense.*
    lm_head.layer_norm.weight / .bias    mlm.ln.*
    lm_head.bias (V,)                    mlm.bias

- **No pooler, no NSP.** ``RobertaForMaskedLM`` builds its encoder without the pooler;
  minipt's RoBERTa (``nsp=False``) has none either. A ``RobertaModel`` file (names without
  ``roberta.``) has a pooler and no ``lm_head``: the pooler is skipped (``UNUSED``), the
  MLM head left at its initialisation, and one note says both (``pretrained.py``).
- **Tied decoder.** ``lm_head.decoder.weight`` is the word embedding and
  ``lm_head.decoder.bias`` is ``lm_head.bias``; older files store the copies, which are
  checked equal and dropped (``tied_copies``).
- **Positions.** transformers numbers real tokens from ``pad_token_id + 1``, counting the
  ids that are not ``pad_token_id``, and gives padding the row ``pad_token_id``; minipt's
  ``position_offset`` = pad_token_id + 1 numbers them the same way
  (``models/encoder/roberta.py``), so outputs agree at every position, left padding included.
  ``max_position_embeddings`` (514 in roberta-base: 512 + the offset 2) is minipt's
  ``max_position``.
- **Options.** As BERT's (``bert_layout.read_encoder_config``), except that ``hidden_act``
  must be "gelu": transformers' RoBERTa LM head applies exact GELU whatever ``hidden_act``
  says, and minipt's head uses the encoder's activation. ``pad_token_id`` (default 1)
  sets ``position_offset``.
"""
from __future__ import annotations

from ..models.encoder.bert import BertForPreTraining
from ..models.encoder.roberta import RobertaConfig
from .bert_layout import encoder_config_to_hf, encoder_entries, read_encoder_config
from .layout import Entry

MODEL_TYPE = "roberta"
ARCHITECTURE = "RobertaForMaskedLM"
ACCEPTED = (ARCHITECTURE, "RobertaModel")
HEADS = {"MLM head": "lm_head."}
UNUSED = {"roberta.pooler.": "minipt's RoBERTa has no pooler (nor has RobertaForMaskedLM)"}
PREFIX = "roberta."
CONFIG = RobertaConfig
_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")


def entries(config: RobertaConfig) -> list[Entry]:
    table = encoder_entries(config, hf=PREFIX)
    for k in ("weight", "bias"):
        table += [Entry(f"lm_head.dense.{k}", f"mlm.dense.{k}"), Entry(f"lm_head.layer_norm.{k}", f"mlm.ln.{k}")]
    table.append(Entry("lm_head.bias", "mlm.bias"))
    return table


def tied_copies(config: RobertaConfig) -> dict[str, str]:
    return {"lm_head.decoder.weight": "roberta.embeddings.word_embeddings.weight", "lm_head.decoder.bias": "lm_head.bias"}


def build(config: RobertaConfig, rng, dtype) -> BertForPreTraining:
    return BertForPreTraining(config, rng=rng, dtype=dtype, name="roberta")


def is_buffer(name: str) -> bool:
    return name.endswith(_BUFFERS)


def export_problem(config) -> str | None:
    if not isinstance(config, RobertaConfig):
        return f"{type(config).__name__}: RobertaForMaskedLM holds minipt's RoBERTa only"
    if config.embedding_size is not None:
        return f"embedding_size={config.embedding_size}: RobertaForMaskedLM has no factorised embedding"
    if config.activation != "gelu":
        return f"activation={config.activation!r}: RobertaForMaskedLM's LM head applies exact GELU ('gelu')"
    return None


def config_from_hf(hf: dict) -> RobertaConfig:
    """A ``RobertaConfig`` dictionary -> minipt's ``RobertaConfig``; unsupported options raise."""
    pad = hf.get("pad_token_id", 1)
    if not isinstance(pad, int) or isinstance(pad, bool) or pad < 0:
        raise ValueError(f"config.json: pad_token_id must be a token id (an int >= 0), got {pad!r}")
    return read_encoder_config(hf, ACCEPTED, cls=RobertaConfig, activations=("gelu",),
                               pad_token_id=pad, position_offset=pad + 1)


def config_to_hf(c: RobertaConfig, dtype: str, bos: int | None = None, eos: int | None = None) -> dict:
    return {"architectures": [ARCHITECTURE], "model_type": MODEL_TYPE, **encoder_config_to_hf(c, dtype),
            "pad_token_id": c.pad_token_id, "bos_token_id": 0 if bos is None else bos,
            "eos_token_id": 2 if eos is None else eos}
