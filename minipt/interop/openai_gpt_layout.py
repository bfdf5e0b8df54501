"""minipt's GPT-1 <-> transformers' ``OpenAIGPTLMHeadModel`` (Radford et al. 2018, ``openai-gpt``).

Tensor names (block i; minipt name on the right):

    transformer.tokens_embed.weight         (V, C)      wte.weight
    transformer.positions_embed.weight      (T, C)      wpe.weight
    transformer.h.i.attn.c_attn.weight      (C, 3C)     h.blocks.i.attn.c_attn.weight (3C, C), transposed
    transformer.h.i.attn.c_attn.bias        (3C,)       h.blocks.i.attn.c_attn.bias
    transformer.h.i.attn.c_proj.weight      (C, C)      h.blocks.i.attn.c_proj.weight, transposed
    transformer.h.i.ln_1.weight / .bias     (C,)        h.blocks.i.ln_1.weight / .bias
    transformer.h.i.mlp.c_fc.weight         (C, 4C)     h.blocks.i.mlp.c_fc.weight (4C, C), transposed
    transformer.h.i.mlp.c_proj.weight       (4C, C)     h.blocks.i.mlp.c_proj.weight (C, 4C), transposed
    transformer.h.i.ln_2.weight / .bias     (C,)        h.blocks.i.ln_2.weight / .bias
    lm_head.weight                          (V, C)      lm_head.weight: only when untied

- **The block is post-LN.** OpenAIGPT's ``Block`` computes n = LN_1(x + Attn(x)),
  h = LN_2(n + MLP(n)): minipt's ``prenorm=False``. ``ln_1`` and ``ln_2`` keep their
  names, but here they sit *after* each residual sum, and there is no final LayerNorm
  (``final_norm=False``); the hidden state of the last block goes straight to the head.
- **Conv1D and fused q, k, v.** As in GPT-2 (``gpt2_layout.py``): every block matrix is a
  ``Conv1D`` stored (C_in, C_out), the transpose of minipt's ``Linear``; ``c_attn`` holds
  q, k, v in that order, head h in columns h*D:(h+1)*D of each third, as minipt's.
- **Attention.** Scores are divided by sqrt(D) (the ``Block``s are built with
  ``scale=True``); masked scores are set to -1e4 rather than -inf, whose weight after
  the softmax is exactly 0 (exp underflows) in float32 and float64 as long as the
  largest allowed score of the row is above about -9000: the same as minipt's mask.
- **Tied head.** ``OpenAIGPTLMHeadModel`` ties ``lm_head`` to ``tokens_embed`` (the paper's
  P(u) = softmax(h_n W_e^T)); a file of a tied model holds no ``lm_head.weight``.
- **Options.** ``afn``: ``"gelu"`` is, in transformers' OpenAIGPT code as in OpenAI's,
  the tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), minipt's
  ``gelu_tanh``; ``"relu"`` is ``relu``. The MLP width is always 4C (there is no
  ``n_inner``). ``n_positions`` -> ``block_size`` (older files also write ``n_ctx``, which
  must then agree); ``layer_norm_epsilon`` -> ``eps``; the three dropout rates must be
  equal, as for GPT-2. ``n_special`` > 0 (extra embedding rows of the 2018 PyTorch port)
  is refused: transformers has dropped it.
- **Older files.** Files saved from the bare ``OpenAIGPTModel`` name tensors without
  ``transformer.``; older transformers stored the causal mask ``attn.bias`` and
  ``position_ids`` as buffers, which are skipped.
"""
from __future__ import annotations

import re

from ..models.decoder.gpt import GPTConfig
from .hf_config import check_architectures, expect, get_bool, get_float, get_int
from .layout import Entry, config_mismatch

MODEL_TYPE = "openai-gpt"
ARCHITECTURE = "OpenAIGPTLMHeadModel"
ACCEPTED = (ARCHITECTURE, "OpenAIGPTModel")
PREFIX = "transformer."
_BUFFER = re.compile(r"^transformer\.(h\.\d+\.attn\.bias|position_ids)$")
AFN = {"gelu": "gelu_tanh", "relu": "relu"}          # transformers' afn -> minipt's activation


