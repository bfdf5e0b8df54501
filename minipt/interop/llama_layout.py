"""minipt's LLaMA-style model <-> transformers' ``LlamaForCausalLM`` (Touvron et al. 2023).

Tensor names (block i; minipt name on the right; all ``nn.Linear``, stored (C_out, C_in)
like minipt's, so nothing is transposed):

    model.embed_tokens.weight                           (V, C)   wte.weight
    model.layers.i.input_layernorm.weight               (C,)     h.blocks.i.ln_1.weight
    model.layers.i.self_attn.q_proj.weight              (C, C)   h.blocks.i.attn.c_attn.weight rows 0:C
    model.layers.i.self_attn.k_proj.weight              (C, C)   ... rows C:2C
    model.layers.i.self_attn.v_proj.weight              (C, C)   ... rows 2C:3C
    model.layers.i.self_attn.o_proj.weight              (C, C)   h.blocks.i.attn.c_proj.weight
    model.layers.i.post_attention_layernorm.weight      (C,)     h.blocks.i.ln_2.weight
    model.layers.i.mlp.gate_proj.weight                 (F, C)   h.blocks.i.mlp.w1.weight
    model.layers.i.mlp.up_proj.weight                   (F, C)   h.blocks.i.mlp.w3.weight
    model.layers.i.mlp.down_proj.weight                 (C, F)   h.blocks.i.mlp.w2.weight
    model.norm.weight                                   (C,)     h.ln_f.weight
    lm_head.weight                                      (V, C)   lm_head.weight: only when untied

- **Split q, k, v.** LLaMA projects q, k, v with three matrices; minipt fuses them into
  ``c_attn`` (3C, C). The rows are cut apart on export and stacked on import.
- **SwiGLU.** down(silu(gate x) * up x) (Shazeer 2020): gate = minipt's w1, up = w3,
  down = w2.
- **Rotary convention: the same, no permutation.** transformers' LLaMA rotates *halves*
  of each head (``rotate_half``: channel i pairs with i + D/2, angle t * theta^(-2i/D));
  minipt's ``rope_forward`` (``ops/positions.py``) does the same, and both cut q and k
  into heads the same way (head h = channels h*D:(h+1)*D). So q_proj and k_proj rows are
  copied unpermuted. (Meta's original checkpoints rotate *interleaved* pairs (2i, 2i+1);
  transformers' conversion script permutes their q/k rows into the halves layout once,
  and folders on the hub are already converted.) ``test_interop_fixtures`` checks it
  against transformers' own numbers. The base must be theta = 10000, minipt's.
- **Options.** ``rms_norm_eps`` -> ``eps``; ``intermediate_size`` -> ``d_ff``;
  ``attention_bias`` and ``mlp_bias`` (false in LLaMA) -> ``bias``, both or neither.
  Not implemented, each a ValueError naming it: grouped-query attention
  (``num_key_value_heads`` < ``num_attention_heads``), ``rope_scaling`` / a
  ``rope_type`` other than default, ``rope_theta`` != 10000, another ``hidden_act``
  than silu, ``head_dim`` != C / H, ``pretraining_tp`` > 1, ``attention_dropout`` > 0
  (minipt's dropout also drops residual branches, which LLaMA has not).
- **Export and dropout.** LLaMA has attention dropout only; a minipt model trained with
  ``dropout`` > 0 exports ``attention_dropout: 0.0`` (a training setting: weights and
  logits are unaffected; set it in transformers as wanted).
"""
from __future__ import annotations

from ..models.decoder.gpt import GPTConfig
from ..models.decoder.llama import llama_config
from .hf_config import check_architectures, expect, get_bool, get_float, get_int
from .layout import Entry, config_mismatch

MODEL_TYPE = "llama"
ARCHITECTURE = "LlamaForCausalLM"
ACCEPTED = (ARCHITECTURE, "LlamaModel")
PREFIX = "model."
ROPE_THETA = 10000.0                    # minipt's rotary base (ops/positions.py)


def entries(config: GPTConfig) -> list[Entry]:
    """The name table for a LLaMA-style ``config`` (see the module docstring)."""
    table = [Entry("model.embed_tokens.weight", "wte.weight")]
    kinds = ("weight", "bias") if config.bias else ("weight",)
    for i in range(config.n_layer):
        hf, mp = f"model.layers.{i}.", f"h.blocks.{i}."
        table.append(Entry(f"{hf}input_layernorm.weight", f"{mp}ln_1.weight"))
        for kind in kinds:
            for part, name in enumerate(("q_proj", "k_proj", "v_proj")):        # rows of the fused c_attn
                table.append(Entry(f"{hf}self_attn.{name}.{kind}", f"{mp}attn.c_attn.{kind}", "rows", part, 3))
            table.append(Entry(f"{hf}self_attn.o_proj.{kind}", f"{mp}attn.c_proj.{kind}"))
        table.append(Entry(f"{hf}post_attention_layernorm.weight", f"{mp}ln_2.weight"))
        for kind in kinds:
            table += [Entry(f"{hf}mlp.gate_proj.{kind}", f"{mp}mlp.w1.{kind}"),
                      Entry(f"{hf}mlp.up_proj.{kind}", f"{mp}mlp.w3.{kind}"),
                      Entry(f"{hf}mlp.down_proj.{kind}", f"{mp}mlp.w2.{kind}")]
    table.append(Entry("model.norm.weight", "h.ln_f.weight"))
    if not config.tie_embeddings:
        table.append(Entry("lm_head.weight", "lm_head.weight"))
    return table


