"""DialoGPT's training inputs (Zhang et al. 2020, "DIALOGPT: Large-Scale Generative
Pre-training for Conversational Response Generation", ACL system demonstrations).

DialoGPT is GPT-2 trained on dialogue sessions. A session's turns are concatenated
into one long text x_1 ... x_N, each turn closed by ``<|endoftext|>``. With the
dialogue history as source S = x_1 ... x_m and the next turn as target
T = x_{m+1} ... x_N, the model is trained on

    p(T | S) = prod_{n = m+1}^{N} p(x_n | x_1, ..., x_{n-1}),

so the loss counts only the response tokens (and the separator that closes the
response); the history is read, never predicted. The *backward* model of the paper's
MMI re-ranking is the same network trained on P(S | T): the response comes first and
the history turns follow in reverse order (most recent turn first), and the loss counts
only the history. Per example, with ``|`` the separator ``<|endoftext|>``::

    forward   h_1 | h_2 | ... | h_m | r |      targets on "r |"
    backward  r | h_m | ... | h_2 | h_1 |      targets on "h_m | ... | h_1 |"

Inputs are x = seq[:-1] and targets y = seq[1:], with IGNORE (-100) wherever the next
token belongs to the conditioning side. Batches are right-padded with ``<pad>`` (a causal
model never looks right, so padding changes nothing before it) and padded targets are
IGNORE. A session of N turns gives N - 1 examples, one per response.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..core.checks import check_positive_int
from ..tokenizers.special import ENDOFTEXT
from .common import IGNORE

PAD = "<pad>"
DIRECTIONS = ("forward", "backward")


# -- sessions as token ids ----------------------------------------------------------
def encode_session(turns: Sequence[str], tokenizer) -> list[np.ndarray]:
    """A session (list of turn strings) -> one (T_i,) int64 array per turn.
    Every turn must be non-empty and must not contain the separator itself."""
    if isinstance(turns, str) or not isinstance(turns, Sequence):
        raise TypeError(f"a session is a list of turn strings, got {type(turns).__name__}")
    if len(turns) == 0:
        raise ValueError("empty session: a session needs at least one turn")
    eot = tokenizer.token_to_id(ENDOFTEXT)
    out = []
    for i, turn in enumerate(turns):
        if not isinstance(turn, str):
            raise TypeError(f"turn {i}: expected a str, got {type(turn).__name__}")
        ids = np.asarray(tokenizer.encode(turn), dtype=np.int64)             # (T_i,)
        if ids.size == 0:
            raise ValueError(f"turn {i} is empty ({turn!r}): every turn needs at least one token")
        if np.any(ids == eot):
            raise ValueError(f"turn {i} contains the separator {ENDOFTEXT}: {turn!r}")
        out.append(ids)
    return out


def session_pairs(turn_ids: Sequence[np.ndarray], max_history: int | None = None
                  ) -> list[tuple[list[np.ndarray], np.ndarray]]:
    """Turns t_1 ... t_N -> [(history, response)]: for m = 1 .. N-1 the history t_1 .. t_m
    (at most the last ``max_history`` turns) and the response t_{m+1}."""
    if len(turn_ids) < 2:
        raise ValueError(f"a session with {len(turn_ids)} turn(s) has no response: "
                         "a (history, response) pair needs at least 2 turns")
    if max_history is not None and max_history < 1:
        raise ValueError(f"max_history must be >= 1, got {max_history}")
    first = lambda m: 0 if max_history is None else max(0, m - max_history)
    return [(list(turn_ids[first(m):m]), turn_ids[m]) for m in range(1, len(turn_ids))]


def _check_history(history: Sequence[np.ndarray], response: np.ndarray) -> None:
    if len(history) == 0:
        raise ValueError("empty history: a response needs at least one earlier turn")
    for i, h in enumerate(history):
        if np.asarray(h).ndim != 1 or len(h) == 0:
            raise ValueError(f"history turn {i}: expected a non-empty 1-D array of ids, got shape {np.shape(h)}")
    if np.asarray(response).ndim != 1:
        raise ValueError(f"response: expected a 1-D array of ids, got shape {np.shape(response)}")


def context_ids(history: Sequence[np.ndarray], eot_id: int) -> np.ndarray:
    """The forward model's prompt: ``h_1 | h_2 | ... | h_m |`` (T,)."""
    _check_history(history, np.zeros(0, np.int64))
    return np.concatenate([np.append(np.asarray(h, np.int64), eot_id) for h in history])


def _fit(history: Sequence[np.ndarray], response: np.ndarray, max_len: int | None) -> list[np.ndarray]:
    """Drop the oldest history turns until the sequence (minus its last token) fits in
    ``max_len`` positions, as DialoGPT truncates long sessions."""
    history = list(history)
    if max_len is None:
        return history
    size = lambda h: sum(len(t) + 1 for t in h) + len(response)           # len(seq) - 1 = len(x)
    while len(history) > 1 and size(history) > max_len:
        history.pop(0)
    if size(history) > max_len:
        raise ValueError(f"the response ({len(response)} tokens) and its last history turn "
                         f"({len(history[0])} tokens) do not fit in max_len={max_len}")
    return history


