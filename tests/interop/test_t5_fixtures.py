"""minipt's T5 against transformers' ``T5ForConditionalGeneration``, with no torch: the
fixtures of ``scripts/make_t5_fixtures.py`` (torch 2.13.0, transformers 5.23.0, float64).

Covered: v1.0 (ReLU, tied, rescaled head) and v1.1 (gated GELU, no rescale; tied, as
transformers 5.23's ``T5Config`` builds it), 2 encoder and 3 decoder layers, a padded source
(``attention_mask``), ignored labels. Logits and every parameter's gradient must agree to
1e-12 relative to the largest entry; bucket ids against transformers' on a grid of settings.
"""
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from minipt.interop import from_pretrained, save_pretrained, their_named
from minipt.interop.safetensors_io import read_file
from minipt.models.seq2seq.t5 import T5, T5Config, shift_right
from minipt.ops.positions import relative_position_bucket

FIXTURES = Path(__file__).resolve().parent / "fixtures"
VARIANTS = ("v1_0", "v1_1")
TOLERANCE = 1e-12


def rel_error(a, b) -> float:
    return float(np.abs(np.asarray(a) - b).max() / max(np.abs(b).max(), 1e-300))


def run(variant: str):
    model = from_pretrained(FIXTURES / f"t5_{variant}")
    ref, meta = read_file(FIXTURES / "t5_reference.safetensors")
    model.zero_grad()
    # transformers' attention_mask is exactly minipt's padding mask (ids != pad) here
    assert np.array_equal(ref["attention_mask"], ref["input_ids"] != model.config.pad_id)
    loss, logits = model(ref["input_ids"], shift_right(ref["labels"], 0), ref["labels"])
    model.backward()
    mine = {k[len(variant) + 1:]: v for k, v in ref.items() if k.startswith(variant + "/")}
    return model, mine, meta, loss, logits


@pytest.mark.parametrize("variant", VARIANTS)
def test_logits_and_loss_match_transformers(variant):
    model, ref, meta, loss, logits = run(variant)
    assert meta["transformers"] == "5.23.0" and meta["torch"].startswith("2.13.0")
    assert model.dtype == np.float64 and logits.shape == ref["logits"].shape == (2, 9, 40)
    assert rel_error(logits, ref["logits"]) <= TOLERANCE
    assert abs(float(loss) - float(ref["loss"])) <= TOLERANCE * float(ref["loss"])


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_gradient_matches_transformers(variant):
    model, ref, _, _, _ = run(variant)
    ours = their_named(model, "grads")
    theirs = {k[len("grad/"):]: v for k, v in ref.items() if k.startswith("grad/")}
    assert sorted(ours) == sorted(theirs)
    for n, g in theirs.items():
        assert np.abs(g).max() > 0, f"{n}: the fixture's gradient is zero, so it checks nothing"
        assert rel_error(ours[n], g) <= TOLERANCE, n


def test_configs_map_onto_minipt():
    common = dict(vocab_size=40, d_model=16, d_ff=24, n_layer=2, n_decoder_layer=3, n_head=2, num_buckets=8,
                  max_distance=12, max_source_len=512, max_target_len=512, pad_id=0, dropout=0.0, eps=1e-6, tie_embeddings=True)
    assert from_pretrained(FIXTURES / "t5_v1_0").config == T5Config(ffn="relu", scale_output=True, **common)
    assert from_pretrained(FIXTURES / "t5_v1_1").config == T5Config(ffn="gated-gelu", scale_output=False, **common)


def test_bucket_ids_equal_transformers_on_a_grid_of_settings():
    """Equal everywhere but where transformers' float32 log (SLEEF, 1 ulp) and NumPy's round
    a log ratio lying on an integer differently: listed, each on a true boundary."""
    ref, _ = read_file(FIXTURES / "t5_reference.safetensors")
    rel = np.arange(-140, 141)
    off = []
    for name, bi in (("bidirectional", True), ("causal", False)):
        for (n, d), theirs in zip(ref["buckets/settings"], ref[f"buckets/{name}"]):
            ours = relative_position_bucket(rel, bi, int(n), int(d))
            for r in rel[ours != theirs]:
                half = n // 2 if bi else n
                exact = half // 2
                x = math.log(abs(int(r)) / exact) / math.log(d / exact) * (half - exact)   # float64
                assert abs(x - round(x)) < 1e-5, f"{n}, {d}, {name}, {r}: not a boundary ({x})"
                off.append((int(n), int(d), name, int(r)))
    assert len(ref["buckets/settings"]) > 300
    assert off == [(17, 27, "causal", -18), (17, 27, "causal", -12), (19, 49, "causal", -21)], off


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ffn, tied", [("relu", True), ("gated-gelu", False), ("gated-gelu", True)])
def test_round_trip_is_bitwise(tmp_path, dtype, ffn, tied):
    model = T5(T5Config(vocab_size=30, d_model=8, d_ff=12, n_layer=2, n_decoder_layer=1, n_head=2, ffn=ffn,
                        tie_embeddings=tied, max_source_len=20, max_target_len=20), rng=np.random.default_rng(0), dtype=dtype)
    save_pretrained(model, tmp_path / "out")
    back = from_pretrained(tmp_path / "out")
    assert back.config == model.config and back.dtype == dtype
    ours, theirs = model.parameters(), back.parameters()
    assert sorted(ours) == sorted(theirs)
    assert all(ours[k].tobytes() == theirs[k].tobytes() for k in ours)
    tensors, _ = read_file(tmp_path / "out" / "model.safetensors")
    assert ("lm_head.weight" in tensors) == (not tied)


def test_an_older_v1_1_config_unties_and_does_not_rescale(tmp_path):
    """Google's v1.1 config.json: tie_word_embeddings false and no scale_decoder_outputs."""
    model = T5(T5Config(vocab_size=30, d_model=8, d_ff=12, n_layer=1, n_head=2, ffn="gated-gelu",
                        tie_embeddings=False), rng=np.random.default_rng(0), dtype=np.float64)
    save_pretrained(model, tmp_path / "x")
    cfg = json.loads((tmp_path / "x" / "config.json").read_text())
    del cfg["scale_decoder_outputs"]
    (tmp_path / "x" / "config.json").write_text(json.dumps(cfg))
    back = from_pretrained(tmp_path / "x")
    assert back.config.tie_embeddings is False and back.config.scale_output is False


@pytest.mark.parametrize("key, value, says", [("feed_forward_proj", "gated-silu", "feed_forward_proj"),
                                              ("d_kv", 4, "d_kv"), ("decoder_start_token_id", 5,
                                                                    "decoder_start_token_id"),
                                              ("is_encoder_decoder", False, "is_encoder_decoder"),
                                              ("architectures", ["BartModel"], "architectures")])
def test_options_minipt_does_not_implement_are_refused_by_name(tmp_path, key, value, says):
    shutil.copytree(FIXTURES / "t5_v1_0", tmp_path / "x")
    cfg = json.loads((tmp_path / "x" / "config.json").read_text())
    cfg[key] = value
    (tmp_path / "x" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match=says):
        from_pretrained(tmp_path / "x")
