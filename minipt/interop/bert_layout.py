"""minipt's BERT <-> transformers' ``BertForPreTraining`` (Devlin et al. 2019, ``bert``).

Tensor names (layer i; minipt name on the right, under ``encoder.`` unless it says
otherwise; all ``nn.Linear``, stored (C_out, C_in) like minipt's ``Linear``, so nothing is
transposed):

    bert.embeddings.word_embeddings.weight          (V, C)   embeddings.word_embeddings.weight (also the MLM decoder)
    bert.embeddings.position_embeddings.weight      (P, C)   embeddings.position_embeddings.weight
    bert.embeddings.token_type_embeddings.weight    (2, C)   embeddings.token_type_embeddings.weight
    bert.embeddings.LayerNorm.weight / .bias        (C,)     embeddings.ln.weight / .bias
    bert.encoder.layer.i.attention.self.query.*     (C, C)   stack.blocks.i.attn.c_attn.* rows 0:C
    bert.encoder.layer.i.attention.self.key.*       (C, C)   ... rows C:2C
    bert.encoder.layer.i.attention.self.value.*     (C, C)   ... rows 2C:3C
    bert.encoder.layer.i.attention.output.dense.*   (C, C)   stack.blocks.i.attn.c_proj.*
    bert.encoder.layer.i.attention.output.LayerNorm (C,)     stack.blocks.i.ln_1.*   (post-LN: after attention)
    bert.encoder.layer.i.intermediate.dense.*       (F, C)   stack.blocks.i.mlp.c_fc.*
    bert.encoder.layer.i.output.dense.*             (C, F)   stack.blocks.i.mlp.c_proj.*
    bert.encoder.layer.i.output.LayerNorm.*         (C,)     stack.blocks.i.ln_2.*   (post-LN: after the FFN)
    bert.pooler.dense.weight / .bias                (C, C)   pooler.dense.*          (top level)
    cls.predictions.transform.dense.*               (C, C)   mlm.dense.*             (top level)
    cls.predictions.transform.LayerNorm.*           (C,)     mlm.ln.*
    cls.predictions.bias                            (V,)     mlm.bias
    cls.seq_relationship.weight / .bias             (2, C)   nsp.weight / .bias, rows swapped (``flip``)

- **Split q, k, v.** transformers projects q, k, v with three ``Linear`` layers; minipt
  fuses them into ``c_attn`` (3C, C), head h in rows h*D:(h+1)*D of each third, as
  transformers cuts each projection into heads; the rows are cut apart on export and
  stacked on import.
- **NSP labels.** transformers' ``next_sentence_label`` 0 is IsNext (as Google's BERT);
  minipt's ``nsp_labels`` 1 is. The two rows of ``nsp.weight`` and ``nsp.bias`` are swapped
  on import and export (``flip``), so an imported head scores IsNext in minipt's row 1.
- **Tied decoder.** ``cls.predictions.decoder.weight`` is the word embedding and its bias
  is ``cls.predictions.bias``; transformers 5 stores neither copy. Older files store both
  (``tied_copies``): they are read, checked equal to what they copy, and dropped.
- **Options** (``config_from_hf``): ``hidden_size``, ``num_hidden_layers``,
  ``num_attention_heads``, ``intermediate_size``, ``max_position_embeddings``,
  ``type_vocab_size``, ``vocab_size``, ``layer_norm_eps`` map onto ``BertConfig``;
  ``hidden_act`` "gelu" (exact), "gelu_new" / "gelu_pytorch_tanh" (tanh) or "relu";
  ``hidden_dropout_prob`` and ``attention_probs_dropout_prob`` must be equal (minipt has
  one rate). Refused by name: ``position_embedding_type`` other than "absolute",
  ``is_decoder``, ``add_cross_attention``, ``tie_word_embeddings`` false (minipt's MLM
  decoder is the embedding), ``embedding_size`` (ALBERT's, another model type).
  ``pad_token_id`` is read and not used: in transformers it only zeroes the padding
  row's gradient, and padding never reaches a loss in minipt either.
- **Other classes.** ``BertForMaskedLM`` (bert-base-uncased's ``architectures``) stores no
  pooler and no NSP head, a ``BertModel`` file (names without ``bert.``) no ``cls.`` heads;
  ``from_pretrained`` loads either into ``BertForPreTraining``, the heads it lacks (``HEADS``)
  left at their initialisation and named in one note (``pretrained.py``).
  ``encoder_entries`` also maps the encoder alone onto a ``BertEncoder``
  (``sentence_embeddings.py``).
- **Buffers.** ``embeddings.position_ids`` and ``embeddings.token_type_ids`` (index
  tables of older files) are not parameters and are skipped.
"""
from __future__ import annotations

