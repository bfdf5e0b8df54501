"""Byte-level BPE: any Unicode string round-trips exactly; GPT-2's byte alphabet."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minipt.tokenizers import ByteBPETokenizer, bytes_to_unicode, pre_split

TRAIN = ("The quick brown fox jumps over the lazy dog. It's 2024; the dogs don't mind!\n"
         "敏捷的棕色狐狸跳过了懒狗。🙂🙂 naïve café — “quotes” and\ttabs.\n") * 30
TOK = ByteBPETokenizer().fit(TRAIN, num_merges=100)

EDGE = ["", " ", "a", "\n", "\r\n", "\t\t \n", "   leading", "trailing   ", "\x00\x01\x02\x7f\x9f",
        "中文字符", "敏捷的棕色狐狸", "🙂", "👨‍👩‍👧‍👦", "👍🏽", "e\u0301", "\ufeffBOM", "\u200b\u2028\u2029",
        "Ünïcödé ÇÀ", "x<|endoftext|>y", "<|endoftext|><|endoftext|>", "<|endof", "don't it's I'll",
        "snake_case_name", "3.14159 1,000,000", "Ⅻ ² ½", "\U0010ffff\U000e0001", "ｆｕｌｌ　ｗｉｄｔｈ"]


def test_bytes_to_unicode_table():
    table = bytes_to_unicode()
    assert sorted(table) == list(range(256))
    assert len(set(table.values())) == 256
    assert all(c.isprintable() and not c.isspace() for c in table.values())
    assert table[ord("!")] == "!" and table[ord("A")] == "A" and table[0xE9] == "é"
    assert table[ord(" ")] == "\u0120" and table[0] == "\u0100" and table[ord("\n")] == "\u010a"


def test_base_ids_follow_gpt2_order():
    tok = ByteBPETokenizer()                    # untrained: 256 bytes + <|endoftext|>
    assert tok.vocab_size == 257
    assert tok.token_to_id("!") == 0 and tok.token_to_id("\u0120") == 220
    assert tok.special_tokens == {"<|endoftext|>": 256}
    assert tok.encode("hé") == [tok.token_to_id("h"), tok.token_to_id("Ã"), tok.token_to_id("©")]


@pytest.mark.parametrize("text", EDGE)
@pytest.mark.parametrize("trained", [True, False])
def test_round_trip_edge_cases(text, trained):
    tok = TOK if trained else ByteBPETokenizer()
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert all(0 <= i < tok.vocab_size for i in ids)
    if not trained:                             # untrained: one id per UTF-8 byte (+ specials)
        assert len(ids) == len(text.replace("<|endoftext|>", "").encode()) + \
            text.count("<|endoftext|>")


@settings(max_examples=200, deadline=None)      # no deadline: a loaded CI machine must not flake
@given(st.text() | st.text(st.characters(min_codepoint=0x2E80, max_codepoint=0x1FAFF,
                                         exclude_categories=["Cs"])))  # CJK, emoji, ...
def test_any_unicode_string_round_trips(text):
    assert "".join(pre_split(text)) == text
    assert TOK.decode(TOK.encode(text)) == text
    assert TOK.decode(TOK.encode(text, allow_special=False)) == text


def test_pre_split_like_gpt2():
    assert pre_split("Hello world's 123 foo_bar!!   x") == \
        ["Hello", " world", "'s", " 123", " foo", "_", "bar", "!!", "  ", " x"]
    assert pre_split("中文 abc") == ["中文", " abc"]


def test_training_compresses_and_learns_frequent_words():
    assert len(TOK.merges) == 100
    assert TOK.vocab_size == 256 + 100 + 1
    assert len(TOK.encode(TRAIN)) < len(TRAIN.encode()) / 3
    assert TOK.encode(" the") == [TOK.token_to_id("\u0120the")]


def test_special_token_never_learned_even_when_frequent():
    tok = ByteBPETokenizer().fit("<|endoftext|>ab " * 50, num_merges=30)
    eot = tok.special_tokens["<|endoftext|>"]
    assert all("endoftext" not in a + b for a, b in tok.merges)
    assert tok.encode("<|endoftext|>ab") == [eot, tok.token_to_id("ab")]


def test_gpt2_vocab_and_merges_round_trip():
    vocab, merges = TOK.to_vocab_merges()
    assert len(vocab) == 256 + len(merges) + 1 and vocab["<|endoftext|>"] == len(vocab) - 1
    for a, b in merges:
        assert a in vocab and b in vocab and vocab[a + b] >= 256
    alphabet = set(bytes_to_unicode().values())
    assert all(set(t) <= alphabet for t in vocab if t != "<|endoftext|>")
    back = ByteBPETokenizer.from_vocab_merges(vocab, merges)
    for text in EDGE + [TRAIN[:500]]:
        assert back.encode(text) == TOK.encode(text)


def test_from_vocab_merges_checks_input():
    vocab, merges = TOK.to_vocab_merges()
    with pytest.raises(ValueError, match="ids 0..V-1"):
        ByteBPETokenizer.from_vocab_merges({**vocab, "zzz": 10_000}, merges)
    with pytest.raises(ValueError, match="must all be in the vocab"):
        ByteBPETokenizer.from_vocab_merges(vocab, merges + [("qq", "zz")])
    small = {c: i for i, c in enumerate(list(bytes_to_unicode().values())[:200])}
    with pytest.raises(ValueError, match="expected all 256 byte tokens, 56 missing"):
        ByteBPETokenizer.from_vocab_merges(small, [], specials=[])


def test_lone_surrogate_rejected_with_position():
    with pytest.raises(ValueError, match="position 3 is a lone surrogate"):
        TOK.encode("abc\ud800")


def test_decoding_a_cut_character_gives_replacement_char():
    ids = ByteBPETokenizer().encode("中")             # three bytes, three ids
    assert ByteBPETokenizer().decode(ids[:2]) == "\ufffd"
    assert TOK.token_bytes(TOK.token_to_id("\u0120the")) == b" the"
