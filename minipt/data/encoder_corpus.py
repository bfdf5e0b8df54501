"""Pre-training data for the BERT family (BERT, RoBERTa, ALBERT, ELECTRA): toy stories,
WordPiece, sentence pairs or packed full sentences, dynamic or static MLM masking.

BERT (Devlin et al. 2019, section 3.1 and appendix A.2) pre-trains on documents:
``[CLS] A [SEP] B [SEP]`` where B is A's next sentence half the time (NSP); RoBERTa
(Liu et al. 2019, section 4.2) packs FULL-SENTENCES across documents without NSP;
ALBERT (Lan et al. 2020) asks whether two consecutive segments are in order (SOP).

The toy language (``hmm_language``) draws every sentence independently, so a next
sentence and a random one would look alike and NSP/SOP would have nothing to learn.
``story_documents`` therefore builds *stories* from its sentences, with three
document-level regularities, each keeping every sentence a sentence of the language:

- **a domain**: a story is told in the general toy language or in its ``court`` domain
  (``toy_domains``: royal subjects, money, reversed word frequencies), half and half - a
  topic that shows in many words, as a random document's topic does in real text;
- **a protagonist**: every sentence of a story has the same subject noun (the word of
  the first sentence; later sentences are drawn among those whose subject has the same
  grammatical state, so "his"/"her" still agree) - topic, the cue NSP can use;
- **a journey**: every sentence ends at a place, and the places follow the fixed cycle
  ``PLACES`` (river -> forest -> bank -> ... -> castle -> river) from a random start - an
  order, the cue SOP needs (a swapped pair goes one step backwards).
  On the cycle (``journey="cycle"``, the default) every place is as often first as second
  in either class, so no sum of per-token cues f(A's place) + g(B's place) separates
  in-order from swapped pairs: the SOP label is an interaction of two words alone. A
  held-out probe on the bag of (token, segment) counts sits at chance (0.499) while one on
  the pair of places is exact (``scripts/investigate_sop.py``, issue 32). ``journey="path"``
  (the places in their fixed order, no wrap-around) adds the additive cue rank(B) -
  rank(A), as "first ... then ... at last" gives real text.

A random B from another story differs from A's story in domain half the time (a topic
cue, seen in the word statistics of each segment alone) and nearly always in protagonist
and place (cues that need A and B compared token by token). A swapped SOP pair keeps
domain and protagonist: only the order of the places tells. This is ALBERT's argument
(Lan et al. 2020, section 3.1) in miniature: NSP can be passed on topic, SOP cannot.

``EncoderCorpus`` turns token-id documents into training instances once per split
(fixed, as BERT's ``create_pretraining_data``), in one of three modes:

- ``nsp``: NSP pairs, label 1 = IsNext (``objectives.sentence_pairs``);
- ``sop``: SOP pairs, label 1 = in order;
- ``packed``: RoBERTa's FULL-SENTENCES: ``[CLS] s1 s2 ... [SEP]``, consecutive
  sentences from a random start, continuing into the next document after an extra
  ``[SEP]``, as long as whole sentences fit in ``max_length``.

Truncation: a pair longer than ``max_length`` is cut longest-first (the last token of
the longer segment, A on ties: ``sentence_pairs.truncate_pair``); a packed instance
whose first sentence alone is too long keeps that sentence's first ``max_length - 2``
tokens. Batches are padded with ``[PAD]`` to their longest row; ``attention_mask`` is
1 on real tokens, 0 on padding. Masking (``objectives.mlm``, 80/10/10 over the
non-special tokens, 15 %) is dynamic (drawn afresh for every batch, RoBERTa) or static
(``dup_factor`` masked copies per instance made once, BERT). A batch in which no
position was chosen is masked again; a batch with no maskable token is an error.

``get_batch(split, rng)`` -> ``(input_ids, token_type_ids, attention_mask, mlm_labels,
labels)`` for pairs and ``(input_ids, token_type_ids, attention_mask, mlm_labels)`` for
``packed``, all (B, T) except labels (B,): ``BertForPreTraining(*batch)`` reads it as is.
``unmasked(split, rng)`` gives the clean batch for other masking schemes (ELECTRA, spans).
"""
from __future__ import annotations

