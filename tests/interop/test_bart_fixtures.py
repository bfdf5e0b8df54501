"""minipt's BART against transformers' ``BartForConditionalGeneration``, with no torch: the
fixtures of ``scripts/make_bart_fixtures.py`` (torch 2.13.0, transformers 5.23.0, float64).

Covered: a padded source (``attention_mask`` 0 on the pad keys), labels with IGNORE shifted
right behind ``decoder_start_token_id``, learned positions with the offset of 2,
layernorm_embedding, post-LN blocks with exact GELU, the tied head with final_logits_bias.
Logits and every parameter's gradient agree to 1e-12 relative to the largest entry;
minipt's KV-cached greedy decoding reproduces transformers' greedy output token for token.
"""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from minipt.inference.seq2seq_decoding import greedy
from minipt.interop import from_pretrained, save_pretrained, their_named
from minipt.interop.safetensors_io import read_file
from minipt.models.seq2seq.bart import Bart, BartConfig

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TOLERANCE = 1e-12


def rel_error(a, b) -> float:
    return float(np.abs(np.asarray(a) - b).max() / max(np.abs(b).max(), 1e-300))


def run():
    model = from_pretrained(FIXTURES / "bart")
    ref, meta = read_file(FIXTURES / "bart_reference.safetensors")
    model.zero_grad()
    loss, logits = model(ref["input_ids"], model.decoder_input(ref["labels"]), ref["labels"])
    model.backward()
    return model, ref, meta, loss, logits


def test_logits_and_loss_match_transformers():
    model, ref, meta, loss, logits = run()
    assert meta["transformers"] == "5.23.0" and meta["torch"].startswith("2.13.0")
    assert model.dtype == np.float64 and logits.shape == ref["logits"].shape == (2, 8, 40)
    np.testing.assert_array_equal(model.decoder_input(ref["labels"]), ref["decoder_input_ids"])
    np.testing.assert_array_equal(model.source_mask(ref["input_ids"])[:, 0], ref["attention_mask"] == 1)
    assert rel_error(logits, ref["logits"]) <= TOLERANCE
    assert abs(float(loss) - ref["loss"].item()) <= TOLERANCE * ref["loss"].item()


def test_every_gradient_matches_transformers():
    model, ref, _, _, _ = run()
    ours = their_named(model, "grads")
    theirs = {k[len("grad/"):]: v for k, v in ref.items() if k.startswith("grad/")}
    assert sorted(ours) == sorted(theirs)
    unused = ["model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight"]
    scale = max(np.abs(g).max() for g in theirs.values())
    for n, g in theirs.items():
        if n in unused:                                  # rows 0, 1 (the offset) and past the length: zero
            assert np.abs(g[2:10]).max() > 0 and not g[:2].any()
        elif n.endswith("k_proj.bias"):                  # q.b_k shifts every score of a row alike: zero
            assert np.abs(g).max() < 1e-15 * scale and np.abs(ours[n]).max() < 1e-15 * scale, n
            continue
        else:
            assert np.abs(g).max() > 0, f"{n}: the fixture's gradient is zero, so it checks nothing"
        assert rel_error(ours[n], g) <= TOLERANCE, n


def test_cached_greedy_equals_transformers_greedy():
    model = from_pretrained(FIXTURES / "bart")
    ref, _ = read_file(FIXTURES / "bart_reference.safetensors")
    want = ref["greedy/output"]                                             # </s> + 12 tokens
    out = greedy(model, ref["greedy/input_ids"], start_id=2, eos_id=-1, max_new_tokens=want.shape[1] - 1)
    np.testing.assert_array_equal(out, want[:, 1:])                         # -1: no token ends the output


def test_config_maps_onto_minipt():
    model = from_pretrained(FIXTURES / "bart")
    assert model.config == BartConfig(vocab_size=40, max_positions=20, encoder_layers=2, decoder_layers=2, n_head=2,
                                      d_model=16, d_ff=24, activation="gelu", eps=1e-5, pad_id=1, eos_id=2,
                                      decoder_start_id=2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_round_trip_is_bitwise(tmp_path, dtype):
    model = Bart(BartConfig(vocab_size=30, max_positions=12, encoder_layers=1, decoder_layers=2, n_head=2, d_model=8,
                            activation="gelu_tanh", pad_id=0, eos_id=5, decoder_start_id=6),
                 rng=np.random.default_rng(0), dtype=dtype)
    for _, p in model.named_parameters():
        p[...] = np.random.default_rng(1).normal(0.0, 0.3, p.shape)
    save_pretrained(model, tmp_path / "out")
    back = from_pretrained(tmp_path / "out")
    assert back.config == model.config and back.dtype == dtype
    ours, theirs = model.parameters(), back.parameters()
    assert sorted(ours) == sorted(theirs) and all(ours[k].tobytes() == theirs[k].tobytes() for k in ours)
    tensors, _ = read_file(tmp_path / "out" / "model.safetensors")
    assert "lm_head.weight" not in tensors and tensors["final_logits_bias"].shape == (1, 30)


def test_export_refuses_what_transformers_cannot_hold(tmp_path):
    model = Bart(BartConfig(vocab_size=30, max_positions=12, n_head=2, d_model=8, eps=1e-6),
                 rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="eps=1e-06"):
        save_pretrained(model, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("key, value, says", [
    ("scale_embedding", True, "scale_embedding"), ("normalize_before", True, "normalize_before"),
    ("add_final_layer_norm", True, "add_final_layer_norm"), ("tie_word_embeddings", False, "tie_word_embeddings"),
    ("activation_function", "swish", "activation_function"), ("decoder_attention_heads", 4, "decoder_attention_heads"),
    ("decoder_ffn_dim", 32, "decoder_ffn_dim"), ("architectures", ["BartForSequenceClassification"], "architectures")])
def test_options_minipt_does_not_implement_are_refused_by_name(tmp_path, key, value, says):
    shutil.copytree(FIXTURES / "bart", tmp_path / "x")
    cfg = json.loads((tmp_path / "x" / "config.json").read_text())
    cfg[key] = value
    (tmp_path / "x" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match=says):
        from_pretrained(tmp_path / "x")
