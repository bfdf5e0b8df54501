"""Decoding from any minipt language model that takes a KV cache.

Greedy, temperature sampling, top-k (Fan et al. 2018), nucleus / top-p (Holtzman et
al. 2020) and beam search with a length penalty (Wu et al. 2016, GNMT:
score = log P / ((5 + |y|) / 6)^alpha). Every step feeds only the new token through the
model and reuses the cached keys and values, so a step costs O(T) instead of O(T^2).
A prompt longer than the context is cropped from the left, with a warning; generation
runs past the context by sliding the window.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ..core.checks import check_positive_int
from ..core.module import eval_mode
from ..ops.softmax import log_softmax_forward
from .prompts import kept_note


@dataclass
class SamplingConfig:
    max_new_tokens: int = 100
    temperature: float = 1.0        # 0 means greedy
    top_k: int | None = None
    top_p: float | None = None
    stop_tokens: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        check_positive_int("max_new_tokens", self.max_new_tokens)
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {self.top_k}")
        if self.top_p is not None and not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")


def filter_logits(logits: np.ndarray, top_k: int | None = None, top_p: float | None = None) -> np.ndarray:
    """logits (V,) -> logits with everything outside the top-k / the nucleus set to -inf.
    The nucleus is the smallest set of most likely tokens whose probability reaches top_p."""
    out = logits.astype(np.float64).copy()
    if top_k is not None and top_k < out.size:
        kth = np.partition(out, -top_k)[-top_k]
        out[out < kth] = -np.inf
    if top_p is not None and top_p < 1.0:
        order = np.argsort(-out)
        p = np.exp(out[order] - out[order[0]])
        p /= p.sum()
        keep = np.cumsum(p) - p < top_p             # keep while the mass before it is < top_p
        out[order[~keep]] = -np.inf
    return out


def length_normalised(logp: float, n: int, alpha: float) -> float:
    """GNMT's length-normalised beam score (Wu et al. 2016): log P / ((5 + n) / 6)^alpha."""
    return logp / ((5 + n) / 6) ** alpha


def _crop(model, prompt: np.ndarray) -> np.ndarray:
    if prompt.ndim != 1 or prompt.size == 0:
        raise ValueError(f"prompt must be a non-empty 1-D array of token ids, got shape {prompt.shape}")
    limit = model.block_size
    if limit is not None and prompt.size > limit:
        warnings.warn(kept_note(limit, prompt.size, context=limit, what="tokens of the prompt", where="last"),
                      stacklevel=3)
        prompt = prompt[-limit:]
    return prompt


class _Window:
    """The tokens the model conditions on while decoding, fed incrementally.

    With a cache (``model.new_cache()``), each step feeds one new token. When the
    context is full (``block_size`` tokens), the window slides: the cache is rebuilt
    from the last ``3/4 * block_size`` tokens, so generation runs past the block size
    (re-encoding once every quarter block). A model without a cache re-reads its
    last ``block_size`` tokens (all of them when unbounded) every step.
    """

    def __init__(self, model, prompt: np.ndarray) -> None:
        self.model, self.ids = model, list(prompt)
        self.block = model.block_size
        self.keep = None if self.block is None else max(1, (3 * self.block) // 4)
        self.cache = None

    def _feed(self, ids: list[int]) -> np.ndarray:
        _, logits = self.model(np.asarray(ids, dtype=np.int64)[None, :], cache=self.cache)
        return logits[0, -1]                                       # (V,)

    def start(self) -> np.ndarray:
        self.cache = self.model.new_cache()
        return self._feed(self.ids) if self.cache is not None else self._reread()

    def _reread(self) -> np.ndarray:
        window = self.ids if self.block is None else self.ids[-self.block:]
        _, logits = self.model(np.asarray(window, dtype=np.int64)[None, :])
        return logits[0, -1]

    def advance(self, tok: int) -> np.ndarray:
        self.ids.append(tok)
        if self.cache is None:
            return self._reread()
        if self.block is not None and self.cache.length >= self.block:   # full: slide the window
            self.cache = self.model.new_cache()
            return self._feed(self.ids[-self.keep:])
        return self._feed([tok])


def generate(model, prompt: np.ndarray, config: SamplingConfig, rng: np.random.Generator) -> np.ndarray:
    """Continue ``prompt`` (T,) by ``max_new_tokens`` tokens, or until a stop token
    (which is included); returns the new ids. Runs past the model's block size by
    sliding the window (``_Window``)."""
    prompt = _crop(model, np.asarray(prompt))
    with eval_mode(model):
        window = _Window(model, prompt)
        logits = window.start()                                    # (V,)
        new = []
        for step in range(config.max_new_tokens):
            if config.temperature == 0:
                tok = int(np.argmax(logits))
            else:
                z = filter_logits(logits / config.temperature, config.top_k, config.top_p)
                p = np.exp(z - z.max())
                tok = int(rng.choice(p.size, p=p / p.sum()))
            new.append(tok)
            if tok in config.stop_tokens or step + 1 == config.max_new_tokens:
                break
            logits = window.advance(tok)
    return np.array(new, dtype=np.int64)


def beam_search(model, prompt: np.ndarray, beam_size: int = 4, max_new_tokens: int = 20,
                length_penalty: float = 0.6, stop_tokens: tuple[int, ...] = ()) -> np.ndarray:
    """Beam search: keep the ``beam_size`` best partial continuations by total log-prob;
    finished ones are ranked by log P / ((5 + n) / 6)^length_penalty. Deterministic.
    Each step reruns the beams over their whole prefix (no cache: beams reorder)."""
    check_positive_int("beam_size", beam_size)
    check_positive_int("max_new_tokens", max_new_tokens)
    prompt = _crop(model, np.asarray(prompt))
    norm = lambda lp, n: length_normalised(lp, n, length_penalty)
    beams = [(0.0, [])]
    finished = []
    with eval_mode(model):
        for _ in range(max_new_tokens):
            if model.block_size is not None and prompt.size + len(beams[0][1]) >= model.block_size:
                break
            seqs = np.array([np.concatenate([prompt, b]) for _, b in beams], dtype=np.int64)  # (beams, T)
            _, logits = model(seqs)
            logp, _ = log_softmax_forward(logits[:, -1].astype(np.float64))   # (beams, V)
            cand = [(lp + logp[i, t], b + [t]) for i, (lp, b) in enumerate(beams)
                    for t in np.argsort(-logp[i])[:beam_size]]
            cand.sort(key=lambda c: -c[0])
            beams = []
            for lp, b in cand:
                (finished if b[-1] in stop_tokens else beams).append((lp, b))
                if len(beams) == beam_size:
                    break
            # stop once no live beam can still beat the best finished one: a live beam's
            # log P only falls, and its length may grow up to max_new_tokens, so its best
            # possible score is the larger of norm(lp, now) and norm(lp, max_new_tokens)
            best_live = max(max(norm(lp, len(b)), norm(lp, max_new_tokens)) for lp, b in beams) if beams else None
            if not beams or (finished and max(norm(lp, len(b)) for lp, b in finished) >= best_live):
                break
    pool = finished + beams
    best = max(pool, key=lambda c: norm(c[0], len(c[1])))
    return np.array(best[1], dtype=np.int64)
