"""Decoding from any minipt language model that takes a KV cache.

Greedy, temperature sampling, top-k (Fan et al. 2018), nucleus / top-p (Holtzman et
al. 2020) and beam search with a length penalty (Wu et al. 2016, GNMT:
score = log P / ((5 + |y|) / 6)^alpha). Every step feeds only the new token through the
model and reuses the cached keys and values, so a step costs O(T) instead of O(T^2).
A prompt longer than the context is cropped from the left, with a warning.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from .nn.kv_cache import KVCache


@dataclass
class SamplingConfig:
    max_new_tokens: int = 100
    temperature: float = 1.0        # 0 means greedy
    top_k: int | None = None
    top_p: float | None = None
    stop_tokens: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.max_new_tokens <= 0:
            raise ValueError(f"max_new_tokens must be > 0, got {self.max_new_tokens}")
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


def _crop(model, prompt: np.ndarray) -> np.ndarray:
    if prompt.ndim != 1 or prompt.size == 0:
        raise ValueError(f"prompt must be a non-empty 1-D array of token ids, got shape {prompt.shape}")
    limit = model.config.block_size - 1
    if prompt.size > limit:
        warnings.warn(f"prompt of {prompt.size} tokens is longer than the context allows "
                      f"({limit} + 1 new); keeping the last {limit}", stacklevel=3)
        prompt = prompt[-limit:]
    return prompt


def _step_logits(model, ids: np.ndarray, cache: KVCache) -> np.ndarray:
    _, logits = model(ids[None, :] if ids.ndim == 1 else ids, cache=cache)
    return logits[:, -1]                                     # (B, V)


def generate(model, prompt: np.ndarray, config: SamplingConfig, rng: np.random.Generator) -> np.ndarray:
    """Continue ``prompt`` (T,) by up to ``max_new_tokens`` tokens; returns the new ids.
    Stops early at a stop token (which is included) or when the context is full."""
    prompt = _crop(model, np.asarray(prompt))
    was = model.training
    model.eval()
    try:
        cache = KVCache(model.config.n_layer)
        logits = _step_logits(model, prompt, cache)[0]
        new = []
        for _ in range(config.max_new_tokens):
            if config.temperature == 0:
                tok = int(np.argmax(logits))
            else:
                z = filter_logits(logits / config.temperature, config.top_k, config.top_p)
                p = np.exp(z - z.max())
                tok = int(rng.choice(p.size, p=p / p.sum()))
            new.append(tok)
            if tok in config.stop_tokens or cache.length >= model.config.block_size:
                break
            logits = _step_logits(model, np.array([tok]), cache)[0]
    finally:
        model.train(was)
    return np.array(new, dtype=np.int64)


def beam_search(model, prompt: np.ndarray, beam_size: int = 4, max_new_tokens: int = 20,
                length_penalty: float = 0.6, stop_tokens: tuple[int, ...] = ()) -> np.ndarray:
    """Beam search: keep the ``beam_size`` best partial continuations by total log-prob;
    finished ones are ranked by log P / ((5 + n) / 6)^length_penalty. Deterministic.
    Each step reruns the beams over their whole prefix (no cache: beams reorder)."""
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    if max_new_tokens <= 0:
        raise ValueError(f"max_new_tokens must be > 0, got {max_new_tokens}")
    prompt = _crop(model, np.asarray(prompt))
    norm = lambda lp, n: lp / ((5 + n) / 6) ** length_penalty
    beams = [(0.0, [])]
    finished = []
    was = model.training
    model.eval()
    try:
        for _ in range(max_new_tokens):
            if prompt.size + len(beams[0][1]) >= model.config.block_size:
                break
            seqs = np.array([np.concatenate([prompt, b]) for _, b in beams], dtype=np.int64)  # (beams, T)
            _, logits = model(seqs)
            z = logits[:, -1].astype(np.float64)
            logp = z - z.max(1, keepdims=True)
            logp -= np.log(np.exp(logp).sum(1, keepdims=True))        # (beams, V)
            cand = [(lp + logp[i, t], b + [t]) for i, (lp, b) in enumerate(beams)
                    for t in np.argsort(-logp[i])[:beam_size]]
            cand.sort(key=lambda c: -c[0])
            beams = []
            for lp, b in cand:
                (finished if b[-1] in stop_tokens else beams).append((lp, b))
                if len(beams) == beam_size:
                    break
            if not beams or (finished and max(norm(lp, len(b)) for lp, b in finished)
                             >= max(norm(lp, len(b)) for lp, b in beams)):
                break
    finally:
        model.train(was)
    pool = finished + beams
    best = max(pool, key=lambda c: norm(c[0], len(c[1])))
    return np.array(best[1], dtype=np.int64)


def perplexity(mean_nll: float) -> float:
    return math.exp(mean_nll)
