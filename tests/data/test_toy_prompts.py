"""The toy web and the in-context task family: formats, answers, held-out queries, seeds."""
import numpy as np
import pytest

from minipt.data import toy_prompts as P
from minipt.data.toy_grammar import STATES
from minipt.data.toy_text_tasks import translate

VERBS = {w for s in STATES if s.startswith("verb") for w in STATES[s]}
KIND_OF = {w: P.KINDS[s] for s in P.KINDS for w in STATES[s]}


def tasks_from_words(words: list[str]) -> dict[str, str]:
    """The four tasks recomputed from the words alone (verbs and subjects are closed sets)."""
    v = next(i for i, w in enumerate(words) if w in VERBS)
    return {"subject": words[v - 1], "verb": words[v], "last": words[-2], "kind": KIND_OF[words[v - 1]]}


def test_the_tokenizer_spells_every_document_without_unknown_words():
    tok = P.prompt_tokenizer()
    unk = tok.token_to_id("<unk>")
    text = P.join_documents(P.web_documents(60, seed=0, mix=(1, 1, 1)) + P.icl_documents(60, seed=0))
    ids = tok.encode(text)
    assert unk not in ids and tok.encode(P.NEWLINE) == [tok.token_to_id(P.NEWLINE)]
    assert tok.decode(tok.encode("the cat => animal")) == "the cat => animal"


def test_sentences_are_seeded_filtered_and_counted():
    a = P.sentences(50, np.random.default_rng(1))
    assert a == P.sentences(50, np.random.default_rng(1)) and len(a) == 50
    assert all(w[-1] == "." and "." not in w[:-1] and len(w) == len(s) for w, s in a)
    short = P.sentences(50, np.random.default_rng(1), exclude=P.exclusion(a[:10]), max_words=6)
    assert all(len(w) <= 6 for w, _ in short) and not P.exclusion(short) & P.exclusion(a[:10])
    with pytest.raises(ValueError, match="n must be"):
        P.sentences(-1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="max_words"):
        P.sentences(1, np.random.default_rng(0), max_words=3)


def test_heldout_sentences_are_distinct_and_pass_the_filter():
    held = P.heldout_sentences(80, seed=3, max_words=7, keep=P.telling)
    assert len(P.exclusion(held)) == 80 and all(len(w) <= 7 and P.telling(w, s) for w, s in held)
    assert held == P.heldout_sentences(80, seed=3, max_words=7, keep=P.telling)
    with pytest.raises(ValueError, match="pass the filters"):
        P.heldout_sentences(5, seed=0, keep=lambda w, s: False)


def test_translation_lines_and_prompts():
    (words, states), = P.sentences(1, np.random.default_rng(2))
    line = P.translation_line(words, states)
    assert line == " ".join(words) + " = " + " ".join(translate(words, states))
    assert P.translation_prompt(words) == "<|endoftext|> " + " ".join(words) + " ="
    assert P.translation_prompt(words, "=>").endswith(" =>")


def test_questions_name_the_subject_object_and_place():
    words = "the old king sees his gold near the river .".split()
    states = ["det_s", "adj_s", "king", "verb_t_m", "det_o_m", "money", "prep", "det_p", "place", "stop"]
    assert P.questions(words, states) == {"who": ("who sees ?", "king"),
                                         "what": ("sees what ?", "gold"),
                                         "where": ("sees where ?", "river")}
    assert list(P.questions("the cat sleeps .".split(), ["det_s", "animal", "verb_i", "stop"])) == ["who"]
    assert P.qa_block(words, "who sees ?") == " ".join(words) + " \n Q : who sees ? A :"
    assert P.qa_block(words, "who sees ?", "king").endswith("A : king \n")


def test_qa_queries_are_balanced_and_answered_by_the_sentence():
    qa = P.qa_queries(P.heldout_sentences(200, seed=1), n_per_type=20)
    types = [t for t, *_ in qa]
    assert all(types.count(t) == 20 for t in P.QUESTION_TYPES) and len(qa) == 60
    for wh, prompt, answer, subject in qa:
        sentence = prompt.split(" \n ")[0].split()[1:]
        assert prompt.endswith("A :") and answer in sentence and subject in sentence
        assert (answer == subject) == (wh == "who")
    with pytest.raises(ValueError, match="too few questions"):
        P.qa_queries(P.heldout_sentences(5, seed=1), n_per_type=20)