from ..models.encoder.bert import BertConfig, BertForPreTraining
from .hf_config import check_architectures, expect, get_bool, get_float, get_int
from .layout import Entry

MODEL_TYPE = "bert"
ARCHITECTURE = "BertForPreTraining"
ACCEPTED = (ARCHITECTURE, "BertForMaskedLM", "BertModel")
HEADS = {"MLM head": "cls.predictions.", "pooler": "bert.pooler.", "NSP head": "cls.seq_relationship."}
PREFIX = "bert."
CONFIG = BertConfig
ACTIVATION = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu"}
_EXPORT_ACT = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu"}
_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")


def layer_entries(i: int, hf: str, mp: str) -> list[Entry]:
    """One post-LN encoder layer in transformers' BERT naming (shared by RoBERTa and ELECTRA):
    ``hf`` e.g. "bert.encoder.layer.0.", ``mp`` e.g. "encoder.stack.blocks.0."."""
    table = []
    for kind in ("weight", "bias"):
        for part, name in enumerate(("query", "key", "value")):            # rows of the fused c_attn
            table.append(Entry(f"{hf}attention.self.{name}.{kind}", f"{mp}attn.c_attn.{kind}", "rows", part, 3))
        table += [Entry(f"{hf}attention.output.dense.{kind}", f"{mp}attn.c_proj.{kind}"),
                  Entry(f"{hf}attention.output.LayerNorm.{kind}", f"{mp}ln_1.{kind}"),
                  Entry(f"{hf}intermediate.dense.{kind}", f"{mp}mlp.c_fc.{kind}"),
                  Entry(f"{hf}output.dense.{kind}", f"{mp}mlp.c_proj.{kind}"),
                  Entry(f"{hf}output.LayerNorm.{kind}", f"{mp}ln_2.{kind}")]
    return table


def encoder_entries(config: BertConfig, hf: str = PREFIX, mp: str = "encoder.") -> list[Entry]:
    """Embeddings and layers: transformers' ``{hf}embeddings...`` <-> minipt's ``{mp}embeddings...``."""
    table = [Entry(f"{hf}embeddings.{n}.weight", f"{mp}embeddings.{n}.weight")
             for n in ("word_embeddings", "position_embeddings", "token_type_embeddings")]
    table += [Entry(f"{hf}embeddings.LayerNorm.{k}", f"{mp}embeddings.ln.{k}") for k in ("weight", "bias")]
    for i in range(config.n_layer):
        table += layer_entries(i, f"{hf}encoder.layer.{i}.", f"{mp}stack.blocks.{i}.")
    return table


def entries(config: BertConfig) -> list[Entry]:
    """The name table for ``BertForPreTraining`` (see the module docstring)."""
    table = encoder_entries(config)
    for k in ("weight", "bias"):
        table += [Entry(f"bert.pooler.dense.{k}", f"pooler.dense.{k}"),
                  Entry(f"cls.predictions.transform.dense.{k}", f"mlm.dense.{k}"),
                  Entry(f"cls.predictions.transform.LayerNorm.{k}", f"mlm.ln.{k}"),
                  Entry(f"cls.seq_relationship.{k}", f"nsp.{k}", "flip")]
    table.append(Entry("cls.predictions.bias", "mlm.bias"))
    return table


def tied_copies(config: BertConfig) -> dict[str, str]:
    """Tensors an older file may store that only repeat a tied one: name -> the one it copies."""
    return {"cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight",
            "cls.predictions.decoder.bias": "cls.predictions.bias"}


def build(config: BertConfig, rng, dtype) -> BertForPreTraining:
    return BertForPreTraining(config, rng=rng, dtype=dtype)


def is_buffer(name: str) -> bool:
    return name.endswith(_BUFFERS)


def export_problem(config) -> str | None:
    """Why ``BertForPreTraining`` cannot hold ``config`` (another member of the family), or None."""
    if type(config) is not BertConfig:                # RobertaConfig, AlbertConfig: their own layouts
        return f"{type(config).__name__}: BertForPreTraining holds minipt's BERT (BertConfig) only"
    for field, bert, what in (("embedding_size", None, "a factorised embedding (ALBERT)"),
                              ("nsp", True, "no NSP head (RoBERTa)"),
                              ("position_offset", 0, "positions offset past the padding id (RoBERTa)"),
                              ("causal", False, "left-to-right attention")):
        if getattr(config, field) != bert:
            return f"{field}={getattr(config, field)!r}: BertForPreTraining has no {what}"
    if config.activation not in _EXPORT_ACT:
        return f"activation={config.activation!r}: BertForPreTraining reads {sorted(ACTIVATION)}"
    return None


