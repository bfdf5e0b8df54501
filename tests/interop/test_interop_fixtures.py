"""minipt against transformers' own numbers, with no torch: the committed fixtures.

``scripts/make_hf_fixtures.py`` (run by hand with torch 2.13.0 and transformers 5.23.0)
saved a tiny random GPT2LMHeadModel, LlamaForCausalLM and OpenAIGPTLMHeadModel (GPT-1) in
float64 with a batch, its logits, loss and every parameter's gradient. Here minipt loads
the folders with ``from_pretrained`` and must agree, parameter by parameter under
transformers' names, relative to the largest entry: logits to 1e-9 and each gradient to
1e-8 for GPT-2 and LLaMA; GPT-1 (float64 end to end in transformers' eager code) to 1e-12.
"""
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from minipt.interop import from_pretrained, openai_gpt_layout, their_named
from minipt.interop.safetensors_io import read_file
from minipt.models.decoder.gpt import GPT, GPTConfig
from minipt.ops.positions import rope_forward

FIXTURES = Path(__file__).resolve().parent / "fixtures"
ARCHS = ["gpt2", "llama", "openai-gpt"]
TOLERANCE = {"gpt2": (1e-9, 1e-8), "llama": (1e-9, 1e-8), "openai-gpt": (1e-12, 1e-12)}   # logits, gradients


def rel_error(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(np.asarray(a) - b).max() / max(np.abs(b).max(), 1e-300))


def run(arch: str):
    model = from_pretrained(FIXTURES / arch)
    ref, meta = read_file(FIXTURES / f"{arch}_reference.safetensors")
    model.zero_grad()
    loss, logits = model(ref["input_ids"], ref["targets"])
    model.backward()
    return model, ref, meta, loss, logits


@pytest.mark.parametrize("arch", ARCHS)
def test_logits_and_loss_match_transformers(arch):
    model, ref, meta, loss, logits = run(arch)
    assert meta["transformers"] == "5.23.0" and meta["torch"].startswith("2.13.0")
    assert model.dtype == np.float64 and logits.shape == ref["logits"].shape == (2, 16, 64)
    tol = TOLERANCE[arch][0]
    assert rel_error(logits, ref["logits"]) <= tol
    assert abs(float(loss) - float(ref["loss"])) <= tol * float(ref["loss"])


@pytest.mark.parametrize("arch", ARCHS)
def test_every_gradient_matches_transformers(arch):
    model, ref, _, _, _ = run(arch)
    ours = their_named(model, "grads")                   # minipt grads under transformers' names
    theirs = {k[len("grad/"):]: v for k, v in ref.items() if k.startswith("grad/")}
    assert sorted(ours) == sorted(theirs)
    for name, g in theirs.items():
        assert np.abs(g).max() > 0, f"{name}: the fixture's gradient is zero, so it checks nothing"
        assert rel_error(ours[name], g) <= TOLERANCE[arch][1], name


def test_configs_map_onto_minipt():
    g = from_pretrained(FIXTURES / "gpt2").config
    assert (g.d_model, g.n_layer, g.n_head, g.vocab_size, g.block_size, g.d_ff) == (32, 2, 4, 64, 16, 64)
    assert g.eps == 3e-5 and g.tie_embeddings and g.activation == "gelu_tanh" and g.norm == "layer"
    ll = from_pretrained(FIXTURES / "llama").config
    assert (ll.d_ff, ll.eps, ll.tie_embeddings, ll.bias) == (48, 4e-6, False, False)
    assert ll.norm == "rms" and ll.activation == "swiglu" and ll.positions == "rope"
    g1 = from_pretrained(FIXTURES / "openai-gpt").config
    assert g1 == GPTConfig.gpt1(vocab_size=64, block_size=16, n_layer=2, n_head=4, d_model=32, eps=2e-5)
    assert (g1.d_ff, g1.activation, g1.prenorm, g1.final_norm, g1.tie_embeddings) == (128, "gelu_tanh", False,
                                                                                       False, True)


