# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 · n-gram language models
#
# The first rung of the ladder predicts a word from the $n-1$ words before it, with
# probabilities read off counts:
#
# $$P(w \mid h) = \frac{c(h\,w)}{c(h)},\qquad h = w_{t-n+1}\dots w_{t-1}.$$

# %% [markdown]
# This lesson counts n-grams in NumPy, meets the zero-count problem, fixes it three ways
# (add-$k$, absolute-discount back-off, interpolated Kneser-Ney), measures every model in
# perplexity against the toy language's **oracle** (its exact probability, known because
# we wrote the grammar), and samples. `minipt.models.classic.ngram` holds the code; it
# meets the same model protocol as GPT (`loss, logits = model(idx, targets)`), without a
# backward pass: its parameters are counts.

# %%
import math

import matplotlib.pyplot as plt
import numpy as np

from minipt.models.classic.ngram import NGramLM, NGramVocab
from minipt.recipes.classic import NL, stream_nats, word_splits

# %% [markdown]
# ## 1. Counting, vectorised
# An $m$-gram of ids is read as one base-$V$ number, so counting all of them is one
# `np.unique` and looking one up is a binary search (`searchsorted`). Sorted keys put
# every $m$-gram of a context next to each other, so context totals are one
# `np.add.reduceat`. On the corpus *a b a b c a*:

# %%
toy = np.array([0, 1, 0, 1, 2, 0])                     # a b a b c a
mle = NGramLM(3, order=2, smoothing="mle").fit(toy)
bigrams = mle.tables[1]
print("bigram keys (3 * first + second):", bigrams["keys"], "counts:", bigrams["count"])
print("P(. | b) =", mle.distribution([1]))

# %% tags=["checks"]
assert bigrams["keys"].tolist() == [1, 3, 5, 6] and bigrams["count"].tolist() == [2, 1, 1, 1]

# %% [markdown]
# $P(\cdot \mid b) = (0.5, 0, 0.5)$: *b b* was never seen, so MLE gives it probability 0,
# and a test text containing it gets perplexity $\infty$.
#
# ## 2. Smoothing
# - **add-$k$**: $\frac{c(h w) + k}{c(h) + kV}$ moves mass to unseen words, the same
#   amount to each, however implausible.
# - **interpolated Kneser-Ney**: subtract a discount $D$ from every seen count and give
#   the mass freed, $D\,N_{1+}(h\,\cdot)/c(h)$, to the lower-order model:
#
# $$P(w\mid h) = \frac{\max(c(hw) - D, 0)}{c(h)} + \frac{D\,N_{1+}(h\,\cdot)}{c(h)}\,P(w \mid h').$$

# %% [markdown]
# The lower orders do not use raw counts but **continuation counts**
# $N_{1+}(\cdot\,h\,w)$: in how many different contexts has $h\,w$ appeared? The
# lower-order model is consulted exactly when the longer context is new, so it should
# favour words that turn up after many different words. Worked by hand on *a b a b c a*
# with $D = 0.5$: *a* follows *b* and *c* (continuation count 2), *b* and *c* one word
# each, of 4 bigram types, so
# $P_1(a) = \frac{2 - 0.5}{4} + \frac{0.5 \cdot 3}{4}\cdot\frac13 = 0.5$ and
# $P_1(b) = P_1(c) = 0.25$; then
# $P(b \mid a) = \frac{2 - 0.5}{2} + \frac{0.5 \cdot 1}{2}\,0.25 = 0.8125$.

# %%
kn = NGramLM(3, order=2, smoothing="kn", discount=0.5).fit(toy)
print("P_1 =", kn.distribution([]), " P(. | a) =", kn.distribution([0]))

# %% tags=["checks"]
assert np.allclose(kn.distribution([]), [0.5, 0.25, 0.25]) and np.isclose(kn.distribution([0])[1], 0.8125)

# %% [markdown]
# ## 3. The toy language at word level
# 200,000 training words and an independent 20,029-word validation stream; the document
# end is the word `<nl>`. The vocabulary has 80 entries (77 words and `<unk>`, `<s>`,
# `</s>`, which the stream never uses). In the toy language, every place word comes after
# *the* or *a* only, so its continuation count is 2 however often it occurs:

# %%
train_w, val_w, oracle, _ = word_splits(200_000, None, seed=0)
vocab = NGramVocab([train_w])
train, val = vocab.encode(train_w), vocab.encode(val_w)
nl = vocab.index[NL]
kn3 = NGramLM(len(vocab), order=3, smoothing="kn").fit(train)
uni = kn3.tables[0]
row = lambda w: np.searchsorted(uni["keys"], vocab.index[w])      # the unigram's place in the sorted keys
for w in ("river", "castle", "sees", "."):
    print(f"{w:>7}: count {int(uni['count'][row(w)]):6d}, continuation count {int(uni['cont'][row(w)])}")

# %% tags=["checks"]
assert len(vocab) == 80 and len(val) == 20_029
assert all(uni["cont"][row(w)] == 2 for w in ("river", "forest", "castle", "garden"))