def read_encoder_config(hf: dict, accepted: tuple[str, ...] = ACCEPTED, cls=BertConfig,
                        activations: tuple[str, ...] = tuple(ACTIVATION), act_default: str = "gelu",
                        dropout_default: float = 0.1, **fields) -> BertConfig:
    """The options every BERT-style ``config.json`` shares -> ``cls(**fields, ...)``;
    unsupported options raise, naming them. ``activations``: the ``hidden_act`` values the
    architecture can take in minipt (RoBERTa's and ELECTRA's heads hard-code exact GELU)."""
    check_architectures(hf, accepted)
    act = expect(hf, "hidden_act", activations, act_default,
                 f"minipt's {cls.__name__} reads hidden_act {', '.join(activations)}")
    expect(hf, "position_embedding_type", ("absolute",), "absolute",
           "minipt's BERT has learned absolute positions only")
    expect(hf, "is_decoder", (False,), False, "minipt's BERT is a bidirectional encoder")
    expect(hf, "add_cross_attention", (False,), False, "minipt's BERT has no cross-attention")
    if not get_bool(hf, "tie_word_embeddings", True):
        raise ValueError("config.json: tie_word_embeddings = false is not supported: minipt's MLM decoder is "
                         "the word embedding")
    rates = {k: get_float(hf, k, dropout_default) for k in ("hidden_dropout_prob", "attention_probs_dropout_prob")}
    if len(set(rates.values())) > 1:
        raise ValueError(f"config.json: dropout rates {rates} differ; minipt has one dropout rate for "
                         "attention, residual branches and embeddings")
    C, H = get_int(hf, "hidden_size", 768), get_int(hf, "num_attention_heads", 12)
    if C % H:
        raise ValueError(f"config.json: hidden_size {C} is not divisible by num_attention_heads {H}")
    return cls(vocab_size=get_int(hf, "vocab_size", 30522),
               max_position=get_int(hf, "max_position_embeddings", 512),
               type_vocab_size=get_int(hf, "type_vocab_size", 2),
               n_layer=get_int(hf, "num_hidden_layers", 12), n_head=H, d_model=C,
               d_ff=get_int(hf, "intermediate_size", 3072), dropout=rates["hidden_dropout_prob"],
               eps=get_float(hf, "layer_norm_eps", 1e-12), activation=ACTIVATION[act], **fields)


def config_from_hf(hf: dict) -> BertConfig:
    """A ``BertConfig`` dictionary (transformers') -> minipt's ``BertConfig``; unsupported options raise."""
    if "embedding_size" in hf:
        raise ValueError(f"config.json: embedding_size = {hf['embedding_size']!r} is not supported by model_type "
                         "'bert': a factorised embedding is ALBERT's (model_type 'albert')")
    return read_encoder_config(hf)


def encoder_config_to_hf(c: BertConfig, dtype: str) -> dict:
    """The options every BERT-style ``config.json`` shares, from minipt's ``BertConfig``."""
    return {
        "vocab_size": c.vocab_size, "hidden_size": c.d_model, "num_hidden_layers": c.n_layer,
        "num_attention_heads": c.n_head, "intermediate_size": c.d_ff, "hidden_act": _EXPORT_ACT[c.activation],
        "hidden_dropout_prob": c.dropout, "attention_probs_dropout_prob": c.dropout,
        "max_position_embeddings": c.max_position, "type_vocab_size": c.type_vocab_size,
        "layer_norm_eps": c.eps, "initializer_range": 0.02, "position_embedding_type": "absolute",
        "is_decoder": False, "add_cross_attention": False, "tie_word_embeddings": True,
        "dtype": dtype, "torch_dtype": dtype,
    }


def config_to_hf(c: BertConfig, dtype: str, bos: int | None = None, eos: int | None = None) -> dict:
    """minipt's ``BertConfig`` -> the ``config.json`` that ``BertForPreTraining`` reads."""
    return {"architectures": [ARCHITECTURE], "model_type": MODEL_TYPE, **encoder_config_to_hf(c, dtype),
            "pad_token_id": 0, "bos_token_id": bos, "eos_token_id": eos}