def is_buffer(name: str) -> bool:
    """LLaMA files hold parameters only (``rotary_emb.inv_freq`` of old files excepted)."""
    return name.endswith("rotary_emb.inv_freq")


def export_problem(c: GPTConfig) -> str | None:
    """Why ``LlamaForCausalLM`` cannot hold this (pre-LN, dense) config, or None if it can."""
    return config_mismatch(c, dict(norm="rms", positions="rope", activation="swiglu", final_norm=True, prenorm=True),
                           "LlamaForCausalLM", "pre-RMSNorm, rotary positions, SwiGLU, a final RMSNorm")


def _rope(hf: dict) -> None:
    """Rotary settings: transformers 5 keeps them in ``rope_parameters``, 4 in ``rope_theta``
    and ``rope_scaling``; only the plain (default) rotation with theta 10000 is minipt's."""
    params = hf.get("rope_parameters") or {}
    scaling = hf.get("rope_scaling") or {}
    for key, table in (("rope_parameters", params), ("rope_scaling", scaling)):
        if not isinstance(table, dict):
            raise ValueError(f"config.json: {key} must be an object, got {table!r}")
        kind = table.get("rope_type", table.get("type", "default"))
        if kind != "default":
            raise ValueError(f"config.json: {key} with rope_type {kind!r} is not supported: minipt "
                             "implements plain rotary positions only (no scaling)")
    theta = params.get("rope_theta", hf.get("rope_theta", ROPE_THETA))
    if theta != ROPE_THETA:
        raise ValueError(f"config.json: rope_theta = {theta!r} is not supported: minipt's rotary positions "
                         f"use base {ROPE_THETA:g}")


def config_from_hf(hf: dict) -> GPTConfig:
    """A ``LlamaConfig`` dictionary -> ``llama_config(...)``; unsupported options raise."""
    check_architectures(hf, ACCEPTED)
    C, H = get_int(hf, "hidden_size", 4096), get_int(hf, "num_attention_heads", 32)
    kv = get_int(hf, "num_key_value_heads", H)
    if kv != H:
        raise ValueError(f"config.json: num_key_value_heads = {kv} with num_attention_heads = {H} is "
                         "grouped-query attention, which minipt does not implement (it needs them equal)")
    if hf.get("head_dim") is not None and C % H == 0 and get_int(hf, "head_dim") != C // H:
        raise ValueError(f"config.json: head_dim = {hf['head_dim']} is not supported: minipt's head size is "
                         f"hidden_size / num_attention_heads = {C // H}")
    expect(hf, "hidden_act", ("silu",), "silu", "minipt's LLaMA feed-forward is SwiGLU (silu gate)")
    expect(hf, "pretraining_tp", (1,), 1, "tensor-parallel slicing of the projections is not implemented")
    if get_float(hf, "attention_dropout", 0.0) != 0.0:
        raise ValueError(f"config.json: attention_dropout = {hf['attention_dropout']} is not supported: minipt's "
                         "dropout also drops the residual branches, which LLaMA does not")
    _rope(hf)
    bias = get_bool(hf, "attention_bias", False)
    if get_bool(hf, "mlp_bias", False) != bias:
        raise ValueError(f"config.json: attention_bias = {bias} with mlp_bias = {hf.get('mlp_bias')} is not "
                         "supported: minipt has biases on every projection or on none")
    return llama_config(
        vocab_size=get_int(hf, "vocab_size", 32000), block_size=get_int(hf, "max_position_embeddings", 2048),
        n_layer=get_int(hf, "num_hidden_layers", 32), n_head=H, d_model=C,
        d_ff=get_int(hf, "intermediate_size", 11008), eps=get_float(hf, "rms_norm_eps", 1e-6), bias=bias,
        tie_embeddings=get_bool(hf, "tie_word_embeddings", False))


def config_to_hf(c: GPTConfig, dtype: str, bos: int | None = None, eos: int | None = None) -> dict:
    """``GPTConfig`` -> the ``config.json`` that ``LlamaForCausalLM`` reads (transformers 4 and 5)."""
    return {
        "architectures": [ARCHITECTURE], "model_type": MODEL_TYPE,
        "vocab_size": c.vocab_size, "max_position_embeddings": c.block_size, "hidden_size": c.d_model,
        "intermediate_size": c.d_ff, "num_hidden_layers": c.n_layer, "num_attention_heads": c.n_head,
        "num_key_value_heads": c.n_head, "head_dim": c.d_model // c.n_head, "hidden_act": "silu",
        "rms_norm_eps": c.eps, "rope_theta": ROPE_THETA,
        "rope_parameters": {"rope_type": "default", "rope_theta": ROPE_THETA},
        "attention_bias": c.bias, "mlp_bias": c.bias, "attention_dropout": 0.0, "pretraining_tp": 1,
        "tie_word_embeddings": c.tie_embeddings, "initializer_range": 0.02,
        "bos_token_id": bos, "eos_token_id": eos, "pad_token_id": None,
        "dtype": dtype, "torch_dtype": dtype, "use_cache": True,
    }
