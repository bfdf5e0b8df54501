"""minipt's XLNet against transformers' ``XLNetLMHeadModel``, with no torch: the fixtures
of ``scripts/make_xlnet_fixtures.py`` (torch 2.13.0, transformers 5.23.0, float64).

Covered: ``attn_type`` "bi", no memory (``mems`` None, ``use_mems=False``), two-stream
attention with ``perm_mask`` from a sampled order and ``target_mapping`` on the last 4 of
12 positions, one segment (no ``token_type_ids``) and two segments (relative segment
encoding), tied ``lm_loss`` with its bias, exact GELU. Logits and every parameter's
gradient must agree to 1e-12 relative to the largest entry.
"""
from pathlib import Path

import numpy as np
import pytest

from minipt.interop import from_pretrained, save_pretrained, their_named
from minipt.interop.safetensors_io import read_file
from minipt.models.protocol import IGNORE
from minipt.models.unified.xlnet import XLNet, XLNetConfig
from minipt.objectives.permutation import order_masks

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RUNS = {"one_segment": False, "two_segments": True}
TOLERANCE = 1e-12


def rel_error(a, b) -> float:
    return float(np.abs(np.asarray(a) - b).max() / max(np.abs(b).max(), 1e-300))


def run(name: str):
    model = from_pretrained(FIXTURES / "xlnet")
    ref, meta = read_file(FIXTURES / "xlnet_reference.safetensors")
    idx, order = ref["input_ids"], ref["order"]
    where = ref["target_mapping"].argmax(-1)                         # (B, M) predicted positions
    targets = np.full(idx.shape, IGNORE)
    for b in range(idx.shape[0]):
        targets[b, where[b]] = ref["labels"][b]
    model.zero_grad()
    loss, logits = model(idx, targets, order, ref["token_type_ids"] if RUNS[name] else None)
    model.backward()
    picked = np.stack([logits[b, where[b]] for b in range(idx.shape[0])])   # (B, M, V) as transformers
    return model, {k[len(name) + 1:]: v for k, v in ref.items() if k.startswith(name + "/")}, ref, meta, loss, picked


@pytest.mark.parametrize("name", list(RUNS))
def test_logits_and_loss_match_transformers(name):
    model, ref, _, meta, loss, logits = run(name)
    assert meta["transformers"] == "5.23.0" and meta["torch"].startswith("2.13.0")
    assert model.dtype == np.float64 and logits.shape == ref["logits"].shape == (2, 4, 40)
    assert rel_error(logits, ref["logits"]) <= TOLERANCE
    assert abs(float(loss) - float(ref["loss"])) <= TOLERANCE * float(ref["loss"])


@pytest.mark.parametrize("name", list(RUNS))
def test_every_gradient_matches_transformers(name):
    model, ref, _, _, _, _ = run(name)
    ours = their_named(model, "grads")
    theirs = {k[len("grad/"):]: v for k, v in ref.items() if k.startswith("grad/")}
    unused = sorted(set(ours) - set(theirs))                         # no gradient in transformers: None
    assert unused == ([] if RUNS[name] else sorted(n for n in ours if n.endswith(("r_s_bias", "seg_embed"))))
    for n in unused:
        assert not ours[n].any(), f"{n}: transformers gave no gradient, minipt a non-zero one"
    for n, g in theirs.items():
        assert np.abs(g).max() > 0, f"{n}: the fixture's gradient is zero, so it checks nothing"
        assert rel_error(ours[n], g) <= TOLERANCE, n


def test_the_fixture_masks_are_minipts_masks():
    """transformers' perm_mask (1 = may not see) is the complement of minipt's query mask
    for the same order; its content mask is that with the diagonal allowed."""
    ref, _ = read_file(FIXTURES / "xlnet_reference.safetensors")
    content, query = order_masks(ref["order"])
    np.testing.assert_array_equal(ref["perm_mask"] == 0, query)
    np.testing.assert_array_equal((ref["perm_mask"] - np.eye(12)) <= 0, content)


def test_config_maps_onto_minipt():
    model = from_pretrained(FIXTURES / "xlnet")
    assert model.config == XLNetConfig(vocab_size=40, n_layer=2, n_head=2, d_model=16, d_inner=24,
                                       activation="gelu", eps=1e-6, tie_embeddings=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("tied", [True, False])
def test_round_trip_is_bitwise(tmp_path, dtype, tied):
    model = XLNet(XLNetConfig(vocab_size=30, n_layer=2, n_head=2, d_model=8, activation="gelu_tanh",
                              tie_embeddings=tied), rng=np.random.default_rng(0), dtype=dtype)
    for _, p in model.named_parameters():
        p[...] = np.random.default_rng(1).normal(0.0, 0.3, p.shape)
    save_pretrained(model, tmp_path / "out")
    back = from_pretrained(tmp_path / "out")
    assert back.config == model.config and back.dtype == dtype
    ours, theirs = model.parameters(), back.parameters()
    assert sorted(ours) == sorted(theirs)
    assert all(ours[k].tobytes() == theirs[k].tobytes() for k in ours)
    tensors, _ = read_file(tmp_path / "out" / "model.safetensors")
    assert ("lm_loss.weight" in tensors) == (not tied)


@pytest.mark.parametrize("key, value, says", [("attn_type", "uni", "attn_type"), ("bi_data", True, "bi_data"),
                                              ("clamp_len", 8, "clamp_len"), ("ff_activation", "relu", "ff_activation"),
                                              ("d_head", 4, "d_head")])
def test_options_minipt_does_not_implement_are_refused_by_name(tmp_path, key, value, says):
    import json
    import shutil
    shutil.copytree(FIXTURES / "xlnet", tmp_path / "x")
    cfg = json.loads((tmp_path / "x" / "config.json").read_text())
    cfg[key] = value
    (tmp_path / "x" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match=says):
        from_pretrained(tmp_path / "x")