def test_web_documents_mix_kinds_and_keep_the_held_out_sentences_out():
    held = P.heldout_sentences(300, seed=0)
    docs = P.web_documents(400, seed=5, exclude=P.exclusion(held))
    assert docs == P.web_documents(400, seed=5, exclude=P.exclusion(held))
    sentences = {s.strip() + " ." for d in docs for s in d.replace(P.NEWLINE, ".").split(".")
                 if s.strip() and "=" not in s and "Q :" not in s}
    assert not sentences & P.exclusion(held)
    assert any(" = " in d for d in docs) and any(" Q : " in d for d in docs)
    plain = P.web_documents(50, seed=5, mix=(1, 0, 0))
    assert not any(" = " in d or " Q : " in d for d in plain)
    for line in (ln for d in docs for ln in d.split(P.NEWLINE) if " = " in ln):
        src, tgt = line.strip().split(" = ")
        assert len(src.split()) == len(tgt.split())          # the toy translation is word for word
    with pytest.raises(ValueError, match="mix"):
        P.web_documents(3, seed=0, mix=(1, 1))
    with pytest.raises(ValueError, match="p_task"):
        P.web_documents(3, seed=0, p_task=1.5)


def test_the_tasks_on_a_known_sentence():
    words = "the old king sees his gold near the river .".split()
    states = ["det_s", "adj_s", "king", "verb_t_m", "det_o_m", "money", "prep", "det_p", "place", "stop"]
    assert {t: fn(words, states) for t, fn in P.TASKS.items()} == tasks_from_words(words) == \
        {"subject": "king", "verb": "sees", "last": "river", "kind": "royal"}
    assert P.telling(words, states) and not P.telling("the cat sleeps .".split(), ["det_s", "animal", "verb_i", "stop"])
    assert all(a in P.candidates(words) for a in tasks_from_words(words).values())
    with pytest.raises(ValueError, match="unknown task 'colour'"):
        P.check_task("colour")


def test_every_demonstration_list_follows_one_task():
    docs = P.icl_documents(200, seed=1, p_tasks=1.0, max_words=8)
    seen = set()
    for doc in docs:
        lines = [ln.split(" => ") for ln in doc.split(P.NEWLINE) if ln.strip()]
        assert 2 <= len(lines) <= 12 and all(len(x.split()) <= 8 for x, _ in lines)
        fits = [t for t in P.TASKS if all(tasks_from_words(x.split())[t] == y.strip() for x, y in lines)]
        assert fits
        seen.update(fits)
    assert seen == set(P.TASKS)
    plain = P.icl_documents(20, seed=1, p_tasks=0.0)
    assert not any("=>" in d for d in plain)
    with pytest.raises(ValueError, match="p_tasks"):
        P.icl_documents(2, seed=0, p_tasks=2)
    with pytest.raises(ValueError, match="n_demos"):
        P.icl_documents(2, seed=0, n_demos=(0, 3))


@pytest.mark.parametrize("k", [0, 1, 4])
def test_few_shot_prompts_hold_k_examples_then_the_query(k):
    queries = P.heldout_sentences(30, seed=2, max_words=7, keep=P.telling)
    prompts, answers = P.few_shot_prompts("last", queries, k, seed=0, max_words=6)
    assert (prompts, answers) == P.few_shot_prompts("last", queries, k, seed=0, max_words=6)
    for prompt, answer, (words, _) in zip(prompts, answers, queries):
        assert prompt.startswith("<|endoftext|> ") and prompt.endswith(" ".join(words) + " =>")
        demos = prompt[len("<|endoftext|> "):].split(P.NEWLINE)[:-1]
        assert len(demos) == k and answer == words[-2]
        for demo in demos:
            x, y = demo.strip().split(" => ")
            assert len(x.split()) <= 6 and y == x.split()[-2] and x not in P.exclusion(queries)


def test_few_shot_prompts_bad_input():
    queries = P.heldout_sentences(3, seed=2)
    with pytest.raises(ValueError, match="k must be"):
        P.few_shot_prompts("verb", queries, -1, seed=0)
    with pytest.raises(ValueError, match="unknown task"):
        P.few_shot_prompts("adjective", queries, 1, seed=0)
