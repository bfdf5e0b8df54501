"""word2vec: CBOW and skip-gram with negative sampling or hierarchical softmax
(Mikolov, Chen, Corrado & Dean 2013a, "Efficient Estimation of Word Representations in
Vector Space"; Mikolov, Sutskever, Chen, Corrado & Dean 2013b, "Distributed
Representations of Words and Phrases and their Compositionality").

- **CBOW** predicts a word from the average of its context's vectors; **skip-gram**
  predicts it from each context word alone (one example per pair; word2vec.c's
  orientation: the context word is the input, the centre word the output).
- **negative sampling**: the target against k words drawn from the unigram distribution
  raised to 3/4, through a table of ``table_size`` entries (2013b, sec. 2.2); a draw
  equal to the target is skipped, as in word2vec.c.
- **hierarchical softmax**: a Huffman tree over the vocabulary by count (2013a, sec.
  3.1), so frequent words have short codes; V-1 inner-node vectors.
- **subsampling** of frequent words (2013b, sec. 2.3, word2vec.c's form): a token of a
  word with frequency f is kept with probability (sqrt(f / t) + 1) t / f, t = ``sample``.
- **dynamic window**: each centre word uses a window drawn uniformly from 1..``window``
  (near words count more on average).
- **learning rate** decaying linearly from ``alpha`` to ``alpha`` 1e-4 over all epochs,
  updated every ``chunk`` words.

The loss and its gradient are ``minipt.ops.word2vec`` (the one op for both output layers);
the inner loop is the Numba kernel ``minipt.kernels.word2vec`` with its NumPy twin. Example
building (windows, subsampling, negative draws) is vectorised NumPy per chunk.

| parameter | shape | what |
|---|---|---|
| ``v_in`` | (V, C) | input vectors: the word vectors (word2vec.c's syn0) |
| ``v_out`` | (V, C) with negative sampling; (V-1, C) with hierarchical softmax | output vectors (syn1neg) or inner-node vectors (syn1) |
"""
from __future__ import annotations

import heapq
import time

import numpy as np

from ...core.checks import check_ids, check_positive_int
from ...core.module import Module
from ...ops.word2vec import word2vec_loss_backward, word2vec_loss_forward, word2vec_sgd
from ..registry import GradcheckCase, ModelEntry, Preset, register


