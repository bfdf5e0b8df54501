"""Pre-training batches for knowledge-enhanced encoders: MLM plus ERNIE's denoising
entity auto-encoder (dEA; Zhang et al. 2019, section 3.4), on the toy knowledge base.

Each sentence becomes ``[CLS] words [SEP]`` with its entity mentions as a second,
shorter sequence: entity ids (B, M), the token each is aligned with (its mention's first
token; positions (B, M)) and a mask for padding slots. The text is masked for MLM in one
of two ways:

- ``token``: BERT's 15 % of single tokens (``mlm.mask_tokens``);
- ``entity``: ERNIE (Baidu; Sun et al. 2019) masks whole entity mentions as units until
  about 15 % of the tokens are covered (``span_masking.entity_masking``); a sentence
  without a mention gets no MLM target.

dEA corrupts the token-entity alignments, as the paper does: of all alignments, 5 % have
their entity replaced by a random one, 15 % are masked (the token loses its entity), 80 %
stay; the model then predicts the entity of every aligned token. ``entity_labels`` (B, T)
holds that entity at each aligned token and ``IGNORE`` elsewhere.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..data.toy_grammar import STATES
from ..data.toy_kb import KnowledgeBase, Mention
from ..tokenizers.special import BERT_SPECIALS, CLS, MASK, PAD, SEP
from .common import IGNORE, check_probability
from .mlm import mask_tokens
from .span_masking import entity_masking

DEA_RANDOM, DEA_MASK = 0.05, 0.15


class KnowledgeBatch(NamedTuple):
    ids: np.ndarray                 # (B, T) [CLS] words [SEP] [PAD]..., masked for MLM
    token_mask: np.ndarray          # (B, T) 1 real, 0 padding
    entities: np.ndarray            # (B, M) entity ids (0 in padding slots)
    positions: np.ndarray           # (B, M) the token each entity is aligned with
    entity_mask: np.ndarray         # (B, M) 1 real alignment, 0 padding or masked by dEA
    mlm_labels: np.ndarray          # (B, T) original ids at MLM positions, else IGNORE
    entity_labels: np.ndarray       # (B, T) the aligned entity at aligned tokens, else IGNORE


def vocabulary(kb: KnowledgeBase) -> list[str]:
    """BERT's specials, the toy language's words and the relation verbs, then every entity
    name: a name is one token, so the text sees each entity as a word of its own."""
    words = sorted({w for ws in STATES.values() for w in ws if w != "\n"} | {"lives", "lies", "knows"})
    return list(BERT_SPECIALS) + words + list(kb.names)


def make_batch(sentences: list[Mention], kb: KnowledgeBase, rng: np.random.Generator, *,
               masking: str = "token", mask_prob: float = 0.15, dea: bool = True) -> KnowledgeBatch:
    """Sentences -> a KnowledgeBatch (see the module docstring); ``dea=False`` keeps every
    alignment (fine-tuning and evaluation)."""
    if masking not in ("token", "entity", "none"):
        raise ValueError(f"masking must be 'token', 'entity' or 'none', got {masking!r}")
    if not sentences:
        raise ValueError("make_batch needs at least one sentence")
    check_probability("mask_prob", mask_prob)
    words = vocabulary(kb)
    vocab = {w: i for i, w in enumerate(words)}
    unknown = sorted({w for s in sentences for w in s.words if w not in vocab})
    if unknown:
        raise ValueError(f"words outside the knowledge-base vocabulary: {unknown[:5]}")
    B, T = len(sentences), max(len(s.words) for s in sentences) + 2
    M = max(1, max(len(s.spans) for s in sentences))
    ids = np.full((B, T), vocab[PAD], np.int64)
    entities, positions, entity_mask = (np.zeros((B, M), np.int64) for _ in range(3))
    for b, s in enumerate(sentences):
        ids[b, :len(s.words) + 2] = [vocab[CLS]] + [vocab[w] for w in s.words] + [vocab[SEP]]
        for m, (start, _, e) in enumerate(s.spans):
            entities[b, m], positions[b, m], entity_mask[b, m] = kb.check_entities([e])[0], start + 1, 1
    token_mask = (ids != vocab[PAD]).astype(np.int64)
    specials = [vocab[t] for t in BERT_SPECIALS if t != MASK]
    ordinary = np.arange(len(BERT_SPECIALS), len(words))
    if masking == "none":
        inputs, mlm = ids.copy(), np.full_like(ids, IGNORE)
    elif masking == "token":
        inputs, mlm = mask_tokens(ids, rng, mask_id=vocab[MASK], vocab_size=len(words), special_ids=specials,
                                  mask_prob=mask_prob, random_ids=ordinary)
    else:
        rows = [entity_masking(ids[b, 1:len(s.words) + 1], [(st, en) for st, en, _ in s.spans], rng,
                               mask_id=vocab[MASK], random_ids=ordinary, mask_prob=mask_prob)
                for b, s in enumerate(sentences)]
        inputs, mlm = ids.copy(), np.full_like(ids, IGNORE)
        for b, (row_in, row_t) in enumerate(rows):
            inputs[b, 1:len(row_in) + 1], mlm[b, 1:len(row_t) + 1] = row_in, row_t
    entity_labels = np.full((B, T), IGNORE, np.int64)
    real = entity_mask > 0
    bm, mm = np.nonzero(real)
    entity_labels[bm, positions[bm, mm]] = entities[bm, mm]
    if dea:
        u = rng.random((B, M))                                             # (B, M) one draw per alignment
        swap = real & (u < DEA_RANDOM)
        entities = np.where(swap, rng.integers(0, kb.n_entities, (B, M)), entities)
        entity_mask = np.where(real & (u >= DEA_RANDOM) & (u < DEA_RANDOM + DEA_MASK), 0, entity_mask)
    else:
        entity_labels[:] = IGNORE
    return KnowledgeBatch(inputs, token_mask, entities, positions, entity_mask, mlm, entity_labels)
