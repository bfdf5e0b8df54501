"""Permutation language modelling (XLNet, Yang et al. 2019) and GLM's autoregressive
blank infilling (Du et al. 2022).

XLNet samples a factorisation order z; with rank[i] the position of token i in z, the
content stream of i may attend j when rank[j] <= rank[i], the query stream when
rank[j] < rank[i] (it must not see its own token). Only the last 1/K of the order is
predicted.

GLM removes spans (lengths ~ Poisson(3), about 15 % of the tokens, placed uniformly at
random and apart, ``spans.place_spans``): Part A is the text
with one [MASK] per span, seen bidirectionally; Part B is the spans in random order,
each as [START] span and predicting span [END], causally, seeing all of Part A. 2-D
positions: the first is the position in Part A (for Part B tokens, the position of their
span's [MASK]); the second is the position inside the span (0 in Part A).
"""
from __future__ import annotations

import numpy as np

from ..core.checks import check_positive_int
from .common import IGNORE, check_ids_array, check_probability
from .spans import place_spans


def permutation_lm(ids, rng: np.random.Generator, K: int = 6):
    """ids (T,) -> dict(order, content_mask, query_mask, targets) for XLNet."""
    ids = check_ids_array("ids", ids, 1)
    check_positive_int("K", K)
    T = len(ids)
    order = rng.permutation(T)                           # z: order[r] is the r-th predicted position
    content, query = order_masks(order)
    rank = np.empty(T, dtype=np.int64)
    rank[order] = np.arange(T)
    n_predict = max(1, T // K)
    targets = np.where(rank >= T - n_predict, ids, IGNORE)
    return {"order": order, "content_mask": content, "query_mask": query, "targets": targets}


def order_masks(order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """order (..., T), each row a permutation z of 0..T-1 -> content, query masks (..., T, T):
    row i may see column j when rank[j] <= rank[i] (content) or rank[j] < rank[i] (query)."""
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(order.shape[-1]), order.shape), axis=-1)
    return rank[..., None, :] <= rank[..., :, None], rank[..., None, :] < rank[..., :, None]


def blank_lengths(T: int, rng: np.random.Generator, ratio: float = 0.15, poisson_lambda: float = 3.0
                  ) -> np.ndarray:
    """GLM's span lengths for T tokens: Poisson(lambda) draws of at least 1 (GLM samples
    the Poisson weights of 1, 2, ...: zeros redrawn) until they cover round(ratio * T)
    tokens or more (at least one); the last ones cut only where the spans, one token
    apart, would leave Part A no token of the text (short or heavily masked texts)."""
    budget = max(1, int(round(T * ratio)))
    lengths: list[int] = []
    while sum(lengths) < budget:
        n = 0
        while n == 0:
            n = int(rng.poisson(poisson_lambda))
        lengths.append(n)
    while sum(lengths) + len(lengths) > T:        # k spans and k - 1 gaps must leave a token of the text
        excess = sum(lengths) + len(lengths) - T
        if lengths[-1] > excess:
            lengths[-1] -= excess
        else:
            lengths.pop()
    return rng.permutation(np.array(lengths, dtype=np.int64))     # the cut one not always the last placed


def glm_blank_infilling(ids, rng: np.random.Generator, *, mask_id: int, start_id: int, end_id: int,
                        ratio: float = 0.15, poisson_lambda: float = 3.0):
    """ids (T,) -> dict(ids, positions (2, N), targets, mask (N, N), n_a)."""
    ids = check_ids_array("ids", ids, 1)
    T = len(ids)
    if T < 2:
        raise ValueError(f"GLM blank infilling needs at least 2 tokens, got {T}")
    check_probability("ratio", ratio)
    lengths = blank_lengths(T, rng, ratio, poisson_lambda)
    spans = [(int(s), int(s) + int(n)) for s, n in zip(place_spans(lengths, T, rng, min_gap=1), lengths)]
    spans.sort()
    part_a, mask_pos = [], {}
    i = 0
    while i < T:
        hit = next((s for s in spans if s[0] == i), None)
        if hit:
            mask_pos[hit] = len(part_a)
            part_a.append(mask_id)
            i = hit[1]
        else:
            part_a.append(ids[i])
            i += 1
    n_a = len(part_a)
    b_ids, b_tgt, b_pos1, b_pos2, b_span = [], [], [], [], []
    for k in rng.permutation(len(spans)):
        s, e = spans[k]
        piece = ids[s:e].tolist()
        b_ids += [start_id] + piece
        b_tgt += piece + [end_id]
        b_pos1 += [mask_pos[spans[k]]] * (len(piece) + 1)
        b_pos2 += list(range(1, len(piece) + 2))
        b_span += [k] * (len(piece) + 1)
    N = n_a + len(b_ids)
    mask = np.zeros((N, N), dtype=bool)
    mask[:, :n_a] = True                                          # everyone sees Part A
    mask[n_a:, n_a:] = np.tril(np.ones((N - n_a, N - n_a), dtype=bool))   # Part B: causal
    return {"ids": np.array(part_a + b_ids, dtype=np.int64),
            "positions": np.array([list(range(n_a)) + b_pos1, [0] * n_a + b_pos2], dtype=np.int64),
            "targets": np.array([IGNORE] * n_a + b_tgt, dtype=np.int64), "mask": mask, "n_a": n_a}
