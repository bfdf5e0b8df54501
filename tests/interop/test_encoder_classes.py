"""Encoder folders as users find them, with no torch: the fixtures of
``scripts/make_encoder_class_fixtures.py`` (torch 2.13.0, transformers 5.23.0, float64).

- ``BertForMaskedLM`` (bert-base-uncased's class), ``BertModel``, ``RobertaModel``,
  ``AlbertForMaskedLM`` (albert-base-v2's), ``AlbertModel`` load into the family's
  pre-training model, ``ElectraForMaskedLM`` (a generator alone) and ``ElectraModel`` into a
  BERT-style MLM with ELECTRA's factorised embedding; what transformers computes with the weights the folder holds (MLM
  logits, or the last hidden states and the pooler's output) agrees to 1e-12, and one
  warning names the heads the folder lacks.
- Left padding: transformers' logits on a batch whose second row is padded on the left,
  for the committed ``bert/``, ``roberta/`` (positions counted over the non-pad ids) and
  ``bart/`` folders, at every position.
"""
import json
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from minipt.interop import from_pretrained
from minipt.interop.safetensors_io import read_file, write_tensors
from minipt.models.encoder.albert import AlbertForPreTraining
from minipt.models.encoder.bert import BertForPreTraining

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CLASSES = FIXTURES / "classes"
TOLERANCE = 1e-12

# folder -> (class, the heads the note must name, the heads it must not name, loaded as)
CASES = {
    "bert_mlm": ("BertForMaskedLM", ["pooler", "NSP head"], ["MLM head"], BertForPreTraining),
    "bert_base": ("BertModel", ["MLM head", "NSP head"], ["pooler"], BertForPreTraining),
    "roberta_base": ("RobertaModel", ["MLM head", "roberta.pooler.* not loaded"], [], BertForPreTraining),
    "albert_mlm": ("AlbertForMaskedLM", ["pooler", "SOP head"], ["MLM head"], AlbertForPreTraining),
    "albert_base": ("AlbertModel", ["MLM head", "SOP head"], ["pooler"], AlbertForPreTraining),
    "electra_mlm": ("ElectraForMaskedLM", None, [], BertForPreTraining),      # None: every head is there
    "electra_base": ("ElectraModel", ["MLM head (generator_*)"], [], BertForPreTraining),
}


def rel_error(a, b) -> float:
    return float(np.abs(np.asarray(a) - b).max() / max(np.abs(b).max(), 1e-300))


def load(folder):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = from_pretrained(folder)
    notes = [str(w.message) for w in caught]
    return model, notes


@pytest.mark.parametrize("name", list(CASES))
def test_a_class_without_every_head_loads_and_computes_what_transformers_does(name):
    arch, named, unnamed, cls = CASES[name]
    assert json.loads((CLASSES / name / "config.json").read_text())["architectures"] == [arch]
    model, notes = load(CLASSES / name)
    assert type(model) is cls and model.dtype == np.float64
    if named is None:
        assert notes == []
    else:
        assert len(notes) == 1, notes                        # one note, naming what is absent
        assert all(h in notes[0] for h in named) and not any(f"no {h}" in notes[0] for h in unnamed), notes[0]
    ref, meta = read_file(FIXTURES / "classes_reference.safetensors")
    assert meta["transformers"] == "5.23.0" and arch in meta["class"]
    pre = "roberta/" if name.startswith("roberta") else ""
    ids, seg, mask = ref[pre + "input_ids"], ref[pre + "token_type_ids"], ref[pre + "attention_mask"]
    if f"{name}/logits" in ref:
        _, logits = model(ids, seg, mask)
        assert logits.shape == ref[f"{name}/logits"].shape == (2, 10, 40)
        assert rel_error(logits, ref[f"{name}/logits"]) <= TOLERANCE
    else:
        h = model.encoder(ids, seg, mask)
        assert rel_error(h, ref[f"{name}/hidden"]) <= TOLERANCE
        if model.pooler is not None:
            assert rel_error(model.pooler(h), ref[f"{name}/pooled"]) <= TOLERANCE


def test_an_electra_mlm_folder_keeps_its_factorised_embedding():
    model, _ = load(CLASSES / "electra_mlm")
    assert model.config.embedding_size == 8 and model.config.d_model == 16 and not model.config.nsp
    assert load(CLASSES / "electra_base")[0].config.embedding_size is None             # E = H: no projection
    with pytest.raises(ValueError, match="holds one half of ELECTRA"):                 # a discriminator alone
        from_pretrained(FIXTURES / "electra" / "discriminator")


