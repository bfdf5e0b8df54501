"""minipt's BERT family against transformers, with no torch: the fixtures of
``scripts/make_bert_fixtures.py`` (torch 2.13.0, transformers 5.23.0, float64).

Covered for ``BertForPreTraining``: ``[CLS] A [SEP] B [SEP]`` with segments, a padded row
(attention mask), three [MASK]ed positions per row, MLM + NSP loss, the tied decoder with
its own bias, exact GELU. Logits and every parameter's gradient must agree to 1e-12
relative to the largest entry.

The 2-way head's labels run the other way round in transformers (``next_sentence_label`` /
``sentence_order_label`` 0 = IsNext / in order; minipt's 1): the fixture's labels are given
to minipt as 1 - label, and minipt's NSP logits are transformers' with the columns swapped.
"""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from minipt.interop import from_pretrained, save_pretrained, their_named
from minipt.interop.safetensors_io import read_file, write_tensors
from minipt.models.encoder.bert import BertConfig, BertForPreTraining

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TOLERANCE = 1e-12


def rel_error(a, b) -> float:
    return float(np.abs(np.asarray(a) - b).max() / max(np.abs(b).max(), 1e-300))


ARCHS = {"bert": "BertForPreTraining", "roberta": "RobertaForMaskedLM", "albert": "AlbertForPreTraining"}


def run(name: str):
    model = from_pretrained(FIXTURES / name)
    ref, meta = read_file(FIXTURES / f"{name}_reference.safetensors")
    model.zero_grad()
    nsp = ref.get("next_sentence_label")                # transformers' 0 = IsNext is minipt's 1
    out = model.outputs(ref["input_ids"], ref["token_type_ids"], ref["attention_mask"], ref["labels"],
                        None if nsp is None else 1 - nsp)
    model.backward()
    return model, ref, meta, out


@pytest.mark.parametrize("name", list(ARCHS))
def test_logits_and_loss_match_transformers(name):
    model, ref, meta, out = run(name)
    assert meta["transformers"] == "5.23.0" and meta["torch"].startswith("2.13.0")
    assert meta["class"] == ARCHS[name]
    assert model.dtype == np.float64 and out.logits.shape == ref["logits"].shape == (2, 10, 40)
    assert rel_error(out.logits, ref["logits"]) <= TOLERANCE      # padding slots too (RoBERTa's read row pad)
    if name != "roberta":
        assert rel_error(out.nsp_logits, ref["nsp_logits"][:, ::-1]) <= TOLERANCE
    assert abs(float(out.loss) - float(ref["loss"])) <= TOLERANCE * float(ref["loss"])


@pytest.mark.parametrize("name", list(ARCHS))
def test_every_gradient_matches_transformers(name):
    model, ref, _, _ = run(name)
    ours = their_named(model, "grads")
    theirs = {k[len("grad/"):]: v for k, v in ref.items() if k.startswith("grad/")}
    assert sorted(ours) == sorted(theirs)
    scale = max(np.abs(g).max() for g in theirs.values())
    for n, g in theirs.items():
        if n.endswith(("attention.self.key.bias", "attention.key.bias")):
            # q . b_k is the same for every key, so softmax cancels it: the gradient is zero
            # up to rounding (about 1e-17 in both libraries), and its relative error is noise
            assert np.abs(g).max() <= 1e-14 * scale and np.abs(ours[n]).max() <= 1e-14 * scale, n
            continue
        assert np.abs(g).max() > 0, f"{n}: the fixture's gradient is zero, so it checks nothing"
        assert rel_error(ours[n], g) <= TOLERANCE, n


def test_bert_config_maps_onto_minipt():
    model = from_pretrained(FIXTURES / "bert")
    assert model.config == BertConfig(vocab_size=40, max_position=16, n_layer=2, n_head=2, d_model=16, d_ff=24,
                                      dropout=0.0, eps=1e-12, activation="gelu")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh"])
def test_bert_round_trip_is_bitwise(tmp_path, dtype, activation):
    model = BertForPreTraining(BertConfig(vocab_size=30, max_position=12, n_layer=2, n_head=2, d_model=8, d_ff=12,
                                          activation=activation, eps=1e-6),
                               rng=np.random.default_rng(0), dtype=dtype)
    for _, p in model.named_parameters():
        p[...] = np.random.default_rng(1).normal(0.0, 0.3, p.shape)
    save_pretrained(model, tmp_path / "out")
    back = from_pretrained(tmp_path / "out")
    assert back.config == model.config and back.dtype == dtype
    ours, theirs = model.parameters(), back.parameters()
    assert sorted(ours) == sorted(theirs)
    assert all(ours[k].tobytes() == theirs[k].tobytes() for k in ours)