import numpy as np

from ..core.checks import check_positive_int
from ..objectives.common import IGNORE
from ..objectives.mlm import mask_tokens
from ..objectives.sentence_pairs import (
    next_sentence_prediction,
    sentence_order_prediction,
)
from ..tokenizers.special import BERT_SPECIALS, CLS, MASK, PAD, SEP
from ..tokenizers.wordpiece import WordPieceTokenizer
from .hmm_language import HMMLanguage
from .toy_domains import domain_language
from .toy_grammar import STATES, SUBJECT_STATES

PLACES = tuple(STATES["place"])                  # the journey's cycle, in this order
MODES = ("nsp", "sop", "packed")
JOURNEYS = ("cycle", "path")


def _sentence_pool(lang: HMMLanguage, n: int, rng: np.random.Generator) -> dict[str, list[tuple]]:
    """Sentences of the language that end at a place, by subject state:
    state -> [(words, subject index, place index)]; at least ``n`` in all, every
    subject state present."""
    pool: dict[str, list[tuple]] = {s: [] for s in SUBJECT_STATES}
    kept = 0
    while kept < n or not all(pool.values()):
        words, states = lang.sample_sentence(rng)
        if "place" not in states:
            continue
        subject = next(i for i, s in enumerate(states) if s in SUBJECT_STATES)
        pool[states[subject]].append((words, subject, states.index("place")))
        kept += 1
    return pool


def story_documents(n_docs: int, rng: np.random.Generator, *, min_sentences: int = 3, max_sentences: int = 6,
                    pool_size: int | None = None, domains: tuple[str, ...] = ("general", "court"),
                    with_domains: bool = False, journey: str = "cycle"):
    """``n_docs`` stories (lists of sentences, each a list of words ending in "."): a
    domain drawn uniformly from ``domains``, one protagonist, places following ``PLACES``
    (see the module docstring). Sentences come from a pool of ``pool_size`` sampled ones
    per domain (default min(2000, n_docs * max_sentences)); subject and place words are
    then set per story. ``with_domains``: also return each story's domain. ``journey``
    (``JOURNEYS``): "cycle" starts anywhere on the cycle of places and wraps around; "path"
    starts early enough to end by ``PLACES[-1]`` without wrapping (see the module docstring)."""
    check_positive_int("n_docs", n_docs)
    check_positive_int("min_sentences", min_sentences)
    if max_sentences < min_sentences:
        raise ValueError(f"max_sentences {max_sentences} is below min_sentences {min_sentences}")
    if not domains:
        raise ValueError("domains: expected at least one of the toy domains, got none")
    if journey not in JOURNEYS:
        raise ValueError(f"journey must be one of {JOURNEYS}, got {journey!r}")
    if journey == "path" and max_sentences > len(PLACES):
        raise ValueError(f"a path journey visits each of the {len(PLACES)} places once: max_sentences "
                         f"{max_sentences} is too many")
    pool_size = min(2000, n_docs * max_sentences) if pool_size is None else pool_size
    check_positive_int("pool_size", pool_size)
    pools = {d: _sentence_pool(domain_language(d), pool_size, rng) for d in domains}
    everything = {d: [(s, item) for s, items in pool.items() for item in items] for d, pool in pools.items()}
    docs, told_in = [], []
    for _ in range(n_docs):
        n = int(rng.integers(min_sentences, max_sentences + 1))
        domain = domains[int(rng.integers(len(domains)))]
        pool = pools[domain]
        state, (words, subject, place) = everything[domain][int(rng.integers(len(everything[domain])))]
        hero, start = words[subject], int(rng.integers(len(PLACES) if journey == "cycle" else len(PLACES) - n + 1))
        story = []
        for k in range(n):
            if k:
                words, subject, place = pool[state][int(rng.integers(len(pool[state])))]
            sentence = list(words)
            sentence[subject], sentence[place] = hero, PLACES[(start + k) % len(PLACES)]
            story.append(sentence)
        docs.append(story)
        told_in.append(domain)
    return (docs, told_in) if with_domains else docs


