"""Tasks posed as text: a toy web for zero-shot prompting, a task family for in-context learning.

- GPT-2 (Radford et al. 2019, "Language Models are Unsupervised Multitask Learners",
  section 2) argues that a language model trained on enough ordinary text learns tasks
  whose demonstrations occur there naturally: WebText holds lines like
  ``english sentence = french sentence`` and documents followed by questions and answers,
  so ``p(output | input, task)`` can be read off the model by posing the task as text.
  ``web_documents`` builds such a corpus from the toy language: plain documents,
  documents whose sentences are followed by ``= their toy translation``
  (``toy_text_tasks.translate``), and documents whose sentences are followed by a
  question and its answer, ``Q: who sees ? A: king``.
- GPT-3 (Brown et al. 2020, "Language Models are Few-Shot Learners", section 2)
  conditions on K solved examples and a query, ``x_1 => y_1 \\n ... x_K => y_K \\n x =>``,
  with no gradient step. ``icl_documents`` builds a pre-training mixture in which most
  documents list solved examples of ONE task from ``TASKS``; the task is never named, so
  a model must infer it from the examples. ``few_shot_prompts`` builds the K-shot prompts.

Every task in ``TASKS`` answers a toy sentence with one word that depends on it: its
subject noun, its verb, its last word, or the subject's kind (animal, person, royal).
"last" and "verb" agree on a sentence that ends with its verb ("the cat sleeps ."), so
one such example leaves the task open and more examples close it. Queries are drawn
from ``heldout_sentences`` and passed as ``exclude`` to every generator, so no query is
seen in pre-training. Everything is seeded.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Callable

import numpy as np

from ..core.checks import check_positive_int
from ..tokenizers.special import ENDOFTEXT
from ..tokenizers.word import WordTokenizer
from .toy_grammar import END_WORD, NOUN_STATES
from .toy_tasks import Sentence, language, text, verb_index
from .toy_text_tasks import translate
from .toy_words import ARROW, SPECIALS, word_tokenizer

NEWLINE = "\n"       # a special token: the line break between examples inside a document
EQUALS = "="         # "english = toy translation", GPT-2's translation format
# the subject's state -> its kind (one of the in-context tasks' answers)
KINDS = {"animal": "animal", "man": "person", "woman": "person", "king": "royal", "queen": "royal"}
PROMPT_WORDS = ["Q", "A", ":", "what", "where", EQUALS] + sorted(set(KINDS.values()))


@lru_cache(maxsize=1)
def prompt_tokenizer() -> WordTokenizer:
    """``word_tokenizer()``'s words and specials, plus ``NEWLINE`` (special) and
    ``PROMPT_WORDS`` (``Q : what where = animal person royal``)."""
    base = word_tokenizer()
    words = [base.id_to_token(i) for i in range(base.vocab_size)]
    words = [w for w in words if w not in base.special_tokens] + PROMPT_WORDS
    return WordTokenizer(specials=SPECIALS + [NEWLINE]).fit(" ".join(dict.fromkeys(words)))


# -- sentences ---------------------------------------------------------------------------
def sentences(n: int, rng: np.random.Generator, exclude: frozenset[str] = frozenset(),
              max_words: int | None = None) -> list[Sentence]:
    """``n`` sentences (words, states) from one walk through the toy HMM, skipping those
    whose text is in ``exclude`` or that have more than ``max_words`` tokens."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if max_words is not None and max_words < 4:
        raise ValueError(f"max_words must be >= 4 (the shortest sentence), got {max_words}")
    lang = language()
    out: list[Sentence] = []
    words: list[str] = []
    states: list[str] = []
    walk = lang.walk(rng)
    while len(out) < n:
        s, w = next(walk)
        if lang.vocab[w] == END_WORD:
            continue
        words.append(lang.vocab[w])
        states.append(lang.states[s])
        if words[-1] == ".":
            if (max_words is None or len(words) <= max_words) and text(words) not in exclude:
                out.append((words, states))
            words, states = [], []
    return out


def heldout_sentences(n: int, seed: int, max_words: int | None = None,
                      keep: Callable[[list[str], list[str]], bool] | None = None) -> list[Sentence]:
    """``n`` distinct sentences (of at most ``max_words`` tokens, passing ``keep``): the
    queries to keep out of pre-training (``exclusion(...)`` of them is the ``exclude``)."""
    check_positive_int("n", n)
    rng = np.random.default_rng(seed)
    seen: dict[str, Sentence] = {}
    for _ in range(100):
        for words, states in sentences(4 * n, rng, max_words=max_words):
            if keep is None or keep(words, states):
                seen.setdefault(text(words), (words, states))
                if len(seen) == n:
                    return list(seen.values())
    raise ValueError(f"only {len(seen)} distinct sentences pass the filters; ask for fewer than {n}")


