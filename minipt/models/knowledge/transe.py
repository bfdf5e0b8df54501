"""TransE: relations as translations between entity embeddings (Bordes, Usunier,
Garcia-Duran, Weston & Yakhnenko 2013, "Translating Embeddings for Modeling
Multi-relational Data").

A fact (h, r, t) should satisfy e_h + l_r ~ e_t. The dissimilarity is the L1 or L2
norm d(h, r, t) = ||e_h + l_r - e_t||, and training minimises the margin ranking loss
over each fact and a corrupted copy (head or tail replaced by a random entity):

    L = mean over pairs of max(0, gamma + d(h, r, t) - d(h', r, t'))

with entity vectors renormalised to unit length before every step (Algorithm 1), so
that the loss cannot be lowered by growing them. ERNIE (Zhang et al. 2019) takes its
entity embeddings from TransE trained on the knowledge graph; ``models/knowledge/
ernie.py`` reads ``entity`` from here.

| parameter | shape | what |
|---|---|---|
| ``entity`` | (E, K) | entity embeddings e |
| ``relation`` | (R, K) | relation translations l |
"""
from __future__ import annotations

import numpy as np

from ...core.checks import check_ids, check_positive_int
from ...core.module import Module
from ..registry import ModelEntry, register


def transe_forward(entity, relation, h, r, t, norm: int):
    """Ids (N,) -> d (N,) = ||e_h + l_r - e_t||_norm and the cache."""
    diff = entity[h] + relation[r] - entity[t]                             # (N, K)
    if norm == 1:
        d = np.abs(diff).sum(1)                                            # (N,)
    else:
        d = np.sqrt((diff * diff).sum(1))                                  # (N,)
    return d, (diff, d, h, r, t, norm)


def transe_backward(dd, cache, n_entities: int, n_relations: int):
    """dd (N,) -> d entity (E, K), d relation (R, K)."""
    diff, d, h, r, t, norm = cache
    if norm == 1:
        g = dd[:, None] * np.sign(diff)                                    # (N, K)
    else:
        g = dd[:, None] * diff / np.maximum(d, 1e-12)[:, None]             # (N, K)
    dE = np.zeros((n_entities, diff.shape[1]), diff.dtype)
    dR = np.zeros((n_relations, diff.shape[1]), diff.dtype)
    np.add.at(dE, h, g)
    np.add.at(dE, t, -g)
    np.add.at(dR, r, g)
    return dE, dR


def corrupt(triples: np.ndarray, n_entities: int, rng: np.random.Generator) -> np.ndarray:
    """(N, 3) facts -> (N, 3) copies with the head or the tail (even odds) replaced by a
    uniformly drawn entity (the paper's "unif" sampling)."""
    out = np.array(triples, np.int64, copy=True)
    which = np.where(rng.random(len(out)) < 0.5, 0, 2)                     # (N,) column to replace
    out[np.arange(len(out)), which] = rng.integers(0, n_entities, len(out))
    return out


