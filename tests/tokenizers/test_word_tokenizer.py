import pytest

from minipt.tokenizers import WordTokenizer
from minipt.tokenizers.word import split_words


def test_split_words_on_whitespace_and_punctuation():
    assert split_words("Hi, you!  It's  42\tnow.") == ["Hi", ",", "you", "!", "It", "'", "s", "42", "now", "."]
    assert split_words("Héllo 世界", lowercase=True) == ["héllo", "世界"]


def test_vocab_order_min_count_and_unk():
    tok = WordTokenizer(min_count=2).fit("b a b c a b . d")
    # <unk>, then by count (b 3, a 2); c, d and '.' occur once
    assert [tok.id_to_token(i) for i in range(tok.vocab_size)] == ["<unk>", "b", "a"]
    assert tok.encode("a c b") == [2, 0, 1]
    assert tok.decode(tok.encode("a, b")) == "a <unk> b"


def test_ties_broken_alphabetically_and_max_size():
    tok = WordTokenizer(max_size=3).fit("z y x z y x w")
    assert [tok.id_to_token(i) for i in range(tok.vocab_size)] == ["<unk>", "x", "y"]


def test_lowercase_and_round_trip_of_known_words():
    tok = WordTokenizer(lowercase=True, specials=["<s>"]).fit("The cat sat. the CAT ran!")
    assert tok.encode("THE cat") == tok.encode("the Cat")
    text = "<s>the cat sat!"
    assert tok.decode(tok.encode(text)) == "<s> the cat sat !"


def test_bad_hyper_parameters():
    with pytest.raises(ValueError, match="min_count must be an integer >= 1, got 0"):
        WordTokenizer(min_count=0)
    with pytest.raises(ValueError, match="max_size: expected more than the 1 special"):
        WordTokenizer(max_size=1).fit("a b")
    with pytest.raises(ValueError, match="min_count=5"):
        WordTokenizer(min_count=5).fit("a b a")
    with pytest.raises(ValueError, match="no word"):
        WordTokenizer().fit("   \n ")
