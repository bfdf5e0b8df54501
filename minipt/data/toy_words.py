"""The toy language at word level: one tokenizer for its text and every toy task.

The fine-tuning, zero-shot, in-context and dialogue lessons work in words: a toy
sentence is 5-10 tokens instead of 25-45 characters, so a GPT sees whole examples in a
short context. ``word_tokenizer()`` knows every word the language and its tasks use,
plus the special tokens of the models that need them:
``[PAD]``, ``<|endoftext|>`` (GPT-2's document separator; the toy text's newline),
GPT-1's ``<s>`` (start), ``<$>`` (delimiter) and ``<e>`` (extract), and ``=>``, the
arrow that separates an input from its answer in tasks posed as text.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..tokenizers.special import DELIM, ENDOFTEXT, EXTRACT, PAD, START
from ..tokenizers.word import WordTokenizer
from .batching import TokenStream
from .hmm_language import HMMLanguage
from .toy_grammar import END_WORD
from .toy_text_tasks import BLAND, lexicon

ARROW = "=>"
SPECIALS = [PAD, ENDOFTEXT, START, DELIM, EXTRACT, ARROW]
TASK_WORDS = ["who", "?", "positive", "negative", "yes", "no"] + [w for b in BLAND for w in b.split()]


@lru_cache(maxsize=1)
def word_tokenizer() -> WordTokenizer:
    """Specials first (``[PAD]`` is id 0), then the language's words, task words and the
    toy translation's words, each once."""
    words = list(HMMLanguage.build().vocab) + TASK_WORDS + sorted(set(lexicon().values()))
    words = [w for w in dict.fromkeys(words) if w != END_WORD]
    return WordTokenizer(specials=SPECIALS).fit(" ".join(words))


def words_to_text(words: list[str]) -> str:
    """A sampled word stream as tokenizer text: the document end becomes ``<|endoftext|>``."""
    return " ".join(ENDOFTEXT if w == END_WORD else w for w in words)


def toy_word_stream(n_words: int, block_size: int, batch_size: int, seed: int = 0,
                    lang: HMMLanguage | None = None) -> tuple[TokenStream, float]:
    """(LM batches over ~n_words training words and n_words / 10 validation words, the
    oracle loss of the validation stream in nats per word). ``lang``: another generator
    of the same vocabulary (a domain of ``toy_domains``; default the toy language)."""
    lang, tok = lang or HMMLanguage.build(), word_tokenizer()
    rng = np.random.default_rng(seed)
    train_words = lang.sample_words(n_words, rng)
    val_words = lang.sample_words(max(n_words // 10, block_size + 1), rng)
    oracle = -lang.log_prob(val_words) / len(val_words)
    stream = TokenStream(tok.encode_array(words_to_text(train_words)), tok.encode_array(words_to_text(val_words)),
                         block_size, batch_size)
    return stream, oracle
