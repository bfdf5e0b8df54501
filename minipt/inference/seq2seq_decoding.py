"""Greedy and beam search for encoder-decoder models (Vaswani et al. 2017, Sec. 6.1:
"beam search with a beam size of 4 and length penalty alpha = 0.6", the penalty of
Wu et al. 2016, GNMT: score = log P / ((5 + |y|) / 6)^alpha).

The source is encoded **once**; each decoder step feeds only the newest target token,
whose self-attention reads the earlier tokens' keys and values from a ``KVCache`` and
whose cross-attention reads the encoder memory's keys and values, projected at the
first step and kept in the same cache (``nn/kv_cache.py``). Beam search reorders the
cache's rows (``KVCache.select``) when beams are re-ranked. ``cache=False`` re-runs the
decoder over the whole prefix at every step instead: the reference the tests hold the
cached path to.

The protocol a model meets to be decoded here (the Transformer, T5 and BART do):

``model.encode(source (B, S)) -> Encoded(memory (B, S, C), mask (B, 1, S) or None)``
    The encoder's final output and which source positions are real.
``model.decode(target_in (B, t), encoded, cache=None) -> logits (B, t, V)``
    The decoder; with a cache, ``target_in`` holds only the new tokens, at positions
    ``cache.length ..``.
``model.new_cache() -> KVCache``; ``model.max_target_len``
    An empty cache with a slot per decoder layer; the longest target the decoder reads.

``start_id`` is what the decoder reads first (the Transformer's and BART's ``<s>`` or
``</s>``, T5's pad) and ``eos_id`` ends a target; outputs hold neither.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..core.checks import check_positive_int
from ..core.module import eval_mode
from ..ops.softmax import log_softmax_forward
from .decoding import length_normalised


class Encoded(NamedTuple):
    """What ``encode`` returns and every decoder step reads."""
    memory: np.ndarray              # (B, S, C) the encoder's final output
    mask: np.ndarray | None         # (B, 1, S) True at real source positions; None: all real

    def select(self, rows: np.ndarray) -> "Encoded":
        """The batch rows ``rows`` (B_new,), in that order (beams)."""
        return Encoded(self.memory[rows], None if self.mask is None else self.mask[rows])


def _max_len(model, max_new_tokens: int | None) -> int:
    limit = model.max_target_len
    if max_new_tokens is None:
        return limit
    check_positive_int("max_new_tokens", max_new_tokens)
    if max_new_tokens > limit:
        raise ValueError(f"max_new_tokens {max_new_tokens} exceeds the decoder's max_target_len {limit}")
    return max_new_tokens


def _source(source, batch: bool) -> np.ndarray:
    source = np.asarray(source)
    want = 2 if batch else 1
    if source.ndim != want or source.shape[-1] == 0 or not np.issubdtype(source.dtype, np.integer):
        raise ValueError(f"source must be a non-empty {'(B, S)' if batch else '(S,)'} array of token ids, "
                         f"got shape {source.shape} dtype {source.dtype}")
    return source


class _Decoder:
    """Next-token log-probabilities for a batch of prefixes, cached or by full re-run."""

    def __init__(self, model, encoded: Encoded, start_id: int, cached: bool):
        self.model, self.encoded, self.cached = model, encoded, cached
        self.cache = model.new_cache() if cached else None
        self.prefix = np.full((encoded.memory.shape[0], 1), start_id, dtype=np.int64)     # (B, t)

    def log_probs(self) -> np.ndarray:
        """-> (B, V) log P(next | prefix, source), in float64."""
        if self.cached:
            logits = self.model.decode(self.prefix[:, -1:], self.encoded, cache=self.cache)  # (B, 1, V)
        else:
            logits = self.model.decode(self.prefix, self.encoded)                           # (B, t, V)
        return log_softmax_forward(logits[:, -1].astype(np.float64))[0]                     # (B, V)

    def advance(self, tokens: np.ndarray, rows: np.ndarray | None = None) -> None:
        """Keep prefixes ``rows`` (all, in order, when None) and append ``tokens`` (B,)."""
        if rows is not None:
            self.prefix, self.encoded = self.prefix[rows], self.encoded.select(rows)
            if self.cache is not None:
                self.cache.select(rows)
        self.prefix = np.concatenate([self.prefix, tokens[:, None]], axis=1)


def greedy(model, source, *, start_id: int, eos_id: int, max_new_tokens: int | None = None,
           cache: bool = True) -> list[list[int]]:
    """source (B, S) (padded as the model expects) -> B outputs, each the argmax token at
    every step up to (not including) ``eos_id`` or ``max_new_tokens`` tokens."""
    source = _source(source, batch=True)
    n = _max_len(model, max_new_tokens)
    with eval_mode(model):
        dec = _Decoder(model, model.encode(source), start_id, cache)
        out = [[] for _ in range(len(source))]
        done = np.zeros(len(source), dtype=bool)
        for step in range(n):
            tok = np.argmax(dec.log_probs(), axis=1)                          # (B,)
            for b in np.flatnonzero(~done):
                if tok[b] == eos_id:
                    done[b] = True
                else:
                    out[b].append(int(tok[b]))
            if done.all() or step + 1 == n:
                break
            dec.advance(np.where(done, eos_id, tok))
    return out


def beam_search(model, source, *, start_id: int, eos_id: int, beam_size: int = 4,
                max_new_tokens: int | None = None, length_penalty: float = 0.6,
                cache: bool = True) -> list[int]:
    """One source (S,) -> the best output by log P / ((5 + n) / 6)^length_penalty, n its
    length with ``eos_id`` counted; ``eos_id`` itself is left out of the result.

    At each step every live beam proposes its ``beam_size`` best next tokens; the best
    ``beam_size`` continuations by total log P stay live, one ending in ``eos_id`` is
    finished instead. The search stops when no live beam can still beat the best
    finished one. With ``beam_size=1`` this is greedy decoding."""
    check_positive_int("beam_size", beam_size)
    source = _source(source, batch=False)
    n = _max_len(model, max_new_tokens)
    score = lambda lp, k: length_normalised(lp, k, length_penalty)
    with eval_mode(model):
        dec = _Decoder(model, model.encode(source[None]), start_id, cache)
        live = [(0.0, [])]                                                    # (log P, tokens), one per row
        finished: list[tuple[float, list[int]]] = []
        for step in range(n):
            logp = dec.log_probs()                                            # (beams, V)
            cand = [(lp + logp[i, t], i, t) for i, (lp, _) in enumerate(live)
                    for t in np.argsort(-logp[i], kind="stable")[:beam_size]]
            cand.sort(key=lambda c: -c[0])                                    # stable: ties keep beam order
            rows, toks, new_live = [], [], []
            for lp, i, t in cand:
                seq = live[i][1] + [int(t)]
                if t == eos_id:
                    finished.append((lp, seq))
                else:
                    new_live.append((lp, seq))
                    rows.append(i)
                    toks.append(t)
                if len(new_live) == beam_size:
                    break
            live = new_live
            # a live beam's log P only falls; its length may grow up to n
            best_live = max((max(score(lp, len(s)), score(lp, n)) for lp, s in live), default=None)
            if not live or step + 1 == n or \
                    (finished and max(score(lp, len(s)) for lp, s in finished) >= best_live):
                break
            dec.advance(np.array(toks, dtype=np.int64), np.array(rows))
    best = max(finished + live, key=lambda c: score(c[0], len(c[1])))[1]
    return best[:-1] if best and best[-1] == eos_id else best
