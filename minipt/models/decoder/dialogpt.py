"""DialoGPT's decoding: top-K candidates re-ranked by mutual information (Zhang et al.
2020, "DIALOGPT: Large-Scale Generative Pre-training for Conversational Response
Generation", section 3.2).

A forward GPT-2 trained on p(T | S) (``minipt.objectives.dialogue``) likes bland
replies ("i see .", "ok ."): they are frequent and short, so they are probable after
almost any history. Maximum mutual information (MMI; Li et al. 2016, "A Diversity-
Promoting Objective Function for Neural Conversation Models") asks instead which reply
makes the history predictable. DialoGPT samples K candidates with top-K sampling from
the forward model and scores each with a *backward* model trained on the response
followed by the history turns in reverse order:

    score(T) = log P(S | T) + lambda * log P(T | S)        (DialoGPT: lambda = 0)

A bland reply says nothing about the history, so log P(S | T) stays near the history's
marginal; a reply that picks up the history's topic makes it predictable and wins.
``distinct_n`` (Li et al. 2016) measures how varied a set of replies is.

Both models are ``minipt.models.decoder.gpt.GPT`` (``GPTConfig.gpt2``). Shapes: K candidates,
T time, V vocabulary.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...core.checks import check_positive_int
from ...core.module import eval_mode
from ...inference.decoding import SamplingConfig, generate
from ...objectives.common import IGNORE
from ...objectives.dialogue import (
    _check_history,
    backward_example,
    context_ids,
    forward_example,
    pad_batch,
)
from ...ops.softmax import log_softmax_forward
from ..registry import ModelEntry, register
from .gpt import TINY, GPTConfig, gpt_entry, perturbed


def _history_list(history) -> list[np.ndarray]:
    if isinstance(history, np.ndarray):
        raise TypeError("history: expected a list of turns (1-D id arrays), got one array; "
                        "wrap a single turn as [turn]")
    return [np.asarray(h, dtype=np.int64) for h in history]


def sample_candidates(model, history: Sequence[np.ndarray], k: int, *, eot_id: int, rng: np.random.Generator,
                      top_k: int | None = 10, temperature: float = 1.0, max_new_tokens: int = 24
                      ) -> list[np.ndarray]:
    """K replies (each (T_k,), the closing ``<|endoftext|>`` stripped) sampled from the
    forward model after the prompt ``h_1 | ... | h_m |``, by top-k sampling on the KV
    cache (``minipt.inference.decoding``). Oldest turns are dropped if the prompt and
    ``max_new_tokens`` would not fit in the context. A reply that reached
    ``max_new_tokens`` without a separator is returned as it is."""
    check_positive_int("k (the number of candidates)", k)
    history = _history_list(history)
    _check_history(history, np.zeros(0, np.int64))
    room = model.block_size - max_new_tokens
    while len(history) > 1 and len(context_ids(history, eot_id)) > room:
        history.pop(0)                                             # DialoGPT truncates the oldest turns
    prompt = context_ids(history, eot_id)                          # (S,)
    config = SamplingConfig(max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k,
                            stop_tokens=(eot_id,))
    out = []
    for _ in range(k):
        new = generate(model, prompt, config, rng)                 # (T_k [+ 1],)
        out.append(new[:-1] if new.size and new[-1] == eot_id else new)
    return out


def target_log_probs(model, examples: Sequence[tuple[np.ndarray, np.ndarray]], pad_id: int) -> np.ndarray:
    """sum_t log p(y_t | x_<=t) over each example's non-IGNORE targets -> (K,) float64,
    in eval mode, in one padded batch."""
    x, y = pad_batch(examples, pad_id)                             # (K, T), (K, T)
    with eval_mode(model):
        _, logits = model(x)                                       # (K, T, V)
    logp, _ = log_softmax_forward(logits.astype(np.float64))      # (K, T, V)
    keep = y != IGNORE                                             # (K, T)
    picked = np.take_along_axis(logp, np.where(keep, y, 0)[..., None], axis=-1)[..., 0]   # (K, T)
    return (picked * keep).sum(axis=1)                             # (K,)


def forward_scores(model, history, candidates: Sequence[np.ndarray], *, eot_id: int, pad_id: int) -> np.ndarray:
    """log P(T_k | S) for every candidate, the closing separator included -> (K,)."""
    history = _history_list(history)
    L = model.block_size
    return target_log_probs(model, [forward_example(history, c, eot_id, L) for c in candidates], pad_id)


def backward_scores(backward_model, history, candidates: Sequence[np.ndarray], *, eot_id: int,
                    pad_id: int) -> np.ndarray:
    """log P(S | T_k) from the backward model (``r | h_m | ... | h_1 |``) -> (K,)."""
    history = _history_list(history)
    L = backward_model.block_size
    return target_log_probs(backward_model, [backward_example(history, c, eot_id, L) for c in candidates], pad_id)


@dataclass
class Reranked:
    order: np.ndarray        # (K,) candidate indices, best first
    score: np.ndarray        # (K,) log P(S | T) + lam * log P(T | S)
    backward: np.ndarray     # (K,) log P(S | T)
    forward: np.ndarray | None   # (K,) log P(T | S), when a forward model was given

    @property
    def best(self) -> int:
        return int(self.order[0])


def mmi_rerank(backward_model, history, candidates: Sequence[np.ndarray], *, eot_id: int, pad_id: int,
               forward_model=None, lam: float = 0.0) -> Reranked:
    """Rank candidate replies by log P(S | T) + lam * log P(T | S) (DialoGPT: lam = 0,
    the backward score alone). Ties keep the candidates' order."""
    if len(candidates) == 0:
        raise ValueError("mmi_rerank: no candidates")
    if lam and forward_model is None:
        raise ValueError(f"lam={lam} weights log P(T | S): pass forward_model")
    back = backward_scores(backward_model, history, candidates, eot_id=eot_id, pad_id=pad_id)
    fwd = None if forward_model is None else \
        forward_scores(forward_model, history, candidates, eot_id=eot_id, pad_id=pad_id)
    score = back + (lam * fwd if fwd is not None else 0.0)
    return Reranked(np.argsort(-score, kind="stable"), score, back, fwd)


