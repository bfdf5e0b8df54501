"""minipt's ELECTRA against transformers' ``ElectraForMaskedLM`` (generator) and
``ElectraForPreTraining`` (discriminator), with no torch: the pair folder and references of
``scripts/make_bert_fixtures.py electra`` (torch 2.13.0, transformers 5.23.0, float64).

minipt's ``Electra`` runs both networks with one loss L = L_MLM + 50 L_Disc and one set of
embeddings; transformers runs them apart. With the fixture's replacements fed in place of
minipt's sampling, minipt's gradients must be: generator parameters = the generator's
gradient, discriminator parameters = 50 x the discriminator's, shared embeddings = the sum
of both. Everything agrees to 1e-12 relative to the largest entry.
"""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from minipt.interop import from_pretrained, save_pretrained, their_named
from minipt.interop.safetensors_io import read_file, write_tensors
from minipt.models.encoder.electra import ElectraConfig

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TOLERANCE = 1e-12


def rel_error(a, b) -> float:
    return float(np.abs(np.asarray(a) - b).max() / max(np.abs(b).max(), 1e-300))


def run():
    model = from_pretrained(FIXTURES / "electra")
    ref, meta = read_file(FIXTURES / "electra_reference.safetensors")
    model.sample = lambda logits, masked: np.where(masked, ref["samples"], 0)    # transformers' replacements
    model.zero_grad()
    out = model.outputs(ref["input_ids"], ref["token_type_ids"], ref["attention_mask"], ref["labels"])
    model.backward()
    return model, ref, meta, out


def test_generator_and_discriminator_outputs_match_transformers():
    model, ref, meta, out = run()
    assert meta["transformers"] == "5.23.0" and meta["class"] == "ElectraForPreTraining + ElectraForMaskedLM"
    assert model.dtype == np.float64 and out.generator_logits.shape == (2, 10, 40)
    np.testing.assert_array_equal(out.corrupted, ref["corrupted"])
    real = ref["attention_mask"].astype(bool)
    np.testing.assert_array_equal(out.replaced[real], ref["replaced"][real])
    assert rel_error(out.generator_logits, ref["generator/logits"]) <= TOLERANCE
    assert rel_error(out.logits, ref["discriminator/logits"]) <= TOLERANCE
    for ours, theirs in ((out.mlm_loss, "generator/loss"), (out.disc_loss, "discriminator/loss")):
        assert abs(float(ours) - float(ref[theirs])) <= TOLERANCE * float(ref[theirs])
    assert abs(float(out.loss) - float(ref["generator/loss"]) - 50 * float(ref["discriminator/loss"])) <= 1e-12 * 50


def test_every_gradient_is_the_generators_plus_50_times_the_discriminators():
    model, ref, _, _ = run()
    ours = their_named(model, "grads")                    # "discriminator/<name>", "generator/<name>"
    theirs = {k[:k.index("/")] + "/" + k[k.index("/grad/") + 6:]: v for k, v in ref.items() if "/grad/" in k}
    theirs = {k: v for k, v in theirs.items() if not k.endswith("generator_lm_head.weight")}   # tied: embedding's
    assert sorted(ours) == sorted(theirs)
    scale = max(np.abs(g).max() for g in theirs.values())
    for name, g in theirs.items():
        part, tensor = name.split("/", 1)
        if tensor.startswith("electra.embeddings."):     # shared: both losses reach them
            want = ref[f"generator/grad/{tensor}"] + 50 * ref[f"discriminator/grad/{tensor}"]
        else:
            want = g * (50 if part == "discriminator" else 1)
        if tensor.endswith("attention.self.key.bias"):   # softmax cancels a key bias: zero up to rounding
            assert np.abs(want).max() <= 1e-13 * scale and np.abs(ours[name]).max() <= 1e-13 * scale, name
            continue
        assert np.abs(want).max() > 0, f"{name}: the fixture's gradient is zero, so it checks nothing"
        assert rel_error(ours[name], want) <= TOLERANCE, name


def test_config_maps_onto_minipt():
    assert from_pretrained(FIXTURES / "electra").config == ElectraConfig(
        vocab_size=40, max_position=16, n_layer=2, n_head=2, d_model=16, d_ff=24, embedding_size=8,
        generator_d_model=12, generator_n_head=2, generator_d_ff=20, dropout=0.0, eps=1e-12, activation="gelu")


def test_the_pair_transformers_wrote_survives_minipt_bitwise(tmp_path):
    save_pretrained(from_pretrained(FIXTURES / "electra"), tmp_path / "again")
    for part, arch in (("discriminator", "ElectraForPreTraining"), ("generator", "ElectraForMaskedLM")):
        original, _ = read_file(FIXTURES / "electra" / part / "model.safetensors")
        again, _ = read_file(tmp_path / "again" / part / "model.safetensors")
        assert sorted(original) == sorted(again)
        assert all(original[n].tobytes() == again[n].tobytes() for n in original), part
        assert json.loads((tmp_path / "again" / part / "config.json").read_text())["architectures"] == [arch]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("E", [None, 6])
def test_round_trip_is_bitwise(tmp_path, dtype, E):
    from minipt.models.encoder import electra
    model = electra.build(rng=np.random.default_rng(0), dtype=dtype, vocab_size=30, max_position=12, n_layer=2,
                          n_head=2, d_model=8, d_ff=12, embedding_size=E, generator_d_model=4, generator_n_head=1,
                          generator_d_ff=8, generator_n_layer=1)
    for _, p in model.named_parameters():
        p[...] = np.random.default_rng(1).normal(0.0, 0.3, p.shape)
    save_pretrained(model, tmp_path / "out")
    back = from_pretrained(tmp_path / "out")
    assert back.config == model.config and back.dtype == dtype
    ours, theirs = model.parameters(), back.parameters()
    assert sorted(ours) == sorted(theirs) and all(ours[k].tobytes() == theirs[k].tobytes() for k in ours)


def pair(tmp_path) -> Path:
    shutil.copytree(FIXTURES / "electra", tmp_path / "pair")
    return tmp_path / "pair"


def test_bad_pairs_are_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="holds one half of ELECTRA"):
        from_pretrained(FIXTURES / "electra" / "discriminator")
    folder = pair(tmp_path / "a")
    t, _ = read_file(folder / "generator" / "model.safetensors")
    t["electra.embeddings.LayerNorm.bias"] = t["electra.embeddings.LayerNorm.bias"] + 1.0
    write_tensors(folder / "generator" / "model.safetensors", t)
    with pytest.raises(ValueError, match="electra.embeddings.LayerNorm.bias differs between discriminator/ and "
                                         "generator/"):
        from_pretrained(folder)
    for key, value, says in (("embedding_size", 4, "embedding_size is 8 in discriminator/ but 4"),
                             ("hidden_act", "gelu_new", "hidden_act"),
                             ("position_embedding_type", "relative_key", "position_embedding_type")):
        folder = pair(tmp_path / key)
        cfg = json.loads((folder / "generator" / "config.json").read_text())
        (folder / "generator" / "config.json").write_text(json.dumps({**cfg, key: value}))
        with pytest.raises(ValueError, match=says):
            from_pretrained(folder)
