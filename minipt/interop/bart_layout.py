"""minipt's BART <-> transformers' ``BartForConditionalGeneration`` (Lewis et al. 2020, ``bart``).

Tensor names (layer i; E = ``model.encoder.layers.i.``, D = ``model.decoder.layers.i.``):

    model.shared.weight                         (V, C)      shared.weight (also the tied lm_head)
    model.{encoder,decoder}.embed_positions.weight (P+2, C) {enc,dec}_positions.weight (offset 2 kept)
    model.{encoder,decoder}.layernorm_embedding.* (C,)      {enc,dec}_ln.*
    E/D self_attn.{q,k,v}_proj.weight / .bias   (C, C)      *.blocks.i.attn.c_attn: rows 0:C, C:2C, 2C:3C
    E/D self_attn.out_proj.*                    (C, C)      *.blocks.i.attn.c_proj.*
    E/D self_attn_layer_norm.*                  (C,)        *.blocks.i.ln_1.*
    D encoder_attn.q_proj.*                     (C, C)      decoder.blocks.i.cross_attn.q_proj.*
    D encoder_attn.{k,v}_proj.*                 (C, C)      decoder.blocks.i.cross_attn.kv_proj: rows 0:C, C:2C
    D encoder_attn.out_proj.*, encoder_attn_layer_norm.*    decoder.blocks.i.cross_attn.c_proj.*, ln_cross.*
    E/D fc1.*, fc2.*, final_layer_norm.*        (F, C), (C, F), (C,)   *.blocks.i.mlp.c_fc.*, mlp.c_proj.*, ln_2.*
    final_logits_bias                           (1, V)      final_logits_bias (1, V)

- **Same arithmetic.** transformers scales q by D^-1/2 after its bias, minipt scales the
  scores: the same numbers. Both use nn.LayerNorm's eps 1e-5 (no config key), exact GELU
  for ``activation_function`` "gelu", "gelu_new" is minipt's tanh GELU, "relu" its ReLU.
- **Tied.** ``encoder.embed_tokens``, ``decoder.embed_tokens`` and ``lm_head`` are
  ``model.shared`` (``tie_word_embeddings`` true; false is refused); the file holds only
  ``model.shared.weight``. ``final_logits_bias`` is a buffer in transformers (never
  trained there) and a parameter in minipt; it is written and read like any tensor.
- **Refused by name** (``config_from_hf``): ``scale_embedding`` true (sqrt(C) embedding
  scale), ``normalize_before`` / ``add_final_layer_norm`` true (mBART's pre-LN), encoder
  and decoder with different heads or FFN widths, ``add_bias_logits``, untied embeddings,
  activations other than the three above. ``dropout``, ``attention_dropout``,
  ``activation_dropout``, the layerdrops and the generation options are read as given and
  not used (minipt loads with dropout 0; evaluation is the same).
- A ``MASS`` model is BART's network and exports as one (its decoder-input rule is a
  training matter; ``decoder_start_token_id`` is its [MASK]).
"""
from __future__ import annotations

from ..models.seq2seq.bart import Bart, BartConfig
from .hf_config import check_architectures, expect, get_bool, get_int
from .layout import Entry

MODEL_TYPE = "bart"
ARCHITECTURE = "BartForConditionalGeneration"
ACCEPTED = (ARCHITECTURE,)
PREFIX = "model."
CONFIG = BartConfig
ACTIVATION = {"gelu": "gelu", "gelu_new": "gelu_tanh", "relu": "relu"}    # transformers' -> minipt's
EPS = 1e-5                                                                 # nn.LayerNorm's default


def entries(config: BartConfig) -> list[Entry]:
    """The name table for a BART ``config`` (see the module docstring); the shared table first."""
    table = [Entry("model.shared.weight", "shared.weight")]
    for side, ours in (("encoder", "enc"), ("decoder", "dec")):
        table += [Entry(f"model.{side}.embed_positions.weight", f"{ours}_positions.weight"),
                  Entry(f"model.{side}.layernorm_embedding.weight", f"{ours}_ln.weight"),
                  Entry(f"model.{side}.layernorm_embedding.bias", f"{ours}_ln.bias")]
    table += layer_entries(config.encoder_layers, config.decoder_layers)
    table.append(Entry("final_logits_bias", "final_logits_bias"))
    return table


def layer_entries(encoder_layers: int, decoder_layers: int) -> list[Entry]:
    """The post-LN encoder and decoder layers, ``model.{encoder,decoder}.layers.i.*`` <->
    ``{encoder,decoder}.blocks.i.*`` (BART's naming, which Marian shares)."""
    table = []
    for side in ("encoder", "decoder"):
        for i in range(encoder_layers if side == "encoder" else decoder_layers):
            hf, mp = f"model.{side}.layers.{i}.", f"{side}.blocks.{i}."
            for p in ("weight", "bias"):
                table += [Entry(f"{hf}self_attn.{x}_proj.{p}", f"{mp}attn.c_attn.{p}", "rows", part, 3)
                          for part, x in enumerate("qkv")]
                pairs = [("self_attn.out_proj", "attn.c_proj"), ("self_attn_layer_norm", "ln_1"),
                         ("fc1", "mlp.c_fc"), ("fc2", "mlp.c_proj"), ("final_layer_norm", "ln_2")]
                if side == "decoder":
                    table += [Entry(f"{hf}encoder_attn.{x}_proj.{p}", f"{mp}cross_attn.kv_proj.{p}", "rows", part, 2)
                              for part, x in enumerate("kv")]
                    pairs += [("encoder_attn.q_proj", "cross_attn.q_proj"), ("encoder_attn.out_proj", "cross_attn.c_proj"),
                              ("encoder_attn_layer_norm", "ln_cross")]
                table += [Entry(f"{hf}{a}.{p}", f"{mp}{b}.{p}") for a, b in pairs]
    return table


