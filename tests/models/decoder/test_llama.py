"""LLaMA-style configs at GPT-2's parameter count: the closed-form count, d_ff matching,
RoPE's relative-position property through the real modules, a float64 whole-model
gradcheck, bad input."""
from dataclasses import replace

import numpy as np
import pytest

from minipt.core.gradcheck import check_module
from minipt.models.decoder.gpt import GPT, GPTConfig
from minipt.models.decoder.llama import (
    count_parameters,
    llama_config,
    llama_like,
    match_d_ff,
)
from minipt.nn.attention import MultiHeadAttention
from minipt.ops.positions import rope_forward

SMALL = dict(vocab_size=11, block_size=8, n_layer=2, n_head=2, d_model=16)
TOY = dict(vocab_size=27, block_size=64, n_layer=2, n_head=4, d_model=64)   # lesson 13's size

CONFIGS = {
    "gpt1": GPTConfig.gpt1(**SMALL),
    "gpt2": GPTConfig.gpt2(**SMALL),
    "gpt3": GPTConfig.gpt3(**SMALL),
    "llama": llama_config(**SMALL),
    "gpt2-toy": GPTConfig.gpt2(**TOY),
    "llama-toy": llama_config(**TOY),
    "rms": GPTConfig.gpt2(norm="rms", **SMALL),
    "swiglu-bias": GPTConfig.gpt2(activation="swiglu", **SMALL),
    "rope-untied": GPTConfig.gpt2(positions="rope", tie_embeddings=False, **SMALL),
    "no-bias-no-lnf": GPTConfig.gpt2(bias=False, final_norm=False, d_ff=40, **SMALL),
    "llama-bias-tied": llama_config(bias=True, tie_embeddings=True, d_ff=7, n_layer=3,
                                       **{k: v for k, v in SMALL.items() if k != "n_layer"}),
    "relu-3-heads": GPTConfig.gpt2(vocab_size=50, block_size=5, n_layer=1, n_head=3, d_model=24, activation="relu"),
}


@pytest.mark.parametrize("name", CONFIGS)
def test_count_formula_equals_the_built_model(name):
    config = CONFIGS[name]
    assert count_parameters(config) == GPT(config, rng=np.random.default_rng(0)).num_parameters()


@pytest.mark.parametrize("shape", [SMALL, TOY, dict(vocab_size=65, block_size=128, n_layer=4, n_head=4, d_model=128),
                                   dict(vocab_size=200, block_size=32, n_layer=6, n_head=8, d_model=96)])
def test_llama_like_has_gpt2s_parameter_count_and_llamas_architecture(shape):
    gpt2 = GPTConfig.gpt2(**shape)
    llama = llama_like(gpt2)
    n2 = GPT(gpt2, rng=np.random.default_rng(0)).num_parameters()
    nl = GPT(llama, rng=np.random.default_rng(0)).num_parameters()
    assert abs(nl - n2) / n2 < 0.01
    assert (llama.norm, llama.activation, llama.positions, llama.bias, llama.tie_embeddings) == \
        ("rms", "swiglu", "rope", False, False)
    for key, value in shape.items():
        assert getattr(llama, key) == value
    # the rounding error is at most half a unit of d_ff: L * 3C / 2 parameters
    assert abs(nl - n2) <= shape["n_layer"] * 3 * shape["d_model"] / 2


def test_llama_like_lands_near_two_thirds_of_4c_when_vocab_is_close_to_context():
    llama = llama_like(GPTConfig.gpt2(**TOY))        # untied head +27*64, no wpe -64*64, no biases
    assert abs(llama.d_ff - 8 * 64 / 3) < 15


@pytest.mark.parametrize("change", [dict(norm="rms"), dict(activation="swiglu"), dict(positions="rope"),
                                    dict(norm="rms", activation="swiglu", positions="rope")])
def test_each_change_alone_can_be_matched(change):
    gpt2 = GPTConfig.gpt2(**TOY)
    target = count_parameters(gpt2)
    variant = match_d_ff(replace(gpt2, **change), target)
    assert abs(count_parameters(variant) - target) / target < 0.005
    if change.get("activation") == "swiglu":                 # 3 matrices where GELU had 2
        assert abs(variant.d_ff - 2 / 3 * 4 * 64) < 20