def exclusion(sents: list[Sentence]) -> frozenset[str]:
    """The texts of ``sents``, for the ``exclude`` argument of the generators."""
    return frozenset(text(w) for w, _ in sents)


def join_documents(docs: list[str]) -> str:
    """Documents as one training text, each opened by ``<|endoftext|>`` (GPT-2's separator)."""
    return "".join(f"{ENDOFTEXT} {d} " for d in docs)


# -- GPT-2: a web with tasks inside it ----------------------------------------------------
def translation_line(words: list[str], states: list[str]) -> str:
    """``sentence = toy translation``: how a translation occurs in the toy web."""
    return f"{text(words)} {EQUALS} {text(translate(words, states))}"


def translation_prompt(words: list[str], marker: str = EQUALS) -> str:
    """The zero-shot prompt: a document holding the sentence and the marker, nothing else."""
    return f"{ENDOFTEXT} {text(words)} {marker}"


QUESTION_TYPES = ("who", "what", "where")


def questions(words: list[str], states: list[str]) -> dict[str, tuple[str, str]]:
    """Question type -> (question, answer) for the questions a sentence answers, each
    answer one of its nouns: who (the subject), what (the object), where (the place)."""
    v = verb_index(states)
    verb = words[v]
    out = {"who": (f"who {verb} ?", words[v - 1])}
    for wh, is_place in (("what", False), ("where", True)):
        nouns = [w for w, s in zip(words[v + 1:], states[v + 1:]) if s in NOUN_STATES and (s == "place") == is_place]
        if nouns:
            out[wh] = (f"{verb} {wh} ?", nouns[0])
    return out


def qa_block(words: list[str], question: str, answer: str | None = None) -> str:
    """GPT-2's reading-comprehension format ``document Q: question A: answer`` on one
    sentence; with no answer, the text a zero-shot prompt ends with."""
    block = f"{text(words)} {NEWLINE} Q : {question} A :"
    return block if answer is None else f"{block} {answer} {NEWLINE}"


def qa_queries(sents: list[Sentence], n_per_type: int) -> list[tuple[str, str, str, str]]:
    """(type, prompt, answer, subject) for ``n_per_type`` sentences per question type, in
    order of ``sents``: a balanced test in which answering the subject scores 1/3."""
    out, count = [], dict.fromkeys(QUESTION_TYPES, 0)
    for words, states in sents:
        qs = questions(words, states)
        wh = min((t for t in qs if count[t] < n_per_type), key=count.get, default=None)
        if wh is not None:
            count[wh] += 1
            out.append((wh, f"{ENDOFTEXT} {qa_block(words, qs[wh][0])}", qs[wh][1], qs["who"][1]))
    if min(count.values()) < n_per_type:
        raise ValueError(f"the sentences hold too few questions for {n_per_type} of each type: {count}")
    return out


WEB_KINDS = ("text", "translation", "qa")


def web_documents(n_docs: int, seed: int, mix: tuple[float, float, float] = (0.1, 0.4, 0.5),
                  exclude: frozenset[str] = frozenset(), p_task: float = 1.0,
                  doc_sentences: tuple[int, int] = (2, 6)) -> list[str]:
    """``n_docs`` documents of 2-6 sentences, each of one kind of ``WEB_KINDS`` drawn with
    probabilities ``mix``: ``text`` (plain sentences), ``translation`` (each sentence
    followed, with probability ``p_task``, by ``= translation`` and a newline) or ``qa``
    (each sentence followed, with probability ``p_task``, by one of its questions and the
    answer)."""
    mix_arr = np.asarray(mix, dtype=float)
    if mix_arr.shape != (3,) or (mix_arr < 0).any() or mix_arr.sum() <= 0:
        raise ValueError(f"mix must be three non-negative weights for {WEB_KINDS}, got {mix}")
    if not 0 <= p_task <= 1:
        raise ValueError(f"p_task must be in [0, 1], got {p_task}")
    rng = np.random.default_rng(seed)
    kinds = rng.choice(3, size=n_docs, p=mix_arr / mix_arr.sum())                 # (n_docs,)
    counts = rng.integers(doc_sentences[0], doc_sentences[1] + 1, n_docs)         # (n_docs,)
    pool = iter(sentences(int(counts.sum()), rng, exclude))
    docs = []
    for kind, k in zip(kinds, counts):
        parts = []
        for words, states in (next(pool) for _ in range(k)):
            if WEB_KINDS[kind] == "text" or rng.random() >= p_task:
                parts.append(text(words))
            elif WEB_KINDS[kind] == "translation":
                parts.append(f"{translation_line(words, states)} {NEWLINE}")
            else:
                qs = list(questions(words, states).values())
                parts.append(qa_block(words, *qs[int(rng.integers(len(qs)))]))
        docs.append(" ".join(parts))
    return docs