def entries(config: GPTConfig) -> list[Entry]:
    """The name table for a GPT-1 ``config`` (see the module docstring)."""
    table = [Entry("transformer.tokens_embed.weight", "wte.weight"),
             Entry("transformer.positions_embed.weight", "wpe.weight")]
    for i in range(config.n_layer):
        hf, mp = f"transformer.h.{i}.", f"h.blocks.{i}."
        for proj in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"):
            table += [Entry(f"{hf}{proj}.weight", f"{mp}{proj}.weight", "transpose"),   # Conv1D (in, out)
                      Entry(f"{hf}{proj}.bias", f"{mp}{proj}.bias")]
        for norm in ("ln_1", "ln_2"):                                                 # after the residual sums
            table += [Entry(f"{hf}{norm}.weight", f"{mp}{norm}.weight"), Entry(f"{hf}{norm}.bias", f"{mp}{norm}.bias")]
    if not config.tie_embeddings:
        table.append(Entry("lm_head.weight", "lm_head.weight"))
    return table


def is_buffer(name: str) -> bool:
    """Tensors in a file that are not parameters (causal masks and position ids of older files)."""
    return bool(_BUFFER.match(name))


def export_problem(c: GPTConfig) -> str | None:
    """Why ``OpenAIGPTLMHeadModel`` cannot hold this config, or None if it can."""
    problem = config_mismatch(c, dict(prenorm=False, final_norm=False, norm="layer", positions="learned", bias=True),
                              "OpenAIGPTLMHeadModel", "post-LN, no final LayerNorm, learned positions, biases")
    if problem:
        return problem
    if c.activation not in AFN.values():
        return (f"activation={c.activation!r}: OpenAIGPTLMHeadModel's afn is 'gelu' (the tanh approximation, "
                "minipt's 'gelu_tanh') or 'relu'")
    if c.d_ff != 4 * c.d_model:
        return f"d_ff={c.d_ff}: OpenAIGPTLMHeadModel's MLP width is 4 * d_model = {4 * c.d_model}"
    return None


def config_from_hf(hf: dict) -> GPTConfig:
    """An ``OpenAIGPTConfig`` dictionary -> ``GPTConfig.gpt1(...)``; unsupported options raise."""
    check_architectures(hf, ACCEPTED)
    afn = expect(hf, "afn", tuple(AFN), "gelu", "transformers' OpenAIGPT computes 'gelu' (tanh approximation) "
                 "and 'relu' as minipt does; minipt has no SiLU feed-forward")
    T = get_int(hf, "n_positions", 512)
    if "n_ctx" in hf and get_int(hf, "n_ctx") != T:
        raise ValueError(f"config.json: n_ctx = {hf['n_ctx']} differs from n_positions = {T}; minipt has one "
                         "context length (block_size)")
    if hf.get("n_special", 0) not in (0, None):
        raise ValueError(f"config.json: n_special = {hf['n_special']} is not supported: special-token rows "
                         "beyond vocab_size are a 2018 port's convention; fold them into vocab_size")
    rates = {k: get_float(hf, k, 0.1) for k in ("attn_pdrop", "resid_pdrop", "embd_pdrop")}
    if len(set(rates.values())) > 1:
        raise ValueError(f"config.json: dropout rates {rates} differ; minipt has one dropout rate "
                         "for attention, residual branches and embeddings")
    C = get_int(hf, "n_embd", 768)
    return GPTConfig.gpt1(
        vocab_size=get_int(hf, "vocab_size", 40478), block_size=T, n_layer=get_int(hf, "n_layer", 12),
        n_head=get_int(hf, "n_head", 12), d_model=C, d_ff=4 * C, activation=AFN[afn],
        eps=get_float(hf, "layer_norm_epsilon", 1e-5), tie_embeddings=get_bool(hf, "tie_word_embeddings", True),
        dropout=rates["resid_pdrop"])


def config_to_hf(c: GPTConfig, dtype: str, bos: int | None = None, eos: int | None = None) -> dict:
    """``GPTConfig`` -> the ``config.json`` that ``OpenAIGPTLMHeadModel`` reads."""
    afn = {v: k for k, v in AFN.items()}[c.activation]
    return {
        "architectures": [ARCHITECTURE], "model_type": MODEL_TYPE,
        "vocab_size": c.vocab_size, "n_positions": c.block_size, "n_ctx": c.block_size, "n_embd": c.d_model,
        "n_layer": c.n_layer, "n_head": c.n_head, "afn": afn, "layer_norm_epsilon": c.eps,
        "tie_word_embeddings": c.tie_embeddings,
        "attn_pdrop": c.dropout, "resid_pdrop": c.dropout, "embd_pdrop": c.dropout, "initializer_range": 0.02,
        "bos_token_id": bos, "eos_token_id": eos, "pad_token_id": None,
        "dtype": dtype, "torch_dtype": dtype,
    }