def build(config: BartConfig, rng, dtype) -> Bart:
    return Bart(config, rng=rng, dtype=dtype)


def tied_copies(config: BartConfig) -> dict[str, str]:
    """Tensors a file may store that only repeat ``model.shared``: name -> the one it copies."""
    return {n: "model.shared.weight" for n in
            ("lm_head.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight")}


def is_buffer(name: str) -> bool:
    return False                         # final_logits_bias, the one buffer, is mapped


def export_problem(config) -> str | None:
    if not isinstance(config, BartConfig):
        return f"{type(config).__name__}: BartForConditionalGeneration holds minipt's BART only"
    if config.activation not in ACTIVATION.values():
        return f"activation={config.activation!r}: {ARCHITECTURE} has gelu, gelu_new and relu"
    if config.eps != EPS:
        return f"eps={config.eps}: {ARCHITECTURE}'s LayerNorms use eps {EPS} (no config key)"
    return None


def config_from_hf(hf: dict) -> BartConfig:
    """A ``BartConfig`` dictionary -> minipt's ``BartConfig``; unsupported options raise."""
    check_architectures(hf, ACCEPTED)
    for key, why in (("scale_embedding", "minipt's BART does not scale embeddings by sqrt(d_model)"),
                     ("normalize_before", "that is mBART's pre-LN; minipt's BART is post-LN"),
                     ("add_final_layer_norm", "that is mBART's final LayerNorm; BART has none"),
                     ("add_bias_logits", "minipt's BART has final_logits_bias only"),
                     ("static_position_embeddings", "minipt's BART learns its positions")):
        expect(hf, key, (False, None), False, why)
    expect(hf, "tie_word_embeddings", (True,), True, "minipt's BART ties encoder, decoder and output embeddings")
    act = expect(hf, "activation_function", tuple(ACTIVATION), "gelu", "minipt's BART has gelu, gelu_new and relu")
    for enc, dec, what in (("encoder_attention_heads", "decoder_attention_heads", "heads"),
                           ("encoder_ffn_dim", "decoder_ffn_dim", "FFN widths")):
        if get_int(hf, enc, 16 if "heads" in enc else 4096) != get_int(hf, dec, 16 if "heads" in dec else 4096):
            raise ValueError(f"config.json: {enc} = {hf.get(enc)} and {dec} = {hf.get(dec)} differ: minipt's BART "
                             f"has the same {what} in encoder and decoder")
    get_bool(hf, "is_encoder_decoder", True)
    ids = {k: hf.get(k, d) for k, d in (("pad_token_id", 1), ("eos_token_id", 2), ("decoder_start_token_id", 2))}
    for k, v in ids.items():
        if not isinstance(v, int) or isinstance(v, bool):
            raise ValueError(f"config.json: {k} must be an integer token id, got {v!r}")
    return BartConfig(vocab_size=get_int(hf, "vocab_size", 50265),
                      max_positions=get_int(hf, "max_position_embeddings", 1024),
                      encoder_layers=get_int(hf, "encoder_layers", 12), decoder_layers=get_int(hf, "decoder_layers", 12),
                      n_head=get_int(hf, "encoder_attention_heads", 16), d_model=get_int(hf, "d_model", 1024),
                      d_ff=get_int(hf, "encoder_ffn_dim", 4096), activation=ACTIVATION[act], eps=EPS,
                      pad_id=ids["pad_token_id"], eos_id=ids["eos_token_id"],
                      decoder_start_id=ids["decoder_start_token_id"])


def config_to_hf(c: BartConfig, dtype: str, bos: int | None = None, eos: int | None = None) -> dict:
    """minipt's ``BartConfig`` -> the ``config.json`` that ``BartForConditionalGeneration`` reads."""
    problem = export_problem(c)
    if problem:
        raise ValueError(f"cannot export this model to transformers: {problem}")
    return {
        "architectures": [ARCHITECTURE], "model_type": MODEL_TYPE, "vocab_size": c.vocab_size,
        "max_position_embeddings": c.max_positions, "d_model": c.d_model,
        "encoder_layers": c.encoder_layers, "decoder_layers": c.decoder_layers,
        "encoder_attention_heads": c.n_head, "decoder_attention_heads": c.n_head,
        "encoder_ffn_dim": c.d_ff, "decoder_ffn_dim": c.d_ff,
        "activation_function": {v: k for k, v in ACTIVATION.items()}[c.activation],
        "dropout": 0.0, "attention_dropout": 0.0, "activation_dropout": 0.0, "classifier_dropout": 0.0,
        "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0, "init_std": 0.02, "scale_embedding": False,
        "is_encoder_decoder": True, "tie_word_embeddings": True, "use_cache": True,
        "pad_token_id": c.pad_id, "eos_token_id": c.eos_id, "decoder_start_token_id": c.decoder_start_id,
        "bos_token_id": bos, "forced_eos_token_id": None, "dtype": dtype, "torch_dtype": dtype,
    }
