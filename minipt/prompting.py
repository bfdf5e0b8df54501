"""Using a trained language model with no gradient step: scoring continuations.

- GPT-1's zero-shot heuristics (Radford et al. 2018, section 5): pick the answer with
  the highest mean log-probability given the context (RACE, Winograd); threshold a
  sentence's mean token log-probability to call it acceptable (CoLA).
- GPT-2 (Radford et al. 2019) poses tasks as text and reads the answer off the model,
  p(output | input, task); GPT-3 (Brown et al. 2020) adds K solved examples to the same
  prompt ("in-context learning"): ``greedy_answer`` continues a prompt until a stop token.

Every scorer runs the model in eval mode on right-padded batches: with causal attention
the padding after a sequence cannot change its log-probabilities.
"""
from __future__ import annotations

import numpy as np

from .ops.softmax import log_softmax_forward


def padded_logits(model, seqs: list[list[int]], pad_id: int = 0) -> np.ndarray:
    """Logits (B, T, V) for token sequences right-padded with ``pad_id`` to the longest,
    in eval mode (the model's mode is restored). With causal attention the padding after
    a sequence cannot change its logits."""
    T = max(len(s) for s in seqs)
    idx = np.full((len(seqs), T), pad_id, dtype=np.int64)           # (B, T)
    for b, s in enumerate(seqs):
        idx[b, :len(s)] = s
    was = model.training
    model.eval()
    try:
        _, logits = model(idx)                                       # (B, T, V)
    finally:
        model.train(was)
    return logits


def continuation_logprobs(model, pairs: list[tuple[list[int], list[int]]], pad_id: int = 0,
                          batch_size: int = 64) -> list[np.ndarray]:
    """log p(c_t | prompt, c_<t) for every (prompt ids, continuation ids) pair: a list of
    arrays, one log-probability per continuation token."""
    block = model.config.block_size
    out: list[np.ndarray] = []
    for lo in range(0, len(pairs), batch_size):
        chunk = pairs[lo:lo + batch_size]
        seqs = []
        for prompt, cont in chunk:
            if not cont:
                raise ValueError("continuation_logprobs: a continuation is empty")
            seq = list(prompt) + list(cont)
            if len(seq) > block + 1:
                raise ValueError(f"prompt + continuation is {len(seq)} tokens; the context holds {block + 1}")
            seqs.append(seq)
        logits = padded_logits(model, [s[:-1] for s in seqs], pad_id)   # (B, T, V)
        logp, _ = log_softmax_forward(logits.astype(np.float64))
        for b, (s, (_, cont)) in enumerate(zip(seqs, chunk)):
            pos = np.arange(len(s) - 1 - len(cont), len(s) - 1)      # positions that predict cont
            out.append(logp[b, pos, np.asarray(cont)])
    return out


def choose(model, context: list[int], choices: list[list[int]], pad_id: int = 0, reduce: str = "mean") -> int:
    """Index of the choice with the highest mean (or summed) log-probability given the context."""
    if reduce not in ("mean", "sum"):
        raise ValueError(f"reduce must be 'mean' or 'sum', got {reduce!r}")
    scores = [getattr(lp, reduce)() for lp in continuation_logprobs(model, [(context, c) for c in choices], pad_id)]
    return int(np.argmax(scores))


def mean_logprob(model, sentences: list[list[int]], start: list[int], pad_id: int = 0) -> np.ndarray:
    """Mean token log-probability of each sentence after a common ``start`` (CoLA heuristic)."""
    return np.array([lp.mean() for lp in continuation_logprobs(model, [(start, s) for s in sentences], pad_id)])


def greedy_answer(model, prompt: list[int], stop_ids: set[int], max_new_tokens: int = 8) -> list[int]:
    """Greedy continuation of ``prompt`` until a stop token (not included) or the limit."""
    from .generate import SamplingConfig, generate
    new = generate(model, np.asarray(prompt, dtype=np.int64),
                   SamplingConfig(max_new_tokens=max_new_tokens, temperature=0.0, stop_tokens=tuple(stop_ids)),
                   np.random.default_rng(0))
    return [int(t) for t in new if int(t) not in stop_ids]