def edited(tmp_path, config=None, tensors=None) -> Path:
    folder = tmp_path / "x"
    shutil.copytree(FIXTURES / "bert", folder)
    if config:
        cfg = json.loads((folder / "config.json").read_text())
        cfg.update(config)
        (folder / "config.json").write_text(json.dumps(cfg))
    if tensors:
        t, _ = read_file(folder / "model.safetensors")
        write_tensors(folder / "model.safetensors", tensors(t))
    return folder


@pytest.mark.parametrize("key, value, says", [
    ("position_embedding_type", "relative_key", "position_embedding_type"), ("is_decoder", True, "is_decoder"),
    ("add_cross_attention", True, "add_cross_attention"), ("hidden_act", "silu", "hidden_act"),
    ("tie_word_embeddings", False, "tie_word_embeddings"), ("attention_probs_dropout_prob", 0.2, "dropout rates"),
    ("embedding_size", 8, "embedding_size"), ("architectures", ["BertForQuestionAnswering"], "architectures")])
def test_bert_options_minipt_does_not_implement_are_refused_by_name(tmp_path, key, value, says):
    with pytest.raises(ValueError, match=says):
        from_pretrained(edited(tmp_path, {key: value}))


@pytest.mark.parametrize("name, head", [("bert", "cls.seq_relationship"), ("albert", "sop_classifier.classifier")])
def test_an_imported_head_scores_isnext_in_minipts_label_1_and_exports_back_in_transformers_order(tmp_path, name,
                                                                                                 head):
    # a transformers head that says "IsNext / in order" (its label 0) for every pair
    folder = tmp_path / name
    shutil.copytree(FIXTURES / name, folder)
    t, _ = read_file(folder / "model.safetensors")
    t[f"{head}.weight"] = np.zeros_like(t[f"{head}.weight"])
    t[f"{head}.bias"] = np.array([4.0, -4.0])
    write_tensors(folder / "model.safetensors", t)
    model = from_pretrained(folder)
    ref, _ = read_file(FIXTURES / f"{name}_reference.safetensors")
    out = model.outputs(ref["input_ids"], ref["token_type_ids"], ref["attention_mask"], ref["labels"],
                        np.array([1, 1]))                # minipt: 1 = IsNext / in order
    assert (out.nsp_logits.argmax(axis=1) == 1).all() and float(out.nsp_loss) < 1e-3
    save_pretrained(model, tmp_path / "again")
    back, _ = read_file(tmp_path / "again" / "model.safetensors")
    assert back[f"{head}.bias"].tolist() == [4.0, -4.0]   # transformers' order again, bitwise
    original, _ = read_file(FIXTURES / name / "model.safetensors")
    save_pretrained(from_pretrained(FIXTURES / name), tmp_path / "fixture")
    again, _ = read_file(tmp_path / "fixture" / "model.safetensors")
    assert sorted(again) == sorted(original) and all(again[k].tobytes() == original[k].tobytes() for k in original)


def test_an_older_bert_file_with_the_tied_copies_and_buffers_loads(tmp_path):
    add = lambda t: {**t, "cls.predictions.decoder.weight": t["bert.embeddings.word_embeddings.weight"].copy(),
                     "cls.predictions.decoder.bias": t["cls.predictions.bias"].copy(),
                     "bert.embeddings.position_ids": np.arange(16)[None]}
    model = from_pretrained(edited(tmp_path, tensors=add))
    assert np.array_equal(model.parameters()["mlm.bias"], read_file(FIXTURES / "bert" / "model.safetensors")[0]
                          ["cls.predictions.bias"])


def test_a_tied_copy_that_differs_is_refused(tmp_path):
    add = lambda t: {**t, "cls.predictions.decoder.bias": t["cls.predictions.bias"] + 1.0}
    with pytest.raises(ValueError, match="cls.predictions.decoder.bias differs from cls.predictions.bias"):
        from_pretrained(edited(tmp_path, tensors=add))