# -- GPT-3: a family of tasks, inferred from the examples in the prompt --------------------
def _subject(words: list[str], states: list[str]) -> str:
    return words[verb_index(states) - 1]


TASKS: dict[str, Callable[[list[str], list[str]], str]] = {
    "subject": _subject,                                # the subject noun
    "verb": lambda w, s: w[verb_index(s)],              # the verb
    "last": lambda w, s: w[-2],                         # the last word before the full stop
    "kind": lambda w, s: KINDS[s[verb_index(s) - 1]],   # the subject's kind
}


def check_task(task: str) -> Callable[[list[str], list[str]], str]:
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; the tasks are {sorted(TASKS)}")
    return TASKS[task]


def telling(words: list[str], states: list[str]) -> bool:
    """True when the tasks all give different answers: a query on which a model that
    inferred the wrong task cannot be right by luck."""
    answers = [fn(words, states) for fn in TASKS.values()]
    return len(set(answers)) == len(answers)


def candidates(words: list[str]) -> list[str]:
    """Every answer a task of the family could give for this query: its words and the kinds."""
    return sorted(set(words) - {"."} | set(KINDS.values()))


def demonstration(task: str, words: list[str], states: list[str]) -> str:
    """One solved example, ``sentence => answer``, closed by a newline."""
    return f"{text(words)} {ARROW} {check_task(task)(words, states)} {NEWLINE}"


def icl_documents(n_docs: int, seed: int, p_tasks: float = 0.9, exclude: frozenset[str] = frozenset(),
                  n_demos: tuple[int, int] = (2, 12), max_words: int | None = None,
                  doc_sentences: tuple[int, int] = (2, 6)) -> list[str]:
    """Pre-training documents: with probability ``p_tasks`` a list of ``n_demos`` solved
    examples of one task (uniform over ``TASKS``, never named), one per line; otherwise
    plain toy text."""
    if not 0 <= p_tasks <= 1:
        raise ValueError(f"p_tasks must be in [0, 1], got {p_tasks}")
    if not 1 <= n_demos[0] <= n_demos[1]:
        raise ValueError(f"n_demos must be (low, high) with 1 <= low <= high, got {n_demos}")
    rng = np.random.default_rng(seed)
    names = list(TASKS)
    is_task = rng.random(n_docs) < p_tasks                                          # (n_docs,)
    counts = np.where(is_task, rng.integers(n_demos[0], n_demos[1] + 1, n_docs),
                      rng.integers(doc_sentences[0], doc_sentences[1] + 1, n_docs))  # (n_docs,)
    pool = iter(sentences(int(counts.sum()), rng, exclude, max_words))
    docs = []
    for task_doc, k in zip(is_task, counts):
        chunk = [next(pool) for _ in range(k)]
        if task_doc:
            task = names[int(rng.integers(len(names)))]
            docs.append(" ".join(demonstration(task, w, s) for w, s in chunk))
        else:
            docs.append(" ".join(text(w) for w, _ in chunk))
    return docs


def few_shot_prompts(task: str, queries: list[Sentence], k: int, seed: int,
                     exclude: frozenset[str] = frozenset(), max_words: int | None = None
                     ) -> tuple[list[str], list[str]]:
    """(prompts, answers): per query, ``<|endoftext|>``, ``k`` solved examples of ``task``
    on fresh sentences (never a query, none longer than ``max_words``), then ``query =>``.
    K = 0 is the bare query."""
    fn = check_task(task)
    if not isinstance(k, (int, np.integer)) or k < 0:
        raise ValueError(f"k must be an int >= 0, got {k!r}")
    rng = np.random.default_rng(seed)
    pool = iter(sentences(k * len(queries), rng, exclude | exclusion(queries), max_words))
    prompts, answers = [], []
    for words, states in queries:
        demos = "".join(f"{demonstration(task, *next(pool))} " for _ in range(k))
        prompts.append(f"{ENDOFTEXT} {demos}{text(words)} {ARROW}")
        answers.append(fn(words, states))
    return prompts, answers