def distinct_n(replies: Sequence, n: int) -> float:
    """distinct-n (Li et al. 2016): distinct n-grams / all n-grams over a set of replies
    (each a string, split on whitespace, or a sequence of tokens); n-grams never cross
    replies. 0.0 when the replies hold no n-gram."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    grams = []
    for r in replies:
        toks = r.split() if isinstance(r, str) else [int(t) if isinstance(t, np.integer) else t for t in r]
        grams.extend(tuple(toks[i:i + n]) for i in range(len(toks) - n + 1))
    return len(set(grams)) / len(grams) if grams else 0.0


def _tiny():
    """A float64 GPT-2 and one batch of a forward and a backward (reversed) session,
    targets IGNORE on the history: the reply-only loss."""
    eot, pad = 2, 0
    model = gpt_entry("dialogpt", "", "", GPTConfig.gpt2, "").build(
        rng=np.random.default_rng(0), dtype=np.float64, **{**TINY, "vocab_size": 11, "block_size": 16})
    x0, y0 = forward_example([np.array([3, 4, 5]), np.array([6, 7])], np.array([8, 9, 2]), eot)
    x1, y1 = backward_example([np.array([4, 4]), np.array([10, 3, 5])], np.array([7, 6]), eot)
    return perturbed(model), pad_batch([(x0, y0), (x1, y1)], pad)


register(ModelEntry(
    name="dialogpt", title="DialoGPT", paper="Zhang et al. 2020, DIALOGPT: Large-Scale Generative Pre-training for "
    "Conversational Response Generation", objective="causal LM on the reply (+ MMI re-ranking)",
    build=gpt_entry("dialogpt", "", "", GPTConfig.gpt2, "").build, tiny=_tiny, lesson="12_dialogpt",
    no_preset="a GPT-2 pair (forward and backward) trained on dialogues in lesson 12; `minipt train gpt` is the same network"))
