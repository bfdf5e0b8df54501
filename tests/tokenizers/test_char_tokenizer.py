import pytest

from minipt.tokenizers import CharTokenizer

EDGE = ["a", " ", "\n\t\r", "héllo wörld", "中文字符测试", "🙂👍🏽👨‍👩‍👧", "\x00\x01\x7f\x1b[0m",
        "e\u0301 vs \u00e9", "  leading and trailing  ", "<s>inside</s>"]


@pytest.mark.parametrize("text", EDGE)
def test_round_trip_on_its_own_text(text):
    tok = CharTokenizer(specials=["<s>", "</s>"]).fit(text)
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    # one id per character, and one per special token (3 and 4 characters long)
    assert len(ids) == len(text) - 2 * text.count("<s>") - 3 * text.count("</s>")


def test_vocab_is_specials_then_sorted_characters():
    tok = CharTokenizer(specials=["<pad>"]).fit("banana!")
    assert [tok.id_to_token(i) for i in range(tok.vocab_size)] == ["<pad>", "!", "a", "b", "n"]
    assert tok.encode("nab") == [4, 2, 3]


def test_unknown_character_error_names_char_and_position():
    tok = CharTokenizer(specials=["<s>"]).fit("abc")
    with pytest.raises(ValueError, match=r"character 'z' \(U\+007A\) at position 6"):
        tok.encode("ab<s>az")
    with pytest.raises(ValueError, match=r"'🙂' \(U\+1F642\) at position 0"):
        tok.encode("🙂")


def test_optional_unk():
    tok = CharTokenizer(unk_token="<unk>").fit("abc")
    unk = tok.token_to_id("<unk>")
    assert tok.encode("azb") == [tok.token_to_id("a"), unk, tok.token_to_id("b")]
    assert tok.decode(tok.encode("azb")) == "a<unk>b"
    assert tok.encode("<unk>") == [unk]


def test_special_characters_are_not_learned():
    tok = CharTokenizer(specials=["<s>"]).fit("<s>ab<s>")
    assert tok.vocab_size == 3          # <s>, a, b: '<', 's', '>' never seen outside the special
    with pytest.raises(ValueError, match="'<'"):
        tok.encode("<s>", allow_special=False)
