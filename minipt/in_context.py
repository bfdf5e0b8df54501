"""Scoring prompts in bulk: the next-token distribution after many prompts at once.

GPT-3 (Brown et al. 2020, section 2.4) scores a few-shot prompt in two ways: free-form
answers by greedy decoding, multiple-choice tasks by comparing the model's probability
of each candidate completion. When every answer is one token, both read the same
distribution, p(next token | prompt), at the prompt's last position: the greedy answer
is its argmax over the vocabulary, the choice its argmax over the candidates. One
forward of a right-padded batch gives it for a whole batch of prompts (with causal
attention, padding after a prompt cannot change it). Longer answers are decoded one
prompt at a time with ``minipt.prompting.greedy_answer``.
"""
from __future__ import annotations

import numpy as np

from .prompting import padded_logits


def next_token_logits(model, prompts: list[list[int]], pad_id: int = 0, batch_size: int = 128) -> np.ndarray:
    """Logits of the token after each prompt: (N, V), in eval mode."""
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("next_token_logits: expected a non-empty list of non-empty prompts")
    block = model.config.block_size
    longest = max(len(p) for p in prompts)
    if longest > block:
        raise ValueError(f"a prompt has {longest} tokens; the context holds {block}")
    out = []
    for lo in range(0, len(prompts), batch_size):
        chunk = prompts[lo:lo + batch_size]
        lengths = np.array([len(p) for p in chunk])                          # (B,)
        logits = padded_logits(model, chunk, pad_id)                         # (B, T, V)
        out.append(logits[np.arange(len(chunk)), lengths - 1])               # (B, V)
    return np.concatenate(out).astype(np.float64)


def one_token_answers(model, tok, prompts: list[str], candidates: list[list[str]] | None = None,
                      pad_id: int = 0) -> tuple[list[str], list[str] | None]:
    """(greedy answers, chosen candidates or None): the argmax of the next token over the
    vocabulary, and over each prompt's candidate words when they are given."""
    if candidates is not None and len(candidates) != len(prompts):
        raise ValueError(f"{len(prompts)} prompts but {len(candidates)} candidate lists")
    logits = next_token_logits(model, [tok.encode(p) for p in prompts], pad_id)   # (N, V)
    greedy = [tok.id_to_token(int(i)) for i in logits.argmax(1)]
    if candidates is None:
        return greedy, None
    chosen = []
    for row, cands in zip(logits, candidates):
        ids = [tok.token_to_id(c) for c in cands]
        chosen.append(cands[int(np.argmax(row[ids]))])
    return greedy, chosen


def accuracy(predictions: list[str], answers: list[str]) -> float:
    """Exact-match accuracy."""
    if len(predictions) != len(answers) or not answers:
        raise ValueError(f"expected two equal, non-empty lists, got {len(predictions)} and {len(answers)}")
    return float(np.mean([p == a for p, a in zip(predictions, answers)]))


def word_accuracy(prediction: list[str], reference: list[str]) -> float:
    """Share of the reference's positions where the prediction has the same word (a
    missing or extra word counts as wrong)."""
    if not reference:
        raise ValueError("word_accuracy: the reference is empty")
    hits = sum(p == r for p, r in zip(prediction, reference))
    return hits / max(len(prediction), len(reference))
