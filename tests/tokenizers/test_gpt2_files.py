"""GPT-2's vocab.json + merges.txt: minipt writes them, reads them, and reads what the
``tokenizers`` library trained and transformers saved (the committed fixture)."""
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minipt.tokenizers import ByteBPETokenizer, CharTokenizer
from minipt.tokenizers.gpt2_files import (
    check_exportable,
    load_gpt2_files,
    read_merges,
    save_gpt2_files,
)

FIXTURES = Path(__file__).resolve().parent.parent / "interop" / "fixtures"
CORPUS = ("the cat sat on the mat; the dog sat on the log. 你好，世界！你好 世界 "
          "it's here, we've got 42 cats 🙂🙂 — naïve café\n\n  spaced  out\t") * 3


@pytest.fixture(scope="module")
def trained():
    return ByteBPETokenizer(specials=["<|endoftext|>", "<|pad|>"]).fit(CORPUS, 60)


@pytest.fixture(scope="module")
def reloaded(trained, tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpt2files")
    save_gpt2_files(trained, folder)
    return load_gpt2_files(folder), folder


def test_files_have_gpt2s_format(trained, reloaded):
    _, folder = reloaded
    lines = (folder / "merges.txt").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "#version: 0.2" and len(lines) == 1 + len(trained.merges)
    assert all(len(line.split(" ")) == 2 for line in lines[1:])
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    assert vocab["Ġ"] == 220 and vocab["!"] == 0                      # GPT-2's byte ids
    assert vocab["<|endoftext|>"] == trained.vocab_size - 2
    config = json.loads((folder / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "GPT2Tokenizer" and config["eos_token"] == "<|endoftext|>"
    assert config["additional_special_tokens"] == ["<|pad|>"]


def test_round_trip_keeps_every_table(trained, reloaded):
    tok, _ = reloaded
    assert tok.to_vocab_merges() == trained.to_vocab_merges()
    assert tok.special_tokens == trained.special_tokens


@pytest.mark.parametrize("text", ["你好，世界！", "the cat<|endoftext|>the dog<|pad|>", "🙂 naïve\r\n\t x²", "", " "])
def test_round_trip_encodes_alike(trained, reloaded, text):
    tok, _ = reloaded
    assert tok.encode(text) == trained.encode(text)
    assert tok.decode(tok.encode(text)) == text


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40))
def test_round_trip_on_any_unicode(trained, reloaded, text):
    tok, _ = reloaded
    assert tok.encode(text) == trained.encode(text)
    assert tok.decode(tok.encode(text)) == text


def test_reads_hand_written_gpt2_files(tmp_path):
    """A GPT-2-format pair written by hand: 256 bytes, two merges, <|endoftext|> last."""
    base = ByteBPETokenizer(specials=[])
    vocab, _ = base.to_vocab_merges()
    vocab.update({"Ġt": 256, "Ġth": 257, "<|endoftext|>": 258})
    (tmp_path / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (tmp_path / "merges.txt").write_text("#version: 0.2\nĠ t\nĠt h\n", encoding="utf-8")
    tok = load_gpt2_files(tmp_path)
    assert tok.special_tokens == {"<|endoftext|>": 258}                 # not a byte, not a merge: special
    assert tok.encode(" thin<|endoftext|>") == [257, vocab["i"], vocab["n"], 258]


@pytest.mark.parametrize("which", ["vocab+merges", "tokenizer.json"])
def test_matches_the_tokenizers_library(tmp_path, which):
    """The fixture: BPE trained by HF tokenizers, saved by transformers, ids computed by it."""
    folder = Path(shutil.copytree(FIXTURES / "tokenizer", tmp_path / "tok"))
    if which == "tokenizer.json":
        (folder / "vocab.json").unlink()
        (folder / "merges.txt").unlink()
    ref = json.loads((FIXTURES / "tokenizer_reference.json").read_text(encoding="utf-8"))
    tok = load_gpt2_files(folder)
    assert tok.special_tokens == {"<|endoftext|>": 0}
    for text, ids in zip(ref["texts"], ref["ids"]):
        assert tok.encode(text) == ids, text
        assert tok.decode(ids) == text


def test_bad_files(tmp_path, trained):
    with pytest.raises(FileNotFoundError, match="no vocab.json"):
        load_gpt2_files(tmp_path)
    save_gpt2_files(trained, tmp_path)
    (tmp_path / "merges.txt").write_text("#version: 0.2\nh e x\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2: expected two tokens"):
        read_merges(tmp_path / "merges.txt")
    (tmp_path / "merges.txt").write_text("#version: 0.2\nq zz\n", encoding="utf-8")
    with pytest.raises(ValueError, match="merge 'q' 'zz'"):
        load_gpt2_files(tmp_path)
    (tmp_path / "vocab.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ValueError, match="expected a JSON object"):
        load_gpt2_files(tmp_path)
    other = tmp_path / "wordpiece"
    other.mkdir()
    (other / "tokenizer.json").write_text(json.dumps({"model": {"type": "WordPiece"}}))
    with pytest.raises(ValueError, match="model type 'WordPiece'"):
        load_gpt2_files(other)


def test_only_byte_level_bpe_has_gpt2_files():
    with pytest.raises(ValueError, match="only a byte-level BPE tokenizer has GPT-2 files; got a CharTokenizer"):
        check_exportable(CharTokenizer().fit("abc"))


def test_transformers_reads_what_minipt_wrote(trained, reloaded):
    """Optional: transformers' GPT2Tokenizer on minipt's files gives minipt's ids."""
    pytest.importorskip("transformers")
    from transformers import GPT2Tokenizer

    _, folder = reloaded
    hf = GPT2Tokenizer.from_pretrained(str(folder))
    assert len(hf) == trained.vocab_size and hf.eos_token_id == trained.special_tokens["<|endoftext|>"]
    for text in ["你好，世界！ the cat sat", "x<|endoftext|>y<|pad|>z", "  spaced\n\nout 🙂", "it's 42"]:
        assert hf(text)["input_ids"] == trained.encode(text), text
        assert hf.decode(trained.encode(text)) == text