def test_multiple_of_rounds_d_ff():
    llama = llama_like(GPTConfig.gpt2(**TOY), multiple_of=8, tol=0.05)
    assert llama.d_ff % 8 == 0


def _rope_mha():
    m = MultiHeadAttention(16, 2, rng=np.random.default_rng(0), rope=True, bias=False, dtype=np.float64)
    r = np.random.default_rng(1)
    for _, p in m.named_parameters():                        # larger weights: sharp, position-dependent scores
        p[...] = r.standard_normal(p.shape) * 0.5
    return m


@pytest.mark.parametrize("shift", [1, 37, 1000])
def test_rope_scores_depend_only_on_relative_position(shift):
    # q.k after rotation: <R_m q, R_n k> = <q, R_(n-m) k>
    r = np.random.default_rng(0)
    q, k = r.standard_normal((2, 1, 1, 6, 8))                          # (B, H, T, D) each
    pos = np.array([0, 3, 4, 9, 10, 20])
    scores = lambda p: rope_forward(q, p)[0][0, 0] @ rope_forward(k, p)[0][0, 0].T   # (T, T)
    np.testing.assert_allclose(scores(pos + shift), scores(pos), rtol=0, atol=1e-11)
    assert not np.allclose(scores(2 * pos), scores(pos), atol=1e-3)    # relative distances changed

    # through the module: same attention weights and output at positions shifted together
    m = _rope_mha()
    x = r.standard_normal((2, 6, 16))
    y0 = m(x, causal=True, positions=np.arange(6), return_weights=True)
    w0 = m.last_weights
    y1 = m(x, causal=True, positions=np.arange(6) + shift, return_weights=True)
    np.testing.assert_allclose(m.last_weights, w0, rtol=0, atol=1e-11)
    np.testing.assert_allclose(y1, y0, rtol=0, atol=1e-11)
    y2 = m(x, causal=True, positions=np.arange(6) * 3)
    assert not np.allclose(y2, y0, atol=1e-4)


def test_llama_body_is_invariant_to_a_shift_of_all_positions_and_runs_past_block_size():
    model = GPT(llama_like(GPTConfig.gpt2(**SMALL)), rng=np.random.default_rng(0)).to(np.float64).eval()
    r = np.random.default_rng(1)
    for _, p in model.named_parameters():
        p[...] += r.standard_normal(p.shape) * 0.3
    x = model.wte(r.integers(0, 11, (2, 8)))                           # (B, T, C)
    h0 = model.h(x, causal=True, positions=np.arange(8))
    h1 = model.h(x, causal=True, positions=np.arange(8) + 500)        # far past block_size 8
    np.testing.assert_allclose(h1, h0, rtol=0, atol=1e-10)


def test_llama_like_whole_model_gradcheck_float64():
    model = GPT(llama_like(GPTConfig.gpt2(**SMALL)), rng=np.random.default_rng(0)).to(np.float64)
    r = np.random.default_rng(1)
    for _, p in model.named_parameters():                # larger weights: non-trivial attention and gates
        p[...] += r.standard_normal(p.shape) * 0.2
    idx = r.integers(0, 11, (2, 7))
    result = check_module(model, idx, np.roll(idx, -1, axis=1), select=lambda out: out[0], max_checks=6)
    names = [a.name for a in result.arrays]
    assert result.passed, str(result)
    assert "lm_head.weight" in names and "h.blocks.1.mlp.w3.weight" in names and "wpe.weight" not in names
    assert not any(n.endswith(".bias") for n in names)


def test_bad_input():
    big_vocab = GPTConfig.gpt2(vocab_size=5000, block_size=8, n_layer=1, n_head=2, d_model=16)
    with pytest.raises(ValueError, match="cannot match"):           # the untied head alone is too big
        llama_like(big_vocab)
    with pytest.raises(ValueError, match="head size .* is odd"):
        llama_like(GPTConfig.gpt2(vocab_size=11, block_size=8, n_layer=1, n_head=4, d_model=12))
    with pytest.raises(ValueError, match="target parameter count"):
        match_d_ff(llama_config(**SMALL), 0)
    with pytest.raises(ValueError, match="multiple_of"):
        llama_like(GPTConfig.gpt2(**SMALL), multiple_of=0)
    with pytest.raises(ValueError, match="cannot match"):           # rounding far too coarse for a tiny model
        llama_like(GPTConfig.gpt2(**SMALL), multiple_of=256)
