"""A LLaMA-style model with the parameter count of a given GPT-2, for fair comparisons.

LLaMA (Touvron et al. 2023, "LLaMA: Open and Efficient Foundation Language Models",
Sec. 2.2) is GPT-2 with three changes, plus no biases and an untied output layer:

- pre-RMSNorm (Zhang & Sennrich 2019): y = g * x / sqrt(mean(x^2) + eps), one vector g
  of C per norm, where LayerNorm has a gain and a bias (2C);
- SwiGLU feed-forward (Shazeer 2020, "GLU Variants Improve Transformer"):
  w2(silu(w1 x) * w3 x), three C x F matrices where GELU's MLP has two, so F = 2/3 * 4C
  keeps the count of a 4C GELU MLP;
- rotary positions, RoPE (Su et al. 2021, "RoFormer"): queries and keys are rotated by
  their positions, so there is no learned position table (T x C parameters fewer).

The model is ``gpt.GPT`` with the config ``llama_config`` makes (registry entry
``llama``). This module also counts parameters from a config (``count_parameters``,
the closed form of ``GPT(config).num_parameters()``) and picks the feed-forward width
that makes two models the same size (``match_d_ff``, ``llama_like``): a comparison at
equal parameter count measures the architecture, not the budget.

Parameters (V vocab, C d_model, F d_ff; ``h.blocks.i``):

| name | shape | note |
|---|---|---|
| wte.weight | (V, C) | token embedding; no position table (RoPE) |
| h.blocks.i.ln_1.weight | (C,) | RMSNorm gain before attention |
| h.blocks.i.attn.c_attn.weight | (3C, C) | fused q, k, v, no bias |
| h.blocks.i.attn.c_proj.weight | (C, C) | |
| h.blocks.i.ln_2.weight | (C,) | RMSNorm gain before the MLP |
| h.blocks.i.mlp.w1.weight, .w3.weight | (F, C) | gate (SiLU) and up projections |
| h.blocks.i.mlp.w2.weight | (C, F) | down projection |
| h.ln_f.weight | (C,) | final RMSNorm |
| lm_head.weight | (V, C) | untied output layer |
"""
from __future__ import annotations

from dataclasses import replace

from ...core.checks import check_positive_int
from ..registry import register
from .gpt import GPTConfig, gpt_entry


def llama_config(**kw) -> GPTConfig:
    """GPT-2's config with LLaMA's changes: pre-RMSNorm (eps 1e-6), SwiGLU, rotary
    positions, no biases, an untied output layer, plain N(0, 0.02) init."""
    return GPTConfig(**{**dict(norm="rms", activation="swiglu", positions="rope", bias=False,
                               tie_embeddings=False, scaled_residual_init=False, eps=1e-6), **kw})


def _count(c: GPTConfig, d_ff: int) -> int:
    """Parameters of ``GPT(c)`` with feed-forward width ``d_ff`` (see ``count_parameters``)."""
    V, T, C, L = c.vocab_size, c.block_size, c.d_model, c.n_layer
    b = int(c.bias)
    norm = 2 * C if c.norm == "layer" else C                  # LayerNorm: gain + bias; RMSNorm: gain
    attn = 4 * C * C + b * 4 * C                              # c_attn (3C, C) + c_proj (C, C), biases 3C + C
    if c.activation == "swiglu":
        mlp = 3 * C * d_ff + b * (2 * d_ff + C)               # w1, w3 (F, C), w2 (C, F)
    else:
        mlp = 2 * C * d_ff + b * (d_ff + C)                   # c_fc (F, C), c_proj (C, F)
    total = V * C                                             # wte (V, C)
    total += T * C if c.positions == "learned" else 0         # wpe (T, C); RoPE has none
    total += L * (2 * norm + attn + mlp)                      # ln_1, attn, ln_2, mlp per block
    total += norm if c.final_norm else 0                      # ln_f
    total += 0 if c.tie_embeddings else V * C                 # lm_head (V, C), no bias
    return total


def count_parameters(config: GPTConfig) -> int:
    """The number of parameters of ``GPT(config)``, in closed form.

    Per block: two norms, attention 4C^2 (+ 4C biases), the MLP 2CF (GELU) or 3CF
    (SwiGLU) (+ biases); around the blocks: wte VC, wpe TC (learned positions only),
    ln_f, and an untied lm_head VC. LayerNorm always has a bias (``bias`` is about the
    linear layers); RMSNorm never has one.
    """
    return _count(config, config.d_ff)


def match_d_ff(config: GPTConfig, target: int, *, multiple_of: int = 1, tol: float = 0.02) -> GPTConfig:
    """``config`` with the feed-forward width d_ff whose parameter count is nearest ``target``.

    The count is linear in d_ff: P(F) = P(0) + F * L * (3C + 2b) for SwiGLU, (2C + b)
    otherwise, so F = (target - P(0)) / slope, rounded to a multiple of ``multiple_of``
    (LLaMA rounds to 256; at toy scale 1). Raises ValueError if no width >= 1 comes
    within ``tol`` (relative) of ``target``: everything outside the MLPs is already too
    big, or the rounding is too coarse.
    """
    check_positive_int("target parameter count", target)
    check_positive_int("multiple_of", multiple_of)
    base = _count(config, 0)                                  # everything but the MLP matrices
    slope = _count(config, 1) - base                          # parameters per unit of d_ff
    d_ff = max(round((target - base) / slope / multiple_of), 1) * multiple_of
    got = _count(config, d_ff)
    if abs(got - target) > tol * target:
        raise ValueError(
            f"cannot match {target:,} parameters within {tol:.0%}: with d_model {config.d_model}, "
            f"{config.n_layer} layers and vocabulary {config.vocab_size}, the parameters outside the MLPs "
            f"already number {base:,}, and d_ff {d_ff} gives {got:,}; use a smaller vocabulary, "
            "a larger model, or tie the embeddings")
    return replace(config, d_ff=d_ff)


def llama_like(gpt2_config: GPTConfig, *, multiple_of: int = 1, tol: float = 0.02) -> GPTConfig:
    """A LLaMA-style config (``llama_config``: pre-RMSNorm, SwiGLU, RoPE, no biases,
    untied output layer) with the vocabulary, context, layers, heads, width and dropout
    of ``gpt2_config`` and a SwiGLU width d_ff chosen so that both have the same number of
    parameters (within ``tol``).

    At GPT-2's F = 4C the LLaMA rule F = 2/3 * 4C already balances the MLPs; what is left
    to pay for is the untied head (+VC) against the dropped position table (-TC) and
    biases, so d_ff lands near 8C/3 when V is close to T.
    """
    c = gpt2_config
    if (c.d_model // c.n_head) % 2:
        raise ValueError(f"RoPE rotates pairs of a head's channels: head size d_model / n_head = "
                         f"{c.d_model} / {c.n_head} = {c.d_model // c.n_head} is odd")
    llama = llama_config(vocab_size=c.vocab_size, block_size=c.block_size, n_layer=c.n_layer,
                            n_head=c.n_head, d_model=c.d_model, dropout=c.dropout)
    return match_d_ff(llama, count_parameters(c), multiple_of=multiple_of, tol=tol)


register(gpt_entry("llama", "LLaMA-style", "Touvron et al. 2023, LLaMA: Open and Efficient Foundation Language Models",
                   llama_config, "13_llama"))