def _shift(seq: np.ndarray, first_target: int) -> tuple[np.ndarray, np.ndarray]:
    """seq (L,) -> x = seq[:-1] (L-1,), y = seq[1:] with IGNORE before seq[first_target]."""
    x, y = seq[:-1].copy(), seq[1:].copy()
    y[: first_target - 1] = IGNORE                       # y[i] = seq[i+1] is a target iff i+1 >= first_target
    return x, y


def forward_example(history: Sequence[np.ndarray], response: np.ndarray, eot_id: int,
                    max_len: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``h_1 | ... | h_m | r |`` -> x, y (L-1,), targets only on ``r |`` (p(T | S))."""
    _check_history(history, response)
    history = _fit(history, response, max_len)
    source = context_ids(history, eot_id)                                     # (S,)
    seq = np.concatenate([source, np.asarray(response, np.int64), [eot_id]])  # (S + R + 1,)
    return _shift(seq, len(source))


def backward_example(history: Sequence[np.ndarray], response: np.ndarray, eot_id: int,
                     max_len: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``r | h_m | ... | h_1 |`` -> x, y (L-1,), targets only on the reversed history
    (p(S | T), the backward model of MMI)."""
    _check_history(history, response)
    history = _fit(history, response, max_len)
    target = np.append(np.asarray(response, np.int64), eot_id)                # (R + 1,)
    seq = np.concatenate([target, context_ids(history[::-1], eot_id)])        # (R + 1 + S,)
    return _shift(seq, len(target))


def pad_batch(examples: Sequence[tuple[np.ndarray, np.ndarray]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """[(x, y)] of lengths L_b -> x (B, T) padded with ``pad_id``, y (B, T) padded with
    IGNORE, T = max L_b (right padding)."""
    if len(examples) == 0:
        raise ValueError("pad_batch: no examples")
    T = max(len(x) for x, _ in examples)
    X = np.full((len(examples), T), pad_id, dtype=np.int64)                   # (B, T)
    Y = np.full((len(examples), T), IGNORE, dtype=np.int64)                   # (B, T)
    for b, (x, y) in enumerate(examples):
        if len(x) != len(y):
            raise ValueError(f"example {b}: x has {len(x)} tokens but y has {len(y)}")
        X[b, :len(x)], Y[b, :len(y)] = x, y
    return X, Y


def dialogue_examples(sessions: Sequence[Sequence[str]], tokenizer, direction: str = "forward",
                      max_len: int | None = None, max_history: int | None = None
                      ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every (history, response) pair of every session as one (x, y) example, for the
    forward model p(T | S) or the backward model p(S | T)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    if len(sessions) == 0:
        raise ValueError("no sessions")
    make = forward_example if direction == "forward" else backward_example
    eot = tokenizer.token_to_id(ENDOFTEXT)
    out = []
    for turns in sessions:
        for history, response in session_pairs(encode_session(turns, tokenizer), max_history):
            out.append(make(history, response, eot, max_len))
    return out


class DialogueBatches:
    """Random batches of dialogue examples, with ``get_batch(split, rng) -> (x, y)`` for
    ``minipt.train.train``: x (B, T) ids, y (B, T) next tokens or IGNORE."""

    def __init__(self, train: Sequence[tuple[np.ndarray, np.ndarray]],
                 val: Sequence[tuple[np.ndarray, np.ndarray]], batch_size: int, pad_id: int):
        check_positive_int("batch_size", batch_size)
        for name, split in (("train", train), ("val", val)):
            if len(split) == 0:
                raise ValueError(f"the {name} split has no examples")
        self.splits = {"train": list(train), "val": list(val)}
        self.batch_size, self.pad_id = batch_size, pad_id

    @classmethod
    def from_sessions(cls, train: Sequence[Sequence[str]], val: Sequence[Sequence[str]], tokenizer,
                      direction: str = "forward", batch_size: int = 32, max_len: int | None = None,
                      max_history: int | None = None) -> "DialogueBatches":
        make = lambda s: dialogue_examples(s, tokenizer, direction, max_len, max_history)
        return cls(make(train), make(val), batch_size, tokenizer.token_to_id(PAD))

    def get_batch(self, split: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        if split not in self.splits:
            raise KeyError(f"split must be one of {sorted(self.splits)}, got {split!r}")
        data = self.splits[split]
        pick = rng.integers(0, len(data), size=self.batch_size)                # (B,)
        return pad_batch([data[i] for i in pick], self.pad_id)               # (B, T), (B, T)