# %% [markdown]
# ## 4. Perplexity against the oracle
# Every model scores the whole validation stream, each word after the one before it (the
# first after a document end). Loss in nats per word $\ell$ gives perplexity $e^\ell$ and
# $\ell/\ln 2$ bits per word. The oracle is the grammar's exact probability of the same
# words (the forward algorithm), **1.792 nats/word** (perplexity 6.00): no model can beat
# it on average.

# %%
orders = [1, 2, 3, 4, 5]
results = {}
for smoothing in ("mle", "addk", "backoff", "kn"):
    results[smoothing] = [stream_nats(NGramLM(len(vocab), order=n, smoothing=smoothing).fit(train), val, nl)
                          for n in orders]
    print(f"{smoothing:>8}: " + "  ".join(f"n={n} {x:.3f}" for n, x in zip(orders, results[smoothing])))
print(f"  oracle: {oracle:.3f} nats/word, perplexity {math.exp(oracle):.2f}, {oracle / math.log(2):.3f} bits/word")
best = results["kn"][2]
print(f"trigram KN: {best:.3f} nats/word, perplexity {math.exp(best):.2f}, gap to the oracle {best - oracle:.3f}")

# %% tags=["checks"]
assert abs(oracle - 1.792) < 5e-4 and abs(math.exp(oracle) - 6.00) < 5e-3

# %% [markdown]
# What the table says:
# - **MLE** is infinite from $n = 2$ on: one unseen bigram in 20,029 words is enough.
# - **add-one** is best at $n = 3$ (2.002) and falls apart after (3.161 at $n = 5$): as
#   contexts get rarer, the $V$ pseudo-counts swamp the real ones.
# - **Kneser-Ney** is the best at every order from 2 on; at $n = 3$ it is 1.818
#   nats/word, perplexity 6.16, **0.027 nats/word from the oracle**. Back-off with the same
#   discounts is close behind (1.826).
# - Longer contexts do not help here: the toy grammar is a first-order HMM over word
#   classes, a trigram already sees most of what matters, and 200,000 words are too few
#   to estimate 4- and 5-grams (KN 1.866 and 1.975).

# %%

fig, ax = plt.subplots(figsize=(5.5, 3.2))
for smoothing in ("addk", "backoff", "kn"):
    ax.plot(orders, results[smoothing], "o-", label=smoothing)
ax.axhline(oracle, color="k", ls="--", label="oracle")
ax.set_xlabel("order n"); ax.set_ylabel("validation nats/word"); ax.set_ylim(1.7, 3.3); ax.legend()
ax.set_title("n-gram smoothing against the oracle")
plt.show()

# %% tags=["checks"]
assert all(np.isinf(results["mle"][i]) for i in range(1, 5))
assert abs(results["addk"][2] - 2.002) < 5e-4 and abs(results["addk"][4] - 3.161) < 5e-4
assert all(results["kn"][i] < min(results["addk"][i], results["backoff"][i]) for i in range(1, 5))
assert abs(best - 1.818) < 5e-4 and abs(math.exp(best) - 6.16) < 5e-3 and abs(best - oracle - 0.027) < 5e-4
assert abs(results["backoff"][2] - 1.826) < 5e-4
assert abs(results["kn"][3] - 1.866) < 5e-4 and abs(results["kn"][4] - 1.975) < 5e-4
assert min(range(5), key=lambda i: results["kn"][i]) == 2

# %% [markdown]
# ## 5. The same model through the protocol, and sampling
# `loss, logits = model(idx, targets)` gives log-probabilities over the whole vocabulary
# at every position (each row sums to one), so the shared evaluator and sampler serve the
# n-gram as they serve GPT. A sample from the trigram:

# %%
idx = val[None, :32]
loss, logits = kn3(idx[:, :-1], idx[:, 1:])
sample = kn3.sample([nl, nl], 30, np.random.default_rng(0))
print(" ".join("\n" if vocab.words[i] == NL else vocab.words[i] for i in sample))

# %% tags=["checks"]
assert np.allclose(np.exp(logits).sum(-1), 1.0)

# %% [markdown]
# **Summary.** Counting is cheap and exact; smoothing decides everything else. Kneser-Ney's
# continuation counts make the trigram come within 0.027 nats/word of the oracle on this
# language. What no count can do is share strength between *similar* words: "king" and
# "queen" are two unrelated ids to an n-gram. The next lesson's neural LM learns a vector
# per word so that they need not be.

# %% [markdown]
# ## Exercises
# 1. Set `discount=0.75` for every order of the KN trigram and compare with the estimated
#    discounts $n_1 / (n_1 + 2 n_2)$.
# 2. Train on the first 20,000 words only: at which order is KN best now?
#
# ## Solutions

# %%
# 1. A fixed discount is close to the estimated one on this language.
fixed = stream_nats(NGramLM(len(vocab), order=3, smoothing="kn", discount=0.75).fit(train), val, nl)
print(f"KN trigram, discount 0.75: {fixed:.4f}; estimated discounts: {results['kn'][2]:.4f} nats/word")

# %%
# 2. With ten times less data, longer contexts are even rarer.
small = {n: stream_nats(NGramLM(len(vocab), order=n, smoothing="kn").fit(train[:20_000]), val, nl) for n in orders}
print("KN on 20,000 words:", {n: round(x, 3) for n, x in small.items()}, "best order", min(small, key=small.get))
