"""minipt's T5 <-> transformers' ``T5ForConditionalGeneration`` (Raffel et al. 2020, ``t5``).

Tensor names (encoder layer i, decoder layer j; minipt name on the right):

    shared.weight                                          (V, C)  shared.weight
    encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight  (N, H)  encoder_bias.weight
    encoder.block.i.layer.0.SelfAttention.{q,k,v}.weight   (C, C)  rows 0:C, C:2C, 2C:3C of encoder.blocks.i.attn.c_attn
    encoder.block.i.layer.0.SelfAttention.o.weight         (C, C)  encoder.blocks.i.attn.c_proj
    encoder.block.i.layer.0.layer_norm.weight              (C,)    encoder.blocks.i.ln_1
    encoder.block.i.layer.1.DenseReluDense.wi / wo         ReLU: encoder.blocks.i.mlp.c_fc / c_proj
    encoder.block.i.layer.1.DenseReluDense.wi_0 / wi_1 / wo  gated GELU: mlp.w1 / w3 / w2
    encoder.block.i.layer.1.layer_norm.weight              (C,)    encoder.blocks.i.ln_2
    encoder.final_layer_norm.weight                        (C,)    encoder.ln_f
    decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight  (N, H)  decoder_bias.weight
    decoder.block.j.layer.0.*                              as the encoder's layer.0 (decoder.blocks.j.attn, ln_1)
    decoder.block.j.layer.1.EncDecAttention.q.weight       (C, C)  decoder.blocks.j.cross_attn.q_proj
    decoder.block.j.layer.1.EncDecAttention.{k,v}.weight   (C, C)  rows 0:C, C:2C of cross_attn.kv_proj
    decoder.block.j.layer.1.EncDecAttention.o.weight       (C, C)  cross_attn.c_proj
    decoder.block.j.layer.1.layer_norm.weight              (C,)    decoder.blocks.j.ln_cross
    decoder.block.j.layer.2.*                              as the encoder's layer.1 (mlp, ln_2)
    decoder.final_layer_norm.weight                        (C,)    decoder.ln_f
    lm_head.weight                                         (V, C)  lm_head.weight: only when untied

- **Two variants.** T5 v1.0: ``feed_forward_proj`` "relu", tied head, output rescaled by
  d_model^-1/2. T5 v1.1: "gated-gelu" (gelu_new, the tanh GELU), an untied ``lm_head``
  and no rescale (``tie_word_embeddings`` false in its config.json).
- **transformers 5's ``T5Config`` always says** ``tie_word_embeddings`` true and keeps the
  v1.1 "no rescale" as ``scale_decoder_outputs`` false. Reading: a
  config with ``scale_decoder_outputs`` takes it as the rescale and ``tie_word_embeddings``
  as the tie; a config without it (older transformers, Google's files) rescales exactly when
  tied. Writing: both keys, so either reader gets the same model. An untied minipt T5
  exports ``lm_head.weight``; transformers 5.23 reads it: a stored head that differs from
  ``shared.weight`` stays untied (it warns that the config asks for a tie), so the untied
  v1.1 round trip computes the same logits (``tests/interop/test_t5_transformers.py``).
- **Covered** (``config_from_hf`` refuses the rest by name): ``d_kv`` = d_model / num_heads,
  ``feed_forward_proj`` "relu" or "gated-gelu", ``decoder_start_token_id`` = ``pad_token_id``,
  ``is_encoder_decoder`` true. ``dropout_rate`` -> ``dropout``; ``layer_norm_epsilon`` ->
  ``eps``; ``n_positions`` (default 512) -> ``max_source_len`` and ``max_target_len``, the
  longest source and target minipt reads (T5 itself has no position table; export writes
  the larger).
- Files may also hold ``encoder.embed_tokens.weight`` and ``decoder.embed_tokens.weight``
  (copies of ``shared.weight``) and a cross-attention ``relative_attention_bias`` that
  transformers ignores: they are skipped.
"""
from __future__ import annotations

from ..models.seq2seq.t5 import FFN, T5, T5Config
from .hf_config import check_architectures, expect, get_bool, get_float, get_int
from .layout import Entry

MODEL_TYPE = "t5"
ARCHITECTURE = "T5ForConditionalGeneration"
ACCEPTED = (ARCHITECTURE, "T5Model")
PREFIX = ""
CONFIG = T5Config
SKIPPED = ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight",
           "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight")


def _ffn(hf: str, mp: str, ffn: str) -> list[Entry]:
    names = [("wi", "c_fc"), ("wo", "c_proj")] if ffn == "relu" else [("wi_0", "w1"), ("wi_1", "w3"), ("wo", "w2")]
    return [Entry(f"{hf}DenseReluDense.{a}.weight", f"{mp}mlp.{b}.weight") for a, b in names]


def _self_attention(hf: str, mp: str) -> list[Entry]:
    return [Entry(f"{hf}SelfAttention.{w}.weight", f"{mp}attn.c_attn.weight", "rows", part, 3)
            for part, w in enumerate("qkv")] + [Entry(f"{hf}SelfAttention.o.weight", f"{mp}attn.c_proj.weight")]


