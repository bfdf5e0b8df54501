"""WordPiece: BERT's pre-tokenisation, greedy longest-match-first, the score trainer."""
import pytest

from minipt.tokenizers import WordPieceTokenizer, basic_tokenize
from minipt.tokenizers.wordpiece import greedy_longest_match

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "aff", "##a",
         "run", "##n", "##ing", "##ning", "the", ",", "!"]


@pytest.fixture(scope="module")
def bert():
    return WordPieceTokenizer.from_vocab(VOCAB)


def test_hand_worked_examples(bert):
    assert bert.tokenize("unaffable") == ["un", "##aff", "##able"]
    # longest match first: ##ning beats ##n + ##ing
    assert bert.tokenize("running") == ["run", "##ning"]
    assert bert.tokenize("The UNAFFABLE, running!") == ["the", "un", "##aff", "##able", ",", "run", "##ning", "!"]
    assert bert.encode("unaffable") == [5, 6, 7]
    assert bert.token_to_id("[PAD]") == 0


def test_unk_for_uncoverable_and_too_long_words(bert):
    # 'unaffablex': 'un ##aff ##able' then no piece covers 'x' -> the whole word is [UNK]
    assert bert.tokenize("unaffablex the") == ["[UNK]", "the"]
    assert bert.tokenize("xun") == ["[UNK]"]
    short = WordPieceTokenizer.from_vocab(VOCAB, max_input_chars_per_word=5)
    assert short.tokenize("run unaffable") == ["run", "[UNK]"]
    assert greedy_longest_match("aa", {"a"}) is None
    assert greedy_longest_match("aa", {"a", "##a"}) == ["a", "##a"]


def test_specials_in_text_are_single_ids(bert):
    assert bert.tokenize("[CLS] unaffable [SEP]") == ["[CLS]", "un", "##aff", "##able", "[SEP]"]
    assert bert.tokenize("[MASK]able") == ["[MASK]", "[UNK]"]          # 'able' needs a word start
    assert bert.decode(bert.encode("[CLS] the unaffable run [SEP]")) == "[CLS] the unaffable run [SEP]"


def test_basic_tokenize():
    assert basic_tokenize("Héllo, WORLD!  Ça va?") == ["hello", ",", "world", "!", "ca", "va", "?"]
    assert basic_tokenize("Héllo, WORLD!", lowercase=False) == ["Héllo", ",", "WORLD", "!"]
    assert basic_tokenize("你好ab 世界") == ["你", "好", "ab", "世", "界"]
    assert basic_tokenize("a\x00b\u200bc\ufffd d\te$f") == ["abc", "d", "e", "$", "f"]
    assert basic_tokenize(" \n\t ") == []


def test_trainer_score_merges_worked_by_hand():
    # words: hug 10, pug 5, pun 12, bun 4, hugs 5 -> h p b ##u ##g ##n ##s
    # counts: h 15, p 17, b 4, ##u 36, ##g 20, ##n 16, ##s 5
    # merge 1: ##g ##s: 5 / (20 * 5) = 1/20, every other pair scores 1/36
    # merge 2: all pairs score 1/36 (e.g. p ##u 17/(17*36)); tie -> higher pair count: p ##u (17)
    # merge 3: h ##u, b ##u and ##u ##gs score 1/19 (##u is now 19); tie -> h ##u (15)
    text = "hug " * 10 + "pug " * 5 + "pun " * 12 + "bun " * 4 + "hugs " * 5
    tok = WordPieceTokenizer().fit(text, vocab_size=5 + 7 + 3)
    vocab = [tok.id_to_token(i) for i in range(tok.vocab_size)]
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert sorted(vocab[5:12]) == ["##g", "##n", "##s", "##u", "b", "h", "p"]
    assert vocab[12:] == ["##gs", "pu", "hu"]
    assert tok.tokenize("hugs pun bug") == ["hu", "##gs", "pu", "##n", "b", "##u", "##g"]


def test_trained_tokenizer_covers_its_training_words():
    text = "The unaffable runner was running, unable to stop; affable people ran. " * 20
    tok = WordPieceTokenizer().fit(text, vocab_size=60)
    assert tok.vocab_size <= 60
    ids = tok.encode(text)
    assert tok.token_to_id("[UNK]") not in ids
    assert tok.decode(tok.encode("The unaffable runner.")) == "the unaffable runner ."


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"vocab_size: expected at least 12 \(5 specials \+ 7 characters\), got 10"):
        WordPieceTokenizer().fit("hug pug pun bun hugs", vocab_size=10)
    with pytest.raises(ValueError, match="vocab_size must be an integer >= 1"):
        WordPieceTokenizer().fit("hug", vocab_size=0)
    with pytest.raises(ValueError, match="max_input_chars_per_word"):
        WordPieceTokenizer(max_input_chars_per_word=0)
    with pytest.raises(ValueError, match="'un' twice"):
        WordPieceTokenizer.from_vocab(["un", "un"])
    with pytest.raises(ValueError, match="no word after pre-tokenisation"):
        WordPieceTokenizer().fit("\x00\x01 ", vocab_size=10)