def test_a_file_as_bert_base_uncased_stores_it_loads(tmp_path):
    """bert-base-uncased: architectures BertForMaskedLM, every BertForPreTraining tensor, the
    LayerNorm parameters under TensorFlow's names (gamma, beta), the tied decoder copy, a buffer."""
    shutil.copytree(FIXTURES / "bert", tmp_path / "x")
    t, _ = read_file(tmp_path / "x" / "model.safetensors")
    old = {n.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): a
           for n, a in t.items()}
    assert sum(n.endswith("LayerNorm.gamma") for n in old) == 6
    old["cls.predictions.decoder.weight"] = t["bert.embeddings.word_embeddings.weight"]
    old["bert.embeddings.position_ids"] = np.arange(16)[None]
    write_tensors(tmp_path / "x" / "model.safetensors", old)
    cfg = json.loads((tmp_path / "x" / "config.json").read_text())
    (tmp_path / "x" / "config.json").write_text(json.dumps({**cfg, "architectures": ["BertForMaskedLM"]}))
    model, notes = load(tmp_path / "x")
    assert notes == []
    want = from_pretrained(FIXTURES / "bert").parameters()
    assert all(np.array_equal(a, want[k]) for k, a in model.parameters().items())
    old["bert.embeddings.LayerNorm.weight"] = t["bert.embeddings.LayerNorm.weight"]        # both names: refused
    write_tensors(tmp_path / "x" / "model.safetensors", old)
    twice = r"bert\.embeddings\.LayerNorm\.weight is stored twice, as bert\.embeddings\.LayerNorm\.gamma and "
    with pytest.raises(ValueError, match=twice + r"bert\.embeddings\.LayerNorm\.weight"):
        from_pretrained(tmp_path / "x")


def test_a_full_folder_loads_without_a_note():
    _, notes = load(FIXTURES / "bert")
    assert notes == []


@pytest.mark.parametrize("name, drop, says", [
    ("bert_mlm", "cls.predictions.transform.LayerNorm.bias", "cls.predictions.transform.LayerNorm.bias"),  # a part
    ("bert_base", "encoder.layer.1.output.dense.weight", "bert.encoder.layer.1.output.dense.weight")])     # encoder
def test_a_head_stored_in_part_or_a_missing_encoder_tensor_is_refused_by_name(tmp_path, name, drop, says):
    shutil.copytree(CLASSES / name, tmp_path / "x")
    t, _ = read_file(tmp_path / "x" / "model.safetensors")
    del t[drop]
    write_tensors(tmp_path / "x" / "model.safetensors", t)
    with pytest.raises(ValueError, match=rf"tensor {re.escape(says)} .* is missing"):
        from_pretrained(tmp_path / "x")


@pytest.mark.parametrize("name, arch", [("bert_mlm", "BertForQuestionAnswering"),
                                        ("roberta_base", "RobertaForCausalLM"),
                                        ("albert_mlm", "AlbertForTokenClassification")])
def test_an_unknown_class_is_refused_naming_its_model_type(tmp_path, name, arch):
    shutil.copytree(CLASSES / name, tmp_path / "x")
    cfg = json.loads((tmp_path / "x" / "config.json").read_text())
    (tmp_path / "x" / "config.json").write_text(json.dumps({**cfg, "architectures": [arch]}))
    with pytest.raises(ValueError, match=rf"architectures \['{arch}'\] is not a class minipt reads for model_type "
                                         rf"'{cfg['model_type']}' \(it reads .*MaskedLM") as e:
        from_pretrained(tmp_path / "x")
    assert "causal" not in str(e.value)


@pytest.mark.parametrize("name", ["bert", "roberta", "bart"])
def test_a_left_padded_batch_gives_transformers_logits_at_every_position(name):
    ref, meta = read_file(FIXTURES / "left_padded_reference.safetensors")
    assert meta["transformers"] == "5.23.0"
    model = from_pretrained(FIXTURES / name)
    ids, mask = ref[f"{name}/input_ids"], ref[f"{name}/attention_mask"]
    assert mask[1, 0] == 0 and mask[1, -1] == 1                          # padded on the left
    if name == "bart":
        np.testing.assert_array_equal(model.decoder_input(ref["bart/labels"]), ref["bart/decoder_input_ids"])
        np.testing.assert_array_equal(model.source_mask(ids)[:, 0], mask == 1)
        _, logits = model(ids, ref["bart/decoder_input_ids"])
    else:
        _, logits = model(ids, np.zeros_like(ids), mask)
    assert logits.shape == ref[f"{name}/logits"].shape
    assert rel_error(logits, ref[f"{name}/logits"]) <= TOLERANCE