class TransE(Module):
    has_backward = True
    block_size = None

    def __init__(self, n_entities: int, n_relations: int, dim: int = 16, margin: float = 1.0, norm: int = 1, *,
                 rng: np.random.Generator, dtype=np.float32):
        super().__init__()
        self.E, self.R = check_positive_int("n_entities", n_entities), check_positive_int("n_relations", n_relations)
        self.K = check_positive_int("dim", dim)
        if norm not in (1, 2):
            raise ValueError(f"norm must be 1 or 2 (the L1 or L2 dissimilarity), got {norm!r}")
        if not margin > 0:
            raise ValueError(f"margin must be > 0, got {margin}")
        self.margin, self.norm = float(margin), int(norm)
        bound = 6.0 / np.sqrt(dim)                                         # the paper's uniform init
        rel = rng.uniform(-bound, bound, (n_relations, dim))
        self.add_param("entity", rng.uniform(-bound, bound, (n_entities, dim)).astype(dtype))     # (E, K)
        self.add_param("relation", (rel / np.linalg.norm(rel, axis=1, keepdims=True)).astype(dtype))  # (R, K)
        self._cache = None

    def spec(self) -> dict:
        return {"model": "transe", "n_entities": self.E, "n_relations": self.R, "dim": self.K,
                "margin": self.margin, "norm": self.norm}

    def new_cache(self):
        return None

    def _check(self, triples: np.ndarray, name: str) -> np.ndarray:
        triples = np.asarray(triples)
        if triples.ndim != 2 or triples.shape[1] != 3:
            raise ValueError(f"{name}: expected (N, 3) (head, relation, tail) ids, got shape {triples.shape}")
        check_ids(f"{name} entity ids", triples[:, [0, 2]], self.E)
        check_ids(f"{name} relation ids", triples[:, 1], self.R)
        return triples.astype(np.int64)

    def distance(self, triples: np.ndarray) -> np.ndarray:
        """(N, 3) -> d (N,), no cache kept: for ranking and evaluation."""
        triples = self._check(triples, "triples")
        return transe_forward(self.params["entity"], self.params["relation"], *triples.T, self.norm)[0]

    def forward(self, positive: np.ndarray, negative: np.ndarray):
        """positive, negative (N, 3) -> loss (), margins gamma + d(pos) - d(neg) (N,)."""
        positive, negative = self._check(positive, "positive"), self._check(negative, "negative")
        if positive.shape != negative.shape:
            raise ValueError(f"positive {positive.shape} and negative {negative.shape} must pair up row by row")
        E, R = self.params["entity"], self.params["relation"]
        d_pos, c_pos = transe_forward(E, R, *positive.T, self.norm)        # (N,)
        d_neg, c_neg = transe_forward(E, R, *negative.T, self.norm)        # (N,)
        margins = self.margin + d_pos - d_neg                              # (N,)
        active = margins > 0                                               # (N,)
        loss = np.asarray(np.where(active, margins, 0).mean(), dtype=E.dtype)
        self._cache = (c_pos, c_neg, active)
        return loss, margins

    def backward(self, dloss: float = 1.0) -> None:
        c_pos, c_neg, active = self._cache
        dd = float(dloss) * active.astype(self.params["entity"].dtype) / len(active)     # (N,)
        for sign, cache in ((1.0, c_pos), (-1.0, c_neg)):
            dE, dR = transe_backward(sign * dd, cache, self.E, self.R)
            self.grads["entity"] += dE
            self.grads["relation"] += dR

    def normalise_entities(self) -> None:
        """e <- e / ||e||_2 for every entity (Algorithm 1, line 5)."""
        e = self.params["entity"]
        e /= np.linalg.norm(e, axis=1, keepdims=True)

    def fit(self, triples: np.ndarray, epochs: int = 150, lr: float = 0.05, batch_size: int = 16, *,
            rng: np.random.Generator) -> list[float]:
        """Algorithm 1: SGD over mini-batches of facts with fresh corruptions; returns the
        mean loss per epoch."""
        triples = self._check(triples, "triples")
        history = []
        for _ in range(check_positive_int("epochs", epochs)):
            order, total = rng.permutation(len(triples)), 0.0
            for s in range(0, len(triples), batch_size):
                pos = triples[order[s:s + batch_size]]
                self.normalise_entities()
                self.zero_grad()
                loss, _ = self.forward(pos, corrupt(pos, self.E, rng))
                self.backward()
                for name in self.params:
                    self.params[name] -= lr * self.grads[name]
                total += float(loss) * len(pos)
            history.append(total / len(triples))
        self.normalise_entities()
        return history

    def rank_tails(self, triples: np.ndarray) -> np.ndarray:
        """The raw rank (1 = best) of each true tail among all entities, by distance."""
        triples = self._check(triples, "triples")
        E, R = self.params["entity"], self.params["relation"]
        diff = (E[triples[:, 0]] + R[triples[:, 1]])[:, None, :] - E[None, :, :]      # (N, E, K)
        d = np.abs(diff).sum(-1) if self.norm == 1 else np.sqrt((diff * diff).sum(-1))  # (N, E)
        true = d[np.arange(len(triples)), triples[:, 2]]                   # (N,)
        return 1 + (d < true[:, None]).sum(1)


def build(*, rng: np.random.Generator, dtype=np.float32, **settings) -> TransE:
    return TransE(rng=rng, dtype=dtype, **settings)


def tiny() -> tuple[TransE, tuple]:
    """Float64, L2, margin large enough that every pair is active (a smooth loss)."""
    rng = np.random.default_rng(0)
    model = TransE(7, 3, dim=5, margin=10.0, norm=2, rng=rng, dtype=np.float64)
    pos = np.stack([rng.integers(0, 7, 6), rng.integers(0, 3, 6), rng.integers(0, 7, 6)], 1)
    return model, (pos, corrupt(pos, 7, rng))


register(ModelEntry(
    name="transe", title="TransE", paper="Bordes et al. 2013, Translating Embeddings for Modeling "
    "Multi-relational Data", objective="margin ranking of facts against corrupted facts", build=build, tiny=tiny,
    lesson="25_knowledge", language_model=False,
    no_preset="entity vectors for ERNIE, trained inside `minipt train ernie` (and lesson 25)"))
