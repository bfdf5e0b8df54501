"""minipt's GPT-2-style model <-> transformers' ``GPT2LMHeadModel`` (Radford et al. 2019).

Tensor names (block i; minipt name on the right):

    transformer.wte.weight               (V, C)      wte.weight
    transformer.wpe.weight               (T, C)      wpe.weight
    transformer.h.i.ln_1.weight / .bias  (C,)        h.blocks.i.ln_1.weight / .bias
    transformer.h.i.attn.c_attn.weight   (C, 3C)     h.blocks.i.attn.c_attn.weight (3C, C), transposed
    transformer.h.i.attn.c_attn.bias     (3C,)       h.blocks.i.attn.c_attn.bias
    transformer.h.i.attn.c_proj.weight   (C, C)      h.blocks.i.attn.c_proj.weight, transposed
    transformer.h.i.ln_2.weight / .bias  (C,)        h.blocks.i.ln_2.weight / .bias
    transformer.h.i.mlp.c_fc.weight      (C, F)      h.blocks.i.mlp.c_fc.weight (F, C), transposed
    transformer.h.i.mlp.c_proj.weight    (F, C)      h.blocks.i.mlp.c_proj.weight (C, F), transposed
    transformer.ln_f.weight / .bias      (C,)        h.ln_f.weight / .bias
    lm_head.weight                       (V, C)      lm_head.weight: only when untied

- **Conv1D.** GPT-2's projections are ``Conv1D`` layers, which store W as (C_in, C_out) and
  compute y = x W + b: the transpose of a ``Linear`` weight. Every matrix of a block is
  transposed on the way in and out; embeddings, norms, biases and the head are not.
- **Fused q, k, v.** ``c_attn`` maps C -> 3C with q, k, v in that order and head h in
  columns h*D:(h+1)*D of each third, exactly as minipt's ``c_attn``, so only the
  transpose is needed.
- **Tied head.** With ``tie_word_embeddings`` (GPT-2's default) the logits are h W_e^T and
  the file holds no ``lm_head.weight``; an untied model stores it.
- **Options.** ``layer_norm_epsilon`` -> ``eps``; ``n_inner`` (null = 4C) -> ``d_ff``;
  ``activation_function`` ``gelu_new`` is GELU's tanh approximation
  0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Hendrycks & Gimpel 2016), minipt's
  ``gelu_tanh`` (``gelu_pytorch_tanh`` is the same function); the three dropout rates
  (``attn_pdrop``, ``resid_pdrop``, ``embd_pdrop``) must be equal: minipt has one.
- **Older files.** The original GPT-2 release (saved from the bare ``GPT2Model``) names
  tensors without ``transformer.`` and stores each layer's causal mask as ``attn.bias``
  (and ``attn.masked_bias``): a constant buffer, not a parameter, which is skipped.
"""
from __future__ import annotations

import re

from ..models.decoder.gpt import GPTConfig
from .hf_config import check_architectures, expect, get_bool, get_float, get_int
from .layout import Entry, config_mismatch

MODEL_TYPE = "gpt2"
ARCHITECTURE = "GPT2LMHeadModel"
ACCEPTED = (ARCHITECTURE, "GPT2Model")
PREFIX = "transformer."
_MASK_BUFFER = re.compile(r"^transformer\.h\.\d+\.attn\.(bias|masked_bias)$")


def entries(config: GPTConfig) -> list[Entry]:
    """The name table for a GPT-2-style ``config`` (see the module docstring)."""
    table = [Entry("transformer.wte.weight", "wte.weight"), Entry("transformer.wpe.weight", "wpe.weight")]
    for i in range(config.n_layer):
        hf, mp = f"transformer.h.{i}.", f"h.blocks.{i}."
        for norm in ("ln_1", "ln_2"):
            table += [Entry(f"{hf}{norm}.weight", f"{mp}{norm}.weight"), Entry(f"{hf}{norm}.bias", f"{mp}{norm}.bias")]
        for proj in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"):
            table += [Entry(f"{hf}{proj}.weight", f"{mp}{proj}.weight", "transpose"),   # Conv1D (in, out)
                      Entry(f"{hf}{proj}.bias", f"{mp}{proj}.bias")]
    table += [Entry("transformer.ln_f.weight", "h.ln_f.weight"), Entry("transformer.ln_f.bias", "h.ln_f.bias")]
    if not config.tie_embeddings:
        table.append(Entry("lm_head.weight", "lm_head.weight"))
    return table