def documents_text(docs: list[list[list[str]]]) -> str:
    """Stories as text: words joined by spaces, one story per line."""
    return "\n".join(" ".join(" ".join(s) for s in doc) for doc in docs)


def wordpiece_tokenizer(docs: list[list[list[str]]], vocab_size: int = 250, max_docs: int = 500) -> WordPieceTokenizer:
    """A WordPiece vocabulary (specials ``[PAD] [UNK] [CLS] [SEP] [MASK]`` = ids 0-4) fitted
    on the first ``max_docs`` stories. At 250 most toy words are whole; a few stay split
    (``k ##e ##y``)."""
    return WordPieceTokenizer(BERT_SPECIALS).fit(documents_text(docs[:max_docs]), vocab_size)


def encode_documents(docs: list[list[list[str]]], tok) -> list[list[list[int]]]:
    """Token ids of every sentence. Each distinct word is encoded once: basic tokenisation
    splits at whitespace first, so a sentence's ids are its words' ids in a row."""
    known: dict[str, list[int]] = {}
    def ids(word: str) -> list[int]:
        if word not in known:
            known[word] = tok.encode(word, allow_special=False)
        return known[word]
    return [[[i for w in s for i in ids(w)] for s in doc] for doc in docs]


class EncoderCorpus:
    """Fixed instances per split and ``get_batch(split, rng)`` (see the module docstring).

    docs: {"train": ..., "val": ...}, each a list of documents of sentences of token ids;
    n_instances: {"train": N, "val": N} instances made once with ``np.random.default_rng(seed)``.
    """

    def __init__(self, docs: dict, tokenizer, *, mode: str = "nsp", max_length: int = 32, batch_size: int = 32,
                 n_instances: dict | None = None, mask_prob: float = 0.15, masking: str = "dynamic",
                 dup_factor: int = 10, seed: int = 0):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if masking not in ("dynamic", "static"):
            raise ValueError(f"masking must be 'dynamic' or 'static', got {masking!r}")
        if set(docs) != {"train", "val"}:
            raise ValueError(f"docs: expected the splits 'train' and 'val', got {sorted(docs)}")
        if not isinstance(max_length, int) or max_length < 5:
            raise ValueError(f"max_length must be an int of at least 5 ([CLS] A [SEP] B [SEP]), got {max_length!r}")
        self.mode, self.masking, self.max_length, self.mask_prob = mode, masking, max_length, mask_prob
        self.batch_size = check_positive_int("batch_size", batch_size)
        self.tok = tokenizer
        sp = tokenizer.special_tokens
        missing = [t for t in (PAD, CLS, SEP, MASK) if t not in sp]
        if missing:
            raise ValueError(f"tokenizer lacks the special tokens {missing}")
        self.pad_id, self.cls_id, self.sep_id, self.mask_id = sp[PAD], sp[CLS], sp[SEP], sp[MASK]
        self.special_ids = tuple(sorted(sp.values()))
        self.vocab_size = tokenizer.vocab_size
        n_instances = n_instances or {"train": 4000, "val": 500}
        rng = np.random.default_rng(seed)
        self.instances: dict[str, list[tuple]] = {}
        self.static: dict[str, list[list[tuple]]] = {}
        for split in ("train", "val"):
            split_docs = [d for d in docs[split] if d]
            if not split_docs or not any(len(s) for d in split_docs for s in d):
                raise ValueError(f"{split} documents are empty: pre-training needs text")
            if mode != "packed" and (len(split_docs) < 2 or any(len(d) < 2 for d in split_docs)):
                raise ValueError(f"{split}: {mode} needs at least two documents, each of at least two sentences")
            n = check_positive_int(f"n_instances[{split!r}]", n_instances[split])
            self.instances[split] = [self._instance(split_docs, rng) for _ in range(n)]
            if masking == "static":       # objectives.mlm.static_masks over the whole split, rows redrawn
                check_positive_int("dup_factor", dup_factor)        # while nothing is chosen in them
                every = self._pad([x[0] for x in self.instances[split]], self.pad_id)   # (N, T)
                self.static[split] = [self._mask_rows(every, rng) for _ in range(dup_factor)]

    # -- instances ---------------------------------------------------------------------
    def _instance(self, docs, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int]:
        """(ids (T,), segments (T,), label) of one instance; label -1 in packed mode."""
        if self.mode == "packed":
            return (*self._packed(docs, rng), -1)
        # two distinct documents; the objective takes A's from them (uniform over ordered pairs, O(1))
        i = int(rng.integers(len(docs)))
        j = (i + 1 + int(rng.integers(len(docs) - 1))) % len(docs)
        make = next_sentence_prediction if self.mode == "nsp" else sentence_order_prediction
        return make([docs[i], docs[j]], rng, self.cls_id, self.sep_id, max_length=self.max_length)

    def _packed(self, docs, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """FULL-SENTENCES from a random (document, sentence), crossing into the next document."""
        d = int(rng.integers(len(docs)))
        s = int(rng.integers(len(docs[d])))
        room = self.max_length - 2
        body: list[int] = list(docs[d][s][:room])
        while True:
            s += 1
            boundary = s >= len(docs[d])
            if boundary:
                d, s = (d + 1) % len(docs), 0
            nxt = ([self.sep_id] if boundary else []) + list(docs[d][s])
            if len(body) + len(nxt) > room:
                break
            body += nxt
        ids = np.array([self.cls_id] + body + [self.sep_id], dtype=np.int64)
        return ids, np.zeros_like(ids)

    # -- batches -----------------------------------------------------------------------
    def _mask_kw(self) -> dict:
        return dict(mask_id=self.mask_id, vocab_size=self.vocab_size, special_ids=self.special_ids,
                    mask_prob=self.mask_prob)

    def _pad(self, rows: list[np.ndarray], fill: int) -> np.ndarray:
        T = max(len(r) for r in rows)
        out = np.full((len(rows), T), fill, dtype=np.int64)                   # (B, T)
        for b, r in enumerate(rows):
            out[b, :len(r)] = r
        return out

    def _rows(self, split: str, rng: np.random.Generator) -> np.ndarray:
        if split not in self.instances:
            raise KeyError(f"split must be 'train' or 'val', got {split!r}")
        return rng.integers(0, len(self.instances[split]), size=self.batch_size)   # (B,)

    def _clean(self, split: str, rows: np.ndarray):
        inst = [self.instances[split][r] for r in rows]
        ids = self._pad([x[0] for x in inst], self.pad_id)                    # (B, T)
        segments = self._pad([x[1] for x in inst], 0)                          # (B, T)
        attention_mask = self._pad([np.ones(len(x[0]), np.int64) for x in inst], 0)   # (B, T)
        labels = np.array([x[2] for x in inst], dtype=np.int64)               # (B,)
        return ids, segments, attention_mask, labels

    def unmasked(self, split: str, rng: np.random.Generator):
        """(input_ids, token_type_ids, attention_mask, labels) without MLM masking."""
        return self._clean(split, self._rows(split, rng))

    def mask(self, ids: np.ndarray, rng: np.random.Generator, max_tries: int = 100):
        """Dynamic 80/10/10 masking of a batch (B, T) -> (inputs, mlm_labels); drawn again
        while no position is chosen."""
        if not np.isin(ids, self.special_ids, invert=True).any():
            raise ValueError("batch has no maskable token (every position is [PAD], [CLS], [SEP] or another "
                             "special token), so the MLM loss would be undefined")
        for _ in range(max_tries):
            inputs, targets = mask_tokens(ids, rng, **self._mask_kw())
            if (targets != IGNORE).any():
                return inputs, targets
        raise ValueError(f"no position was chosen for masking in {max_tries} draws (mask_prob {self.mask_prob})")

    def _mask_rows(self, ids: np.ndarray, rng: np.random.Generator, max_tries: int = 100):
        """Masking of (N, T) in which every row with a maskable token gets at least one
        chosen position (rows without one are masked again)."""
        inputs, targets = mask_tokens(ids, rng, **self._mask_kw())
        maskable = np.isin(ids, self.special_ids, invert=True).any(axis=1)             # (N,)
        for _ in range(max_tries):
            redo = np.flatnonzero(maskable & ~(targets != IGNORE).any(axis=1))
            if not redo.size:
                return inputs, targets
            inputs[redo], targets[redo] = mask_tokens(ids[redo], rng, **self._mask_kw())
        raise ValueError(f"rows {redo.tolist()} got no masked position in {max_tries} draws")

    def get_batch(self, split: str, rng: np.random.Generator) -> tuple:
        rows = self._rows(split, rng)
        ids, segments, attention_mask, labels = self._clean(split, rows)
        if self.masking == "dynamic":
            inputs, targets = self.mask(ids, rng)
        else:
            copy = rng.integers(0, len(self.static[split]), size=len(rows))     # (B,) which masked copy
            T = ids.shape[1]
            inputs = np.stack([self.static[split][c][0][r, :T] for c, r in zip(copy, rows)])   # (B, T)
            targets = np.stack([self.static[split][c][1][r, :T] for c, r in zip(copy, rows)])  # (B, T)
        if self.mode == "packed":
            return inputs, segments, attention_mask, targets
        return inputs, segments, attention_mask, targets, labels

    def in_order(self, split: str, rng: np.random.Generator):
        """Every instance of ``split`` once, in batches of ``batch_size`` (the last may be
        smaller), dynamically masked with ``rng``: the batches of a held-out evaluation."""
        if split not in self.instances:
            raise KeyError(f"split must be 'train' or 'val', got {split!r}")
        n = len(self.instances[split])
        for start in range(0, n, self.batch_size):
            ids, segments, attention_mask, labels = self._clean(split, np.arange(start, min(start + self.batch_size, n)))
            inputs, targets = self.mask(ids, rng)
            yield (inputs, segments, attention_mask, targets) + (() if self.mode == "packed" else (labels,))

    def most_frequent_token(self, split: str = "train") -> int:
        """The most frequent maskable token of ``split``: the MLM accuracy baseline's guess."""
        ids = np.concatenate([x[0] for x in self.instances[split]])
        ids = ids[np.isin(ids, self.special_ids, invert=True)]
        return int(np.bincount(ids, minlength=self.vocab_size).argmax())


def encoder_corpus(*, n_docs: int = 1000, vocab_size: int = 250, seed: int = 0, fit_tokenizer=None,
                   journey: str = "cycle", **kw) -> EncoderCorpus:
    """Stories (``n_docs`` for training, a tenth more, independent, for validation), a
    WordPiece vocabulary fitted on the training stories (or ``fit_tokenizer(docs,
    vocab_size)``'s, e.g. RoBERTa's byte-level BPE), and an ``EncoderCorpus`` over
    them; ``journey`` goes to ``story_documents``, ``kw`` to ``EncoderCorpus`` (mode,
    max_length, batch_size, ...)."""
    rng = np.random.default_rng(seed)
    train_docs = story_documents(n_docs, rng, journey=journey)
    val_docs = story_documents(max(n_docs // 10, 2), rng, journey=journey)
    tok = (fit_tokenizer or wordpiece_tokenizer)(train_docs, vocab_size)
    docs = {"train": encode_documents(train_docs, tok), "val": encode_documents(val_docs, tok)}
    return EncoderCorpus(docs, tok, seed=seed, **kw)