def test_gpt1_defaults_are_openai_gpt_defaults():
    """An ``openai-gpt`` config that states nothing but its type (transformers' defaults:
    the released GPT-1's shape, eps 1e-5, afn gelu, tied) is GPTConfig.gpt1 with only the
    sizes given: eps, activation, tying, post-LN, no ln_f and d_ff = 4C are gpt1's defaults."""
    hf = openai_gpt_layout.config_from_hf({"model_type": "openai-gpt"})
    assert hf == GPTConfig.gpt1(vocab_size=40478, block_size=512, n_layer=12, n_head=12, d_model=768, dropout=0.1)


def test_fixture_folders_are_as_transformers_writes_them():
    gpt2, meta = read_file(FIXTURES / "gpt2" / "model.safetensors")
    assert meta == {"format": "pt"}
    assert "lm_head.weight" not in gpt2                  # tied head: no tensor
    assert gpt2["transformer.h.0.attn.c_attn.weight"].shape == (32, 96)   # Conv1D: (in, out)
    assert gpt2["transformer.h.0.mlp.c_fc.weight"].shape == (32, 64)
    llama, _ = read_file(FIXTURES / "llama" / "model.safetensors")
    assert llama["model.layers.1.self_attn.k_proj.weight"].shape == (32, 32)
    assert llama["lm_head.weight"].shape == (64, 32)
    gpt1, _ = read_file(FIXTURES / "openai-gpt" / "model.safetensors")
    assert "lm_head.weight" not in gpt1 and not any("ln_f" in n for n in gpt1)      # tied, no final LayerNorm
    assert gpt1["transformer.positions_embed.weight"].shape == (16, 32)
    assert gpt1["transformer.h.1.mlp.c_proj.weight"].shape == (128, 32)            # Conv1D (in, out), 4C
    for tensors in (gpt2, llama, gpt1):                  # every 1-D tensor is random, not a default 0 or 1
        assert all(np.unique(a).size > 1 for a in tensors.values())


def test_exact_gelu_would_not_match_gpt1():
    """The GPT-1 fixture sees the activation: the same weights with exact (erf) GELU, which
    minipt's GPT-1 used before, miss transformers' logits far beyond the tolerance."""
    model, ref, _, _, _ = run("openai-gpt")
    exact = GPT(dataclasses.replace(model.config, activation="gelu"), rng=np.random.default_rng(0), dtype=np.float64)
    exact.load_state_dict(model.parameters())
    _, logits = exact(ref["input_ids"])
    assert rel_error(logits, ref["logits"]) > 1e-6


def test_rope_pairs_channel_i_with_i_plus_half():
    """minipt rotates halves like transformers' rotate_half: channel i pairs with i + D/2."""
    D = 8
    x = np.zeros((1, 1, 1, D))
    x[..., 1] = 1.0                                      # e_1
    y, _ = rope_forward(x, np.array([3]))
    angle = 3 * 10000.0 ** (-2 / D)                      # t * theta^(-2i/D), i = 1
    expected = np.zeros(D)
    expected[1], expected[1 + D // 2] = np.cos(angle), np.sin(angle)
    np.testing.assert_allclose(y[0, 0, 0], expected, atol=1e-15)


def test_interleaved_rope_rows_would_not_match():
    """The fixture test sees the convention: permuting q/k rows to interleaved pairs (what a
    Meta-original checkpoint would need) changes the logits far beyond the tolerance."""
    model, ref, _, _, _ = run("llama")
    C, H = model.config.d_model, model.config.n_head
    D = C // H
    perm = np.concatenate([h * D + np.stack([np.arange(D // 2), np.arange(D // 2) + D // 2], 1).reshape(-1)
                           for h in range(H)])       # halves order -> (0, D/2, 1, D/2 + 1, ...)
    for block in model.h.blocks:
        w = block.attn.c_attn.params["weight"]           # (3C, C): q | k | v
        w[:C] = w[:C][perm]
        w[C:2 * C] = w[C:2 * C][perm]
    _, logits = model(ref["input_ids"])
    assert rel_error(logits, ref["logits"]) > 1e-3