def is_buffer(name: str) -> bool:
    """Tensors in a file that are not parameters (the causal masks of old GPT-2 files)."""
    return bool(_MASK_BUFFER.match(name))


def export_problem(c: GPTConfig) -> str | None:
    """Why ``GPT2LMHeadModel`` cannot hold this (pre-LN, dense) config, or None if it can."""
    return config_mismatch(c, dict(norm="layer", positions="learned", activation="gelu_tanh", bias=True,
                                   final_norm=True, prenorm=True), "GPT2LMHeadModel",
                           "pre-LN, learned positions, tanh GELU, biases, a final LayerNorm")


def config_from_hf(hf: dict) -> GPTConfig:
    """A ``GPT2Config`` dictionary -> ``GPTConfig.gpt2(...)``; unsupported options raise."""
    check_architectures(hf, ACCEPTED)
    C = get_int(hf, "n_embd", 768)
    expect(hf, "activation_function", ("gelu_new", "gelu_pytorch_tanh"), "gelu_new",
           "minipt's GPT-2 uses the tanh approximation of GELU (gelu_new)")
    expect(hf, "scale_attn_weights", (True,), True, "minipt scales attention scores by 1/sqrt(D)")
    expect(hf, "scale_attn_by_inverse_layer_idx", (False,), False, "minipt does not rescale scores by layer")
    expect(hf, "add_cross_attention", (False,), False, "minipt's GPT has no cross-attention")
    rates = {k: get_float(hf, k, 0.1) for k in ("attn_pdrop", "resid_pdrop", "embd_pdrop")}
    if len(set(rates.values())) > 1:
        raise ValueError(f"config.json: dropout rates {rates} differ; minipt has one dropout rate "
                         "for attention, residual branches and embeddings")
    n_inner = hf.get("n_inner")
    return GPTConfig.gpt2(
        vocab_size=get_int(hf, "vocab_size", 50257), block_size=get_int(hf, "n_positions", 1024),
        n_layer=get_int(hf, "n_layer", 12), n_head=get_int(hf, "n_head", 12), d_model=C,
        d_ff=4 * C if n_inner is None else get_int(hf, "n_inner"),
        eps=get_float(hf, "layer_norm_epsilon", 1e-5), tie_embeddings=get_bool(hf, "tie_word_embeddings", True),
        dropout=rates["resid_pdrop"])


def config_to_hf(c: GPTConfig, dtype: str, bos: int | None = None, eos: int | None = None) -> dict:
    """``GPTConfig`` -> the ``config.json`` that ``GPT2LMHeadModel`` reads."""
    return {
        "architectures": [ARCHITECTURE], "model_type": MODEL_TYPE,
        "vocab_size": c.vocab_size, "n_positions": c.block_size, "n_embd": c.d_model, "n_layer": c.n_layer,
        "n_head": c.n_head, "n_inner": c.d_ff, "activation_function": "gelu_new",
        "layer_norm_epsilon": c.eps, "tie_word_embeddings": c.tie_embeddings,
        "attn_pdrop": c.dropout, "resid_pdrop": c.dropout, "embd_pdrop": c.dropout,
        "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False,
        "add_cross_attention": False, "initializer_range": 0.02,
        "bos_token_id": bos, "eos_token_id": eos, "pad_token_id": None,
        "dtype": dtype, "torch_dtype": dtype, "use_cache": True,
    }