def huffman_tree(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(points (V, L) inner-node ids root-first, -1 padded; codes (V, L) bits) of the Huffman
    tree over ``counts``: merge the two rarest nodes until one is left (Huffman 1952)."""
    V = len(counts)
    if V < 2:
        raise ValueError(f"hierarchical softmax needs a vocabulary of at least 2 words, got {V}")
    heap = [(float(c), i) for i, c in enumerate(counts)]
    heapq.heapify(heap)
    parent, bit = np.zeros(2 * V - 1, np.int64), np.zeros(2 * V - 1, np.int64)
    for node in range(V, 2 * V - 1):
        (c1, a), (c2, b) = heapq.heappop(heap), heapq.heappop(heap)
        parent[a], parent[b], bit[b] = node, node, 1
        heapq.heappush(heap, (c1 + c2, node))
    paths = []
    for w in range(V):
        nodes, codes, x = [], [], w
        while x != 2 * V - 2:
            nodes.append(parent[x] - V)
            codes.append(bit[x])
            x = parent[x]
        paths.append((nodes[::-1], codes[::-1]))
    L = max(len(p) for p, _ in paths)
    points, codes = np.full((V, L), -1, np.int64), np.zeros((V, L), np.int64)
    for w, (p, c) in enumerate(paths):
        points[w, :len(p)], codes[w, :len(c)] = p, c
    return points, codes


class Word2Vec(Module):
    has_backward = True
    block_size = None

    def __init__(self, vocab_size: int, dim: int = 32, arch: str = "skipgram", output: str = "neg",
                 window: int = 5, negative: int = 5, sample: float = 1e-3, alpha: float | None = None,
                 counts=None, table_size: int = 100_000, *, rng: np.random.Generator, dtype=np.float32):
        super().__init__()
        self.V, self.C = check_positive_int("vocab_size", vocab_size), check_positive_int("dim", dim)
        if arch not in ("cbow", "skipgram"):
            raise ValueError(f"arch: expected 'cbow' or 'skipgram', got {arch!r}")
        if output not in ("neg", "hs"):
            raise ValueError(f"output: expected 'neg' (negative sampling) or 'hs' (hierarchical softmax), "
                             f"got {output!r}")
        self.window = check_positive_int("window", window)
        self.negative = check_positive_int("negative", negative) if output == "neg" else int(negative)
        if not sample >= 0:
            raise ValueError(f"sample: expected >= 0 (0 turns subsampling off), got {sample}")
        self.arch, self.output, self.sample_t = arch, output, float(sample)
        self.alpha = float(alpha) if alpha is not None else (0.05 if arch == "cbow" else 0.025)
        if not self.alpha > 0:
            raise ValueError(f"alpha: expected > 0, got {alpha}")
        counts = np.ones(self.V) if counts is None else np.asarray(counts, dtype=np.float64)
        if counts.shape != (self.V,) or (counts < 0).any():
            raise ValueError(f"counts: expected {self.V} non-negative word counts, got shape {counts.shape}")
        self.counts, self.table_size = counts, check_positive_int("table_size", table_size)
        self.add_param("v_in", ((rng.random((self.V, self.C)) - 0.5) / self.C).astype(dtype))   # (V, C)
        rows = self.V if output == "neg" else self.V - 1
        self.add_param("v_out", np.zeros((rows, self.C), dtype))                                # (R, C)
        if output == "hs":
            self.points, self.codes = huffman_tree(counts)                 # (V, L), (V, L)
        p = counts ** 0.75
        cum = np.cumsum(p / p.sum())
        self.table = np.minimum(np.searchsorted(cum, (np.arange(self.table_size) + 0.5) / self.table_size),
                                self.V - 1)                                # unigram^0.75 table
        self._cache = None

    def spec(self) -> dict:
        return {"model": "word2vec", "vocab_size": self.V, "dim": self.C, "arch": self.arch,
                "output": self.output, "window": self.window, "negative": self.negative,
                "sample": self.sample_t, "alpha": self.alpha, "counts": self.counts.tolist(),
                "table_size": self.table_size}

    def new_cache(self):
        return None

    # -- the loss (op pair) -----------------------------------------------------------
    def output_rows(self, target: np.ndarray, negatives: np.ndarray | None):
        """(rows (N, L), labels (N, L)) of the output layer for targets (N,)."""
        if self.output == "hs":
            return self.points[target], (1 - self.codes[target]).astype(self.params["v_in"].dtype)
        if negatives is None:
            raise ValueError("negative sampling needs negatives (N, k): draw them with draw_negatives")
        neg = np.where(negatives == target[:, None], -1, negatives)        # word2vec.c skips the target
        rows = np.concatenate([target[:, None], neg], axis=1)              # (N, 1 + k)
        labels = np.zeros(rows.shape, self.params["v_in"].dtype)
        labels[:, 0] = 1.0
        return rows, labels

    def draw_negatives(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self.table[rng.integers(0, self.table_size, size=(n, self.negative))]   # (N, k)

    def forward(self, ctx: np.ndarray, target: np.ndarray, negatives: np.ndarray | None = None):
        """ctx (N, K) input ids (-1 pads), target (N,) -> mean loss (), scores (N, L)."""
        check_ids("target", target, self.V)
        check_ids("ctx", ctx[ctx >= 0], self.V)
        rows, labels = self.output_rows(target, negatives)
        loss, scores, self._cache = word2vec_loss_forward(self.params["v_in"], self.params["v_out"], ctx, rows,
                                                          labels)
        return loss, scores

    def backward(self, dloss: float = 1.0) -> None:
        dv_in, dv_out = word2vec_loss_backward(dloss, self._cache)
        self.grads["v_in"] += dv_in
        self.grads["v_out"] += dv_out

    # -- training -----------------------------------------------------------------------
    def examples(self, tokens: np.ndarray, seg: np.ndarray, rng: np.random.Generator):
        """(ctx (N, K), target (N,)) from a token chunk with a dynamic window; ``seg`` marks
        sequences (windows never cross them)."""
        n, W = len(tokens), self.window
        eff = W - rng.integers(0, W, size=n)                               # (n,) window in 1..W
        off = np.concatenate([np.arange(-W, 0), np.arange(1, W + 1)])      # (2W,)
        pos = np.arange(n)[:, None] + off[None, :]                         # (n, 2W)
        inside = (pos >= 0) & (pos < n)
        posc = np.clip(pos, 0, n - 1)
        valid = inside & (np.abs(off)[None, :] <= eff[:, None]) & (seg[posc] == seg[:, None])
        if self.arch == "cbow":
            keep = valid.any(axis=1)
            return np.where(valid, tokens[posc], -1)[keep], tokens[keep]
        return tokens[posc][valid][:, None], np.repeat(tokens, valid.sum(axis=1))

    def subsample(self, tokens: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Mask of tokens kept by word2vec.c's subsampling rule."""
        if not self.sample_t:
            return np.ones(len(tokens), bool)
        f = self.counts / self.counts.sum()
        t = self.sample_t
        with np.errstate(divide="ignore"):
            keep_p = (np.sqrt(f / t) + 1.0) * t / f                         # (V,)
        return rng.random(len(tokens)) < keep_p[tokens]

    def fit(self, sequences, epochs: int = 1, *, rng: np.random.Generator, chunk: int = 10_000,
            progress: bool = False, compute_loss: bool = False) -> dict:
        """Train on a list of id sequences (sentences or documents); returns words/s and, with
        ``compute_loss``, the mean loss per example (the sum costs a third of the kernel's time)."""
        seqs = [sequences] if isinstance(sequences, np.ndarray) else list(sequences)
        tokens = np.concatenate([np.asarray(s, np.int64) for s in seqs]) if seqs else np.zeros(0, np.int64)
        if tokens.size < 2:
            raise ValueError(f"fit: the corpus has {tokens.size} token(s); word2vec needs at least 2")
        check_ids("corpus", tokens, self.V)
        seg = np.repeat(np.arange(len(seqs)), [len(s) for s in seqs])
        epochs = check_positive_int("epochs", epochs)
        total, done, loss_sum, n_ex = epochs * len(tokens), 0, 0.0, 0
        v_in, v_out = self.params["v_in"], self.params["v_out"]
        bar = None
        if progress:
            from tqdm import tqdm
            bar = tqdm(total=total, unit="word", desc=f"word2vec {self.arch}/{self.output}")
        t0 = time.perf_counter()
        for _ in range(epochs):
            for s in range(0, len(tokens), chunk):
                tok, sg = tokens[s:s + chunk], seg[s:s + chunk]
                lr = self.alpha * max(1.0 - done / (total + 1), 1e-4)
                keep = self.subsample(tok, rng)
                ctx, target = self.examples(tok[keep], sg[keep], rng)
                if len(target):
                    rows, labels = self.output_rows(target, self.draw_negatives(len(target), rng)
                                                    if self.output == "neg" else None)
                    loss_sum += word2vec_sgd(v_in, v_out, ctx, rows, labels, lr, compute_loss)
                    n_ex += len(target)
                done += len(tok)
                if bar is not None:
                    bar.update(len(tok))
        seconds = time.perf_counter() - t0
        if bar is not None:
            bar.close()
        return {"words_per_second": total / seconds, "seconds": seconds,
                "loss": loss_sum / max(n_ex, 1) if compute_loss else None,
                "examples": n_ex}

    def vectors(self) -> np.ndarray:
        return self.params["v_in"]


def build(*, rng: np.random.Generator, dtype=np.float32, **settings) -> Word2Vec:
    return Word2Vec(rng=rng, dtype=dtype, **settings)


def tiny_variant(arch: str, output: str) -> tuple[Word2Vec, tuple]:
    """A small float64 model with random output vectors and one batch, for gradchecks."""
    rng = np.random.default_rng(0)
    V = 11
    model = Word2Vec(V, dim=6, arch=arch, output=output, window=2, negative=3,
                     counts=rng.integers(1, 50, size=V), rng=rng, dtype=np.float64)
    model.params["v_in"][...] = rng.normal(0, 0.5, model.params["v_in"].shape)
    model.params["v_out"][...] = rng.normal(0, 0.5, model.params["v_out"].shape)
    K = 4 if arch == "cbow" else 1
    ctx = rng.integers(0, V, size=(5, K))
    if arch == "cbow":
        ctx[0, 2:] = -1
    target = rng.integers(0, V, size=5)
    negatives = model.draw_negatives(5, rng) if output == "neg" else None
    return model, (ctx, target, negatives)


def _variant_check(arch: str, output: str):
    def run():
        from ...core.gradcheck import check_module
        model, batch = tiny_variant(arch, output)
        return check_module(model, *batch, select=lambda out: out[0])
    return GradcheckCase(f"word2vec {arch} + {output}", "V11 C6, 5 examples", run)


register(ModelEntry(
    name="word2vec", title="word2vec", paper="Mikolov et al. 2013a, Efficient Estimation of Word "
    "Representations in Vector Space; Mikolov et al. 2013b, Distributed Representations of Words and Phrases",
    objective="skip-gram / CBOW, negative sampling / hierarchical softmax", build=build,
    tiny=lambda: tiny_variant("skipgram", "neg"), lesson="06_word_vectors", language_model=False,
    presets={"toy": Preset(model=dict(dim=32, arch="skipgram", output="neg", window=4, negative=5, sample=1e-3),
                           train=dict(epochs=5), data=dict(n_words=300_000),
                           expected="analogies 0.50 of 32 (PPMI+SVD 0.59), category gap 0.28, purity 0.91")},
    gradchecks=tuple(_variant_check(a, o) for a, o in (("skipgram", "hs"), ("cbow", "neg"), ("cbow", "hs"))),
    recipe="minipt.recipes.classic.vectors_recipe"))
