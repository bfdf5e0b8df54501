"""n-gram language models: maximum likelihood, add-k, interpolated Kneser-Ney, and
absolute-discount back-off, with counting vectorised in NumPy.

An n-gram model predicts a token from the n-1 before it: P(w | h), h = w_{t-n+1..t-1}.
- **MLE**: c(h w) / c(h); an unseen context falls to its longest seen suffix.
- **add-k** (Lidstone; add-one is Laplace): (c(h w) + k) / (c(h) + k V).
- **interpolated Kneser-Ney** (Kneser & Ney 1995; the interpolated form of Chen &
  Goodman 1998, "An Empirical Study of Smoothing Techniques for Language Modeling"):

      P(w | h) = max(c(h w) - D, 0) / c(h) + D N1+(h .) / c(h) * P(w | h'),

  h' the context without its oldest token. The highest order uses raw counts c; every
  lower order uses *continuation* counts c(h w) := N1+(. h w), the number of distinct
  tokens seen before h w ("Francisco" is frequent but follows only "San", so it gets
  little lower-order mass). The recursion ends in the uniform 1 / V. The discount of
  each order defaults to D = n1 / (n1 + 2 n2) (Ney, Essen & Kneser 1994; n_r the number
  of n-grams counted r times).
- **absolute-discount back-off** (Katz 1987's scheme with a fixed discount, Ney et al.
  1994): a seen n-gram gets (c(h w) - D) / c(h); an unseen one alpha(h) P_bo(w | h'),
  alpha(h) chosen so that the distribution sums to one.

``nltk=True`` reproduces ``nltk.lm.KneserNeyInterpolated``'s conventions instead: one
discount (0.1) for every order, the lowest order N1+(. w) / N1+(. .) with no uniform
floor, gamma = D N1+(h .) / (sum of continuation counts) at the middle orders (raw types
over continuation counts, so its distributions need not sum to one), and an unseen
context passed straight to the shorter one.

Counting: an m-gram is one int64 key (base-V digits); ``np.unique`` counts them,
``searchsorted`` looks them up, and sorted keys put all m-grams of one context in a run.
Sequences given to ``fit`` are counted separately (no n-gram spans two of them).

Padding convention (``NGramVocab.pad``): a sentence becomes n-1 ``<s>`` + words + one
``</s>``; perplexity predicts the words and that one ``</s>``, never ``<s>``. On the toy
language's stream the newline ends documents, so no padding is needed; a window's first
positions (fewer than n-1 tokens of history) use the orders their history allows.

| parameter | shape | what |
|---|---|---|
| (none) | | counts live in ``self.tables`` (per order: sorted keys, counts, context totals); ``has_backward`` is False |
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from ...core.checks import check_ids, check_positive_int
from ...core.module import Module
from ..protocol import IGNORE, no_backward
from ..registry import ModelEntry, Preset, register

SMOOTHINGS = ("mle", "addk", "kn", "backoff")


class NGramVocab:
    """Words seen at least ``min_count`` times, plus ``<unk>``, ``<s>`` and ``</s>``."""
    UNK, BOS, EOS = "<unk>", "<s>", "</s>"

    def __init__(self, sentences: list[list[str]], min_count: int = 1):
        check_positive_int("min_count", min_count)
        counts = Counter(w for s in sentences for w in s)
        if not counts:
            raise ValueError("NGramVocab: the corpus is empty; expected at least one word")
        self.words = [self.UNK, self.BOS, self.EOS] + sorted(w for w, c in counts.items() if c >= min_count
                                                            and w not in (self.UNK, self.BOS, self.EOS))
        self.index = {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, words: list[str], *, unk: bool = True) -> np.ndarray:
        """Ids of ``words``; an unknown word becomes ``<unk>``, or raises with ``unk=False``."""
        if not unk:
            missing = [w for w in words if w not in self.index]
            if missing:
                raise KeyError(f"word {missing[0]!r} is not in the vocabulary ({len(self)} words)")
        u = self.index[self.UNK]
        return np.array([self.index.get(w, u) for w in words], dtype=np.int64)

    def pad(self, ids: np.ndarray, order: int, n_end: int = 1) -> np.ndarray:
        """order-1 ``<s>`` + ids + n_end ``</s>`` (NLTK's ``pad_both_ends`` is n_end = order-1)."""
        bos, eos = self.index[self.BOS], self.index[self.EOS]
        return np.concatenate([np.full(order - 1, bos), ids, np.full(n_end, eos)]).astype(np.int64)


def _keys(grams: np.ndarray, V: int) -> np.ndarray:
    """(N, m) ids -> (N,) int64 keys, the m-gram read as a base-V number."""
    keys = np.zeros(len(grams), dtype=np.int64)
    for i in range(grams.shape[1]):
        keys = keys * V + grams[:, i]
    return keys


def _lookup(sorted_keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """values[k] where query == sorted_keys[k], else 0."""
    pos = np.minimum(np.searchsorted(sorted_keys, query), max(len(sorted_keys) - 1, 0))
    found = (sorted_keys[pos] == query) if len(sorted_keys) else np.zeros(len(query), bool)
    return np.where(found, values[pos] if len(values) else 0, 0)


def _discount(counts: np.ndarray) -> float:
    n1, n2 = int(np.sum(counts == 1)), int(np.sum(counts == 2))
    return n1 / (n1 + 2 * n2) if n1 and n2 else 0.5


class NGramLM(Module):
    has_backward = False
    block_size = None

    def __init__(self, vocab_size: int, order: int = 3, smoothing: str = "kn", k: float = 1.0,
                 discount: float | None = None, nltk: bool = False, *, rng=None, dtype=np.float64):
        super().__init__()
        self.V, self.n = check_positive_int("vocab_size", vocab_size), check_positive_int("order", order)
        if smoothing not in SMOOTHINGS:
            raise ValueError(f"smoothing: expected one of {SMOOTHINGS}, got {smoothing!r}")
        if not k > 0:
            raise ValueError(f"k: expected > 0 (add-k), got {k}")
        if discount is not None and not 0 < discount <= 1:
            raise ValueError(f"discount: expected in (0, 1], got {discount}")
        if nltk and smoothing != "kn":
            raise ValueError(f"nltk=True reproduces NLTK's Kneser-Ney only, got smoothing {smoothing!r}")
        if float(self.V) ** self.n >= 2.0 ** 62:
            raise ValueError(f"order {self.n} over a vocabulary of {self.V} does not fit int64 keys")
        self.smoothing, self.k, self.nltk = smoothing, float(k), bool(nltk)
        self.discount_setting = 0.1 if (nltk and discount is None) else discount
        self.dtype_ = np.dtype(dtype)
        self.tables: list[dict] | None = None

    def spec(self) -> dict:
        return {"model": "ngram", "vocab_size": self.V, "order": self.n, "smoothing": self.smoothing,
                "k": self.k, "discount": self.discount_setting, "nltk": self.nltk}

    # -- counting ----------------------------------------------------------------------
    def fit(self, sequences) -> "NGramLM":
        """Count every m-gram (m = 1..n) inside each sequence (a 1-D id array, or a list)."""
        seqs = [sequences] if isinstance(sequences, np.ndarray) else list(sequences)
        seqs = [np.asarray(s, dtype=np.int64) for s in seqs]
        flat = np.concatenate(seqs) if seqs else np.zeros(0, np.int64)         # (N,)
        if flat.size < 2:
            raise ValueError(f"fit: the corpus has {flat.size} token(s); an n-gram model needs at least 2")
        check_ids("corpus", flat, self.V)
        seg = np.repeat(np.arange(len(seqs)), [len(s) for s in seqs])          # (N,)
        V, T = self.V, []
        for m in range(1, self.n + 1):
            if flat.size < m:
                keys = np.zeros(0, np.int64)
            else:
                start = np.arange(flat.size - m + 1)
                ok = seg[start] == seg[start + m - 1]                         # inside one sequence
                grams = np.lib.stride_tricks.sliding_window_view(flat, m)[ok]  # (N_m, m)
                keys = _keys(grams, V)
            keys, counts = np.unique(keys, return_counts=True)
            T.append({"keys": keys, "count": counts.astype(np.float64)})
        for m in range(1, self.n + 1):
            t = T[m - 1]
            if m < self.n:       # continuation count N1+(. g) of each m-gram g
                suffix, c = np.unique(T[m]["keys"] % V ** m, return_counts=True)
                t["cont"] = _lookup(suffix, c.astype(np.float64), t["keys"])
            ctx = t["keys"] // V
            t["ctx"], first = np.unique(ctx, return_index=True)               # contexts (m-1 grams)
            t["ctx_total"] = np.add.reduceat(t["count"], first) if len(first) else np.zeros(0)
            t["ctx_types"] = np.diff(np.append(first, len(ctx))).astype(np.float64)
            if "cont" in t:
                t["ctx_cont_total"] = np.add.reduceat(t["cont"], first) if len(first) else np.zeros(0)
                t["ctx_cont_types"] = np.add.reduceat((t["cont"] > 0).astype(float), first) if len(first) else np.zeros(0)
            kn_counts = t["count"] if (m == self.n or self.nltk) else t["cont"]
            t["D"] = self.discount_setting if self.discount_setting is not None else _discount(kn_counts)
        self.tables = T
        if self.smoothing == "backoff":
            self._fit_backoff()
        return self

    # -- saving: the counts are the parameters ------------------------------------------
    def state_dict(self) -> dict[str, np.ndarray]:
        """Every count table as ``tables.<m-1>.<field>`` arrays (what a checkpoint stores)."""
        if not getattr(self, "tables", None):
            return {}
        return {f"tables.{m}.{key}": np.array(value, copy=True) for m, t in enumerate(self.tables)
                for key, value in t.items()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Rebuild the count tables from ``state_dict()``'s arrays; the order must match."""
        tables: list[dict] = [{} for _ in range(self.n)]
        for name, value in state.items():
            _, m, key = name.split(".", 2)
            if not 0 <= int(m) < self.n:
                raise KeyError(f"state dict has {name}, but the model's order is {self.n}")
            arr = np.asarray(value)
            tables[int(m)][key] = float(arr) if arr.ndim == 0 else arr
        if any("keys" not in t for t in tables):
            raise KeyError(f"state dict lacks count tables for some of the orders 1..{self.n}")
        self.tables = tables
        if self.smoothing == "backoff":
            self._fit_backoff()

    def _fit_backoff(self) -> None:
        """alpha(h) = D N1+(h .) / c(h) / (1 - sum_{w seen after h} P_bo(w | h')) per context."""
        V = self.V
        for m in range(2, self.n + 1):
            t = self.tables[m - 1]
            grams = np.stack([(t["keys"] // V ** (m - 1 - i)) % V for i in range(m)], axis=1)  # (N_m, m)
            lower = self._prob(grams[:, 1:-1], grams[:, -1], top=m - 1)        # P_bo(w | h')
            first = np.searchsorted(t["keys"] // V, t["ctx"])
            seen_mass = np.add.reduceat(lower, first)                          # (contexts,)
            full = 1.0 - seen_mass < 1e-12        # every word seen after h: keep MLE, nothing to give
            t["ctx_D"] = np.where(full, 0.0, t["D"])
            t["ctx_alpha"] = np.where(full, 0.0, t["D"] * t["ctx_types"] / t["ctx_total"]
                                      / np.maximum(1.0 - seen_mass, 1e-300))

    # -- probabilities -----------------------------------------------------------------
    def _prob(self, ctx: np.ndarray, words: np.ndarray, top: int | None = None) -> np.ndarray:
        """P(words[i] | ctx[i]) for (N, L) contexts (-1 marks missing history on the left),
        using orders up to ``top`` (default n)."""
        if self.tables is None:
            raise RuntimeError("the n-gram model has no counts yet: call fit(...) first")
        top, V, L = top or self.n, self.V, ctx.shape[1]
        hist = (ctx >= 0).sum(axis=1)                 # (N,) usable history (-1 only on the left)
        sm = self.smoothing
        t1 = self.tables[0]
        if sm == "kn":
            if self.nltk:
                cont = t1["cont"] if self.n > 1 else t1["count"]
                p = _lookup(t1["keys"], cont, words) / cont.sum()
            else:
                p = np.full(len(words), 1.0 / V)
        elif sm == "backoff":
            c, N, D = _lookup(t1["keys"], t1["count"], words), t1["count"].sum(), t1["D"]
            p = np.maximum(c - D, 0) / N + D * len(t1["keys"]) / N / V
        elif sm == "addk":
            p = (_lookup(t1["keys"], t1["count"], words) + self.k) / (t1["count"].sum() + self.k * V)
        else:
            p = _lookup(t1["keys"], t1["count"], words) / t1["count"].sum()
        first = 1 if (sm == "kn" and not self.nltk) else 2
        for m in range(first, top + 1):
            t = self.tables[m - 1]
            h = ctx[:, L - (m - 1):] if m > 1 else ctx[:, :0]                  # (N, m-1)
            use = hist >= m - 1
            hkey = _keys(np.where(h >= 0, h, 0), V)
            gkey = hkey * V + words
            raw = m == top or (self.nltk and m == self.n)
            if sm in ("mle", "addk", "backoff") or raw:
                c, ch = _lookup(t["keys"], t["count"], gkey), _lookup(t["ctx"], t["ctx_total"], hkey)
                types = _lookup(t["ctx"], t["ctx_types"], hkey)
            else:
                c, ch = _lookup(t["keys"], t["cont"], gkey), _lookup(t["ctx"], t["ctx_cont_total"], hkey)
                types = _lookup(t["ctx"], t["ctx_types" if self.nltk else "ctx_cont_types"], hkey)
            seen = ch > 0
            if self.nltk:                         # NLTK: no data for the context -> defer to shorter
                seen = _lookup(t["ctx"], t["ctx_total"], hkey) > 0
            safe = np.where(ch > 0, ch, 1.0)
            if sm == "mle":
                new = c / safe
            elif sm == "addk":
                new, seen = (c + self.k) / (ch + self.k * V), np.ones_like(seen)
            elif sm == "kn":
                D = t["D"]
                new = np.maximum(c - D, 0) / safe + D * types / safe * p
            else:
                Dh = _lookup(t["ctx"], t["ctx_D"], hkey)
                new = np.where(c > 0, (c - Dh) / safe, _lookup(t["ctx"], t["ctx_alpha"], hkey) * p)
            p = np.where(use & seen, new, p)
        return p

    def distribution(self, context) -> np.ndarray:
        """P(. | context) over the vocabulary (V,); at most n-1 context ids."""
        context = np.asarray(context, dtype=np.int64).reshape(-1)
        if len(context) > self.n - 1:
            raise ValueError(f"context: an order-{self.n} model reads at most {self.n - 1} tokens, "
                             f"got {len(context)}")
        check_ids("context", context, self.V)
        ctx = np.full((self.V, self.n - 1), -1, np.int64)
        if len(context):
            ctx[:, self.n - 1 - len(context):] = context
        return self._prob(ctx, np.arange(self.V))

    def _contexts(self, idx: np.ndarray) -> np.ndarray:
        """idx (B, T) -> (B, T, n-1): the n-1 tokens ending at each position, -1 before the start."""
        B = idx.shape[0]
        if self.n == 1:
            return np.zeros((*idx.shape, 0), np.int64)
        padded = np.concatenate([np.full((B, self.n - 1), -1, np.int64), idx.astype(np.int64)], axis=1)
        return np.lib.stride_tricks.sliding_window_view(padded, self.n - 1, axis=1)[:, 1:]  # (B, T, n-1)

    def forward(self, idx: np.ndarray, targets: np.ndarray | None = None):
        """idx (B, T) -> logits (B, T, V) = log P(. | history); loss = mean -log P(targets)."""
        check_ids("idx", idx, self.V)
        if idx.ndim != 2:
            raise ValueError(f"idx: expected (B, T), got shape {idx.shape}")
        B, T = idx.shape
        ctx = self._contexts(idx).reshape(B * T, self.n - 1)                   # (BT, n-1)
        p = self._prob(np.repeat(ctx, self.V, axis=0), np.tile(np.arange(self.V), B * T))
        with np.errstate(divide="ignore"):
            logits = np.log(p).reshape(B, T, self.V).astype(self.dtype_)       # (B, T, V)
        if targets is None:
            return None, logits
        keep = targets != IGNORE
        picked = np.take_along_axis(logits, np.where(keep, targets, 0)[..., None], -1)[..., 0]
        loss = np.asarray(-(picked * keep).sum() / max(int(keep.sum()), 1), dtype=self.dtype_)
        return loss, logits

    def backward(self, dloss: float = 1.0) -> None:
        no_backward(self)

    def new_cache(self):
        return None

    def token_probs(self, idx: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """P(target | history) of every target that is not IGNORE, in order (N,): no (B, T, V)."""
        check_ids("idx", idx, self.V)
        keep = targets != IGNORE
        check_ids("targets", targets[keep], self.V)
        ctx = self._contexts(np.atleast_2d(idx))[np.atleast_2d(keep)]          # (N, n-1)
        return self._prob(ctx, targets[keep])

    def log_prob(self, idx: np.ndarray, targets: np.ndarray) -> float:
        """Total log P(targets | history) in nats."""
        with np.errstate(divide="ignore"):
            return float(np.log(self.token_probs(idx, targets)).sum())

    def sample(self, context, n_tokens: int, rng: np.random.Generator) -> np.ndarray:
        """n_tokens ids drawn one at a time from P(. | the last n-1 tokens)."""
        out = list(np.asarray(context, dtype=np.int64).reshape(-1))
        for _ in range(check_positive_int("n_tokens", n_tokens)):
            p = self.distribution(out[len(out) - self.n + 1:] if self.n > 1 else [])
            out.append(int(rng.choice(self.V, p=p / p.sum())))
        return np.array(out[len(out) - n_tokens:], dtype=np.int64)


def build(*, rng=None, dtype=np.float64, **settings) -> NGramLM:
    return NGramLM(rng=rng, dtype=dtype, **settings)


def tiny() -> tuple[NGramLM, tuple]:
    rng = np.random.default_rng(0)
    model = NGramLM(7, order=3, smoothing="kn").fit(rng.integers(0, 7, size=60))
    idx = rng.integers(0, 7, size=(2, 5))
    return model, (idx, np.roll(idx, -1, axis=1))


register(ModelEntry(
    name="ngram", title="n-gram LM (Kneser-Ney)", paper="Kneser & Ney 1995; Chen & Goodman 1998",
    objective="counts (MLE, add-k, interpolated KN, back-off)", build=build, tiny=tiny, lesson="04_ngram", has_backward=False,
    presets={"toy": Preset(model=dict(order=3, smoothing="kn"), train={}, data=dict(n_words=200_000),
                           expected="trigram KN 1.818 nats/word (perplexity 6.16); oracle 1.792 (6.00); < 1 s")},
    recipe="minipt.recipes.classic.lm_recipe", verbs=()))