def entries(config: T5Config) -> list[Entry]:
    """The name table for a T5 ``config`` (see the module docstring); ``shared.weight`` first."""
    table = [Entry("shared.weight", "shared.weight"),
             Entry("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", "encoder_bias.weight"),
             Entry("decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", "decoder_bias.weight")]
    for i in range(config.n_layer):
        hf, mp = f"encoder.block.{i}.layer.", f"encoder.blocks.{i}."
        table += _self_attention(hf + "0.", mp) + [Entry(hf + "0.layer_norm.weight", mp + "ln_1.weight")]
        table += _ffn(hf + "1.", mp, config.ffn) + [Entry(hf + "1.layer_norm.weight", mp + "ln_2.weight")]
    for j in range(config.n_decoder_layer):
        hf, mp = f"decoder.block.{j}.layer.", f"decoder.blocks.{j}."
        table += _self_attention(hf + "0.", mp) + [Entry(hf + "0.layer_norm.weight", mp + "ln_1.weight")]
        x = hf + "1.EncDecAttention."
        table += [Entry(x + "q.weight", mp + "cross_attn.q_proj.weight"),
                  Entry(x + "k.weight", mp + "cross_attn.kv_proj.weight", "rows", 0, 2),
                  Entry(x + "v.weight", mp + "cross_attn.kv_proj.weight", "rows", 1, 2),
                  Entry(x + "o.weight", mp + "cross_attn.c_proj.weight"),
                  Entry(hf + "1.layer_norm.weight", mp + "ln_cross.weight")]
        table += _ffn(hf + "2.", mp, config.ffn) + [Entry(hf + "2.layer_norm.weight", mp + "ln_2.weight")]
    table += [Entry("encoder.final_layer_norm.weight", "encoder.ln_f.weight"),
              Entry("decoder.final_layer_norm.weight", "decoder.ln_f.weight")]
    if not config.tie_embeddings:
        table.append(Entry("lm_head.weight", "lm_head.weight"))
    return table


def build(config: T5Config, rng, dtype) -> T5:
    return T5(config, rng=rng, dtype=dtype)


def is_buffer(name: str) -> bool:
    return name in SKIPPED


def export_problem(config) -> str | None:
    if not isinstance(config, T5Config):
        return f"{type(config).__name__}: T5ForConditionalGeneration holds minipt's T5 only"
    return None


def config_from_hf(hf: dict) -> T5Config:
    """A ``T5Config`` dictionary -> minipt's ``T5Config``; unsupported options raise."""
    check_architectures(hf, ACCEPTED)
    expect(hf, "is_encoder_decoder", (True,), True, "minipt's T5 is the encoder-decoder")
    ffn = expect(hf, "feed_forward_proj", tuple(FFN), "relu", "minipt's T5 has ReLU (v1.0) and gated-gelu (v1.1)")
    C, H = get_int(hf, "d_model", 512), get_int(hf, "num_heads", 8)
    if C % H or get_int(hf, "d_kv", 64) != C // H:
        raise ValueError(f"config.json: d_kv = {hf.get('d_kv', 64)!r} with d_model {C} and num_heads {H}: "
                         "minipt needs d_kv = d_model / num_heads")
    pad = hf.get("pad_token_id", 0)
    if not isinstance(pad, int) or isinstance(pad, bool) or pad < 0:
        raise ValueError(f"config.json: pad_token_id = {pad!r} is not supported: T5 starts its decoder from the "
                         "pad id")
    start = hf.get("decoder_start_token_id", pad)
    if start != pad:
        raise ValueError(f"config.json: decoder_start_token_id = {start!r} is not supported: minipt's T5 starts "
                         f"its decoder from pad_token_id ({pad})")
    tie = get_bool(hf, "tie_word_embeddings", True)
    scale = get_bool(hf, "scale_decoder_outputs", tie) if "scale_decoder_outputs" in hf else tie
    n_layer = get_int(hf, "num_layers", 6)
    n_dec = hf.get("num_decoder_layers")
    return T5Config(vocab_size=get_int(hf, "vocab_size", 32128), d_model=C, d_ff=get_int(hf, "d_ff", 2048),
                    n_layer=n_layer, n_decoder_layer=n_layer if n_dec is None else get_int(hf, "num_decoder_layers"),
                    n_head=H, num_buckets=get_int(hf, "relative_attention_num_buckets", 32),
                    max_distance=get_int(hf, "relative_attention_max_distance", 128), ffn=ffn,
                    tie_embeddings=tie, scale_output=scale, max_source_len=get_int(hf, "n_positions", 512),
                    max_target_len=get_int(hf, "n_positions", 512),
                    pad_id=pad, dropout=get_float(hf, "dropout_rate", 0.1),
                    eps=get_float(hf, "layer_norm_epsilon", 1e-6))


def config_to_hf(c: T5Config, dtype: str, bos: int | None = None, eos: int | None = None) -> dict:
    """minipt's ``T5Config`` -> the ``config.json`` that ``T5ForConditionalGeneration`` reads."""
    return {
        "architectures": [ARCHITECTURE], "model_type": MODEL_TYPE, "vocab_size": c.vocab_size,
        "d_model": c.d_model, "d_kv": c.d_model // c.n_head, "d_ff": c.d_ff, "num_layers": c.n_layer,
        "num_decoder_layers": c.n_decoder_layer, "num_heads": c.n_head,
        "relative_attention_num_buckets": c.num_buckets, "relative_attention_max_distance": c.max_distance,
        "feed_forward_proj": c.ffn, "dropout_rate": c.dropout, "layer_norm_epsilon": c.eps,
        "tie_word_embeddings": c.tie_embeddings, "scale_decoder_outputs": c.scale_output,
        "n_positions": max(c.max_source_len, c.max_target_len), "is_encoder_decoder": True, "pad_token_id": c.pad_id,
        "decoder_start_token_id": c.pad_id, "eos_token_id": eos, "initializer_factor": 1.0,
        "dtype": dtype, "torch_dtype": dtype,
    }