def test_a_bert_file_without_the_heads_loads_and_names_them(tmp_path):
    drop = lambda t: {k: v for k, v in t.items() if not k.startswith("cls.")}
    with pytest.warns(UserWarning, match=r"no MLM head \(cls\.predictions\.\*\), no NSP head "
                                         r"\(cls\.seq_relationship\.\*\) in this folder"):
        model = from_pretrained(edited(tmp_path, tensors=drop))
    fresh = BertForPreTraining(model.config, rng=np.random.default_rng(0), dtype=model.dtype)
    assert np.array_equal(model.parameters()["nsp.weight"], fresh.parameters()["nsp.weight"])   # as initialised
    stored, _ = read_file(FIXTURES / "bert" / "model.safetensors")
    assert np.array_equal(model.parameters()["pooler.dense.weight"], stored["bert.pooler.dense.weight"])


def test_other_family_members_do_not_export_as_bert(tmp_path):
    albert = BertForPreTraining(BertConfig(vocab_size=30, max_position=12, n_layer=1, n_head=2, d_model=8, d_ff=12,
                                           embedding_size=4), rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="embedding_size=4"):
        save_pretrained(albert, tmp_path / "a")
    assert not (tmp_path / "a").exists()


def test_roberta_and_albert_configs_map_onto_minipt():
    from minipt.models.encoder.albert import AlbertConfig
    from minipt.models.encoder.roberta import RobertaConfig
    assert from_pretrained(FIXTURES / "roberta").config == RobertaConfig(
        vocab_size=40, max_position=18, type_vocab_size=1, n_layer=2, n_head=2, d_model=16, d_ff=24, dropout=0.0,
        eps=1e-5, activation="gelu", pad_token_id=1, position_offset=2)
    assert from_pretrained(FIXTURES / "albert").config == AlbertConfig(
        vocab_size=40, max_position=16, n_layer=2, n_head=2, d_model=16, d_ff=24, dropout=0.0, eps=1e-12,
        activation="gelu_tanh", embedding_size=8, share="all")


@pytest.mark.parametrize("kind", ["roberta", "albert-all", "albert-none"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_roberta_and_albert_round_trips_are_bitwise(tmp_path, kind, dtype):
    from minipt.models.encoder import albert, roberta
    sizes = dict(vocab_size=30, max_position=12, n_layer=3, n_head=2, d_model=8, d_ff=12)
    if kind == "roberta":
        model = roberta.build(rng=np.random.default_rng(0), dtype=dtype, **sizes)
    else:
        model = albert.build(rng=np.random.default_rng(0), dtype=dtype, **sizes, embedding_size=4,
                             share="all" if kind == "albert-all" else None)
    for _, p in model.named_parameters():
        p[...] = np.random.default_rng(1).normal(0.0, 0.3, p.shape)
    save_pretrained(model, tmp_path / "out")
    back = from_pretrained(tmp_path / "out")
    assert type(back) is type(model) and back.config == model.config and back.dtype == dtype
    ours, theirs = model.parameters(), back.parameters()
    assert sorted(ours) == sorted(theirs) and all(ours[k].tobytes() == theirs[k].tobytes() for k in ours)
    groups = json.loads((tmp_path / "out" / "config.json").read_text()).get("num_hidden_groups")
    assert groups == {"roberta": None, "albert-all": 1, "albert-none": 3}[kind]


@pytest.mark.parametrize("name, key, value, says", [
    ("roberta", "hidden_act", "gelu_new", "hidden_act"), ("roberta", "pad_token_id", -1, "pad_token_id"),
    ("roberta", "position_embedding_type", "relative_key", "position_embedding_type"),
    ("albert", "num_hidden_groups", 3, "num_hidden_groups"), ("albert", "inner_group_num", 2, "inner_group_num"),
    ("albert", "hidden_act", "silu", "hidden_act"), ("albert", "tie_word_embeddings", False, "tie_word_embeddings")])
def test_roberta_and_albert_options_are_refused_by_name(tmp_path, name, key, value, says):
    folder = tmp_path / name
    shutil.copytree(FIXTURES / name, folder)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, key: value}))
    with pytest.raises(ValueError, match=says):
        from_pretrained(folder)


def test_albert_sharing_of_one_sublayer_does_not_export(tmp_path):
    from minipt.models.encoder import albert
    model = albert.build(rng=np.random.default_rng(0), vocab_size=30, max_position=12, n_layer=2, n_head=2,
                         d_model=8, d_ff=12, embedding_size=4, share="attention")
    with pytest.raises(ValueError, match="share='attention'"):
        save_pretrained(model, tmp_path / "a")
