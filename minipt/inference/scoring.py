"""Using a trained language model with no gradient step: scoring continuations.

- GPT-1's zero-shot heuristics (Radford et al. 2018, section 5): pick the answer with
  the highest mean log-probability given the context (RACE, Winograd); threshold a
  sentence's mean token log-probability to call it acceptable (CoLA).
- GPT-2 (Radford et al. 2019) poses tasks as text and reads the answer off the model,
  p(output | input, task); GPT-3 (Brown et al. 2020) adds K solved examples to the same
  prompt ("in-context learning"): ``greedy_answer`` continues a prompt until a stop token.

GPT-3 (Brown et al. 2020, section 2.4) scores a few-shot prompt in two ways: free-form
answers by greedy decoding, multiple-choice tasks by comparing the model's probability
of each candidate completion. When every answer is one token, both read the same
distribution, p(next token | prompt), at the prompt's last position
(``next_token_logits``, ``one_token_answers``): one forward of a right-padded batch
gives it for a whole batch of prompts.

Every scorer runs the model in eval mode on right-padded batches: with causal attention
the padding after a sequence cannot change its log-probabilities.
"""
from __future__ import annotations

import numpy as np

from ..core.module import eval_mode
from ..ops.softmax import log_softmax_forward


def padded_logits(model, seqs: list[list[int]], pad_id: int = 0) -> np.ndarray:
    """Logits (B, T, V) for token sequences right-padded with ``pad_id`` to the longest,
    in eval mode (the model's mode is restored). With causal attention the padding after
    a sequence cannot change its logits."""
    T = max(len(s) for s in seqs)
    idx = np.full((len(seqs), T), pad_id, dtype=np.int64)           # (B, T)
    for b, s in enumerate(seqs):
        idx[b, :len(s)] = s
    with eval_mode(model):
        _, logits = model(idx)                                       # (B, T, V)
    return logits


def continuation_logprobs(model, pairs: list[tuple[list[int], list[int]]], pad_id: int = 0,
                          batch_size: int = 64) -> list[np.ndarray]:
    """log p(c_t | prompt, c_<t) for every (prompt ids, continuation ids) pair: a list of
    arrays, one log-probability per continuation token."""
    block = model.block_size
    out: list[np.ndarray] = []
    for lo in range(0, len(pairs), batch_size):
        chunk = pairs[lo:lo + batch_size]
        seqs = []
        for prompt, cont in chunk:
            if not cont:
                raise ValueError("continuation_logprobs: a continuation is empty")
            seq = list(prompt) + list(cont)
            if block is not None and len(seq) > block + 1:
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
    from .decoding import SamplingConfig, generate
    new = generate(model, np.asarray(prompt, dtype=np.int64),
                   SamplingConfig(max_new_tokens=max_new_tokens, temperature=0.0, stop_tokens=tuple(stop_ids)),
                   np.random.default_rng(0))
    return [int(t) for t in new if int(t) not in stop_ids]


def next_token_logits(model, prompts: list[list[int]], pad_id: int = 0, batch_size: int = 128) -> np.ndarray:
    """Logits of the token after each prompt: (N, V), in eval mode."""
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("next_token_logits: expected a non-empty list of non-empty prompts")
    block = model.block_size
    longest = max(len(p) for p in prompts)
    if block is not None and longest > block:
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
