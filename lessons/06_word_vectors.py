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
# # 06 · Word vectors: word2vec and GloVe
#
# Lesson 05's network learnt word vectors as a by-product of predicting the next word.
# word2vec (Mikolov et al. 2013a, b) made the vectors the goal and the model as cheap as
# possible: no hidden layer, a context predicting a word (**CBOW**) or a word predicting
# each context word (**skip-gram**), and an output layer that avoids the $V$-way softmax
# (**negative sampling** or **hierarchical softmax**). GloVe (Pennington et al. 2014) fits
# the vectors to the log co-occurrence counts instead. The toy language knows what the
# vectors should capture (categories, 32 analogies, two ambiguous words), so each model
# is scored against the truth, next to plain count vectors.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

from minipt.core.gradcheck import check_module
from minipt.data.hmm_language import HMMLanguage
from minipt.data.toy_grammar import CATEGORIES, SENSES
from minipt.models.classic.glove import GloVe, cooccurrence
from minipt.models.classic.glove import tiny as glove_tiny
from minipt.models.classic.word2vec import Word2Vec, huffman_tree, tiny_variant
from minipt.tasks.word_vectors import StaticVectors, evaluate, ppmi_svd, sense_accuracy

# %% [markdown]
# ## 1. One loss for both output layers
# For an input vector $h$ (the mean of the context's vectors in CBOW, one context word's
# vector in skip-gram) and output rows $r_l$ with labels $y_l$:
#
# $$\ell = -\sum_l \big[y_l \log\sigma(h\cdot v'_{r_l}) + (1-y_l)\log\sigma(-h\cdot v'_{r_l})\big].$$
#
# Negative sampling: rows = the target and $k$ words drawn from the unigram distribution
# to the power 3/4, labels $1, 0, \dots, 0$. Hierarchical softmax: rows = the inner nodes
# on the target's path in a Huffman tree, labels = 1 minus the path's bits; the sigmoids
# along each path multiply to a distribution over the words. Frequent words get short
# paths:

# %%
counts = np.array([50, 20, 10, 10, 5, 5])
points, codes = huffman_tree(counts)
for w in range(6):
    n = int((points[w] >= 0).sum())
    print(f"word {w} (count {counts[w]:2d}): code {''.join(map(str, codes[w, :n]))}")

# %% tags=["checks"]
assert (points >= 0).sum(1).tolist() == [1, 3, 3, 3, 4, 4]

# %% [markdown]
# All four variants (CBOW / skip-gram × negative sampling / hierarchical softmax) pass a
# float64 gradient check, and so does GloVe's weighted least squares:

# %%
checks = {}
for arch in ("cbow", "skipgram"):
    for output in ("neg", "hs"):
        model, batch = tiny_variant(arch, output)
        checks[arch, output] = check_module(model, *batch, select=lambda out: out[0])
        print(f"{arch:>8} + {output}: max relative error {checks[arch, output].max_error():.1e}")
model, batch = glove_tiny()
checks["GloVe"] = check_module(model, *batch, select=lambda out: out[0])
print(f"   GloVe: max relative error {checks['GloVe'].max_error():.1e}")

# %% tags=["checks"]
assert all(r.passed for r in checks.values())

# %% [markdown]
# Training does not call the model's backward: the inner loop is a Numba kernel
# (`minipt/kernels/word2vec.py`, with a NumPy twin the tests compare it with) that takes
# one SGD step per example, as word2vec.c does, with frequent-word subsampling, a window
# size drawn per word from 1..window and a learning rate decaying linearly to 1e-4 of its start.
#
# ## 2. Training on the toy language
# 200,000 words, in documents; every token keeps the grammar state that emitted it (we
# need it for the senses later). Each word2vec variant: 32 dimensions, window 4, 5
# epochs. GloVe: window 5, 150 epochs of AdaGrad. The baseline: positive PMI of
# co-occurrences within 2 words, reduced to 20 dimensions by SVD.

# %%
lang = HMMLanguage.build()
words, states = lang.sample(200_000, np.random.default_rng(0))
vocab = sorted(set(words))
ix = {w: i for i, w in enumerate(vocab)}
ids = np.array([ix[w] for w in words])
docs = [d for d in np.split(ids, np.flatnonzero(ids == ix["\n"]) + 1) if len(d)]
counts = np.bincount(ids, minlength=len(vocab))


def train_word2vec(arch, output, docs=docs, counts=counts, V=len(vocab)):
    model = Word2Vec(V, 32, arch=arch, output=output, window=4, counts=counts, rng=np.random.default_rng(0))
    stats = model.fit(docs, epochs=5, rng=np.random.default_rng(1))
    return model.vectors(), stats["seconds"]


vectors, seconds = {}, {}
for arch in ("skipgram", "cbow"):
    for output in ("neg", "hs"):
        vectors[f"{arch}+{output}"], seconds[f"{arch}+{output}"] = train_word2vec(arch, output)
t0 = time.perf_counter()
i, j, x = cooccurrence(docs, len(vocab), window=5)
glove = GloVe(len(vocab), 32, rng=np.random.default_rng(0))
glove_loss = glove.fit(i, j, x, epochs=150, lr=1.0, batch_size=256, rng=np.random.default_rng(1))
vectors["GloVe"], seconds["GloVe"] = glove.vectors(), time.perf_counter() - t0
t0 = time.perf_counter()
vectors["PPMI+SVD"], seconds["PPMI+SVD"] = ppmi_svd(docs, len(vocab), window=2, dim=20), time.perf_counter() - t0
scores = {name: evaluate(v, vocab) for name, v in vectors.items()}
print(f"{'':>14} analogies  category gap  purity   time")
for name, s in scores.items():
    print(f"{name:>14} {s['analogy']:9.2f} {s['category_gap']:13.2f} {s['purity']:7.2f} {seconds[name]:6.1f} s")
print(f"chance on the analogies: {1 / (len(vocab) - 3):.3f}")

# %% [markdown]
# - **analogies**: is $d$ the nearest word to $b - a + c$ (a, b, c excluded), over the 32
#   questions the grammar builds in (man : woman = king : queen, man : king = woman :
#   queen, ...)? Chance is 1 in 74.
# - **category gap**: mean cosine within a category minus across categories.
# - **purity**: the share of each word's 3 nearest categorised words that share its
#   category.

# %% [markdown]
# Every model is far above chance (0.014). Skip-gram with negative sampling answers 0.59
# of the analogies (19 of 32), skip-gram with hierarchical softmax 0.56, CBOW 0.44 with
# negative sampling and 0.53 with hierarchical softmax, GloVe 0.44, and the count
# baseline 0.56. CBOW groups the categories most tightly (gap 0.44 and 0.49, against
# 0.26 to 0.29 for skip-gram and GloVe and 0.37 for PPMI+SVD), and every model's
# neighbourhoods are between 0.82 (GloVe) and 0.93 (CBOW + hierarchical softmax) pure.
# The same table as a picture, with GloVe's training loss (its objective has no
# held-out set and no known floor, so the curve shows only that it converged):

# %%
names = list(scores)
fig, axes = plt.subplots(1, 4, figsize=(15, 3.4))
acc_an = np.array([scores[n]["analogy"] for n in names])
axes[0].bar(names, acc_an, yerr=np.sqrt(acc_an * (1 - acc_an) / 32), capsize=3, color="tab:blue")
axes[0].axhline(1 / (len(vocab) - 3), color="k", ls="--", lw=0.8, label="chance")
axes[0].set_ylabel("share of 32 analogies right"); axes[0].legend(fontsize=7)
axes[0].set_title("analogies (± binomial s.e.)", fontsize=10)
for ax, key, label in [(axes[1], "category_gap", "cosine within - across"), (axes[2], "purity", "share of 3 neighbours")]:
    ax.bar(names, [scores[n][key] for n in names], color="tab:orange" if key == "purity" else "tab:green")
    ax.set_ylabel(label); ax.set_title(key.replace("_", " "), fontsize=10)
for ax in axes[:3]:
    ax.set_xlabel("model"); ax.tick_params(axis="x", labelrotation=60, labelsize=7)
axes[3].plot(np.arange(1, len(glove_loss) + 1), glove_loss)
axes[3].set_yscale("log"); axes[3].set_xlabel("epoch"); axes[3].set_ylabel("loss per pair (log)")
axes[3].set_title("GloVe's training loss", fontsize=10)
plt.tight_layout(); plt.show()

# %% tags=["checks"]
right = {name: round(s["analogy"] * 32) for name, s in scores.items()}
assert right == {"skipgram+neg": 19, "skipgram+hs": 18, "cbow+neg": 14, "cbow+hs": 17, "GloVe": 14, "PPMI+SVD": 18}
stated_gap = {"skipgram+neg": 0.26, "skipgram+hs": 0.29, "cbow+neg": 0.44, "cbow+hs": 0.49, "GloVe": 0.29,
              "PPMI+SVD": 0.37}
assert all(abs(scores[n]["category_gap"] - g) < 0.005 for n, g in stated_gap.items())
purity = [s["purity"] for s in scores.values()]
assert abs(min(purity) - scores["GloVe"]["purity"]) < 1e-12 and abs(min(purity) - 0.82) < 0.005
assert abs(max(purity) - scores["cbow+hs"]["purity"]) < 1e-12 and abs(max(purity) - 0.93) < 0.005

# %% [markdown]
# ## 3. Nearest neighbours, and the vectors in the plane
# Skip-gram with negative sampling: the nearest words by cosine, then every categorised
# word's vector projected on its two principal components, coloured by its category in
# the grammar (the model never saw the categories).

# %%
sv = StaticVectors(vectors["skipgram+neg"], vocab)
for w in ("king", "bread", "river", "sees", "happy"):
    print(f"{w:>6}: " + ", ".join(f"{n} {s:.2f}" for n, s in sv.nearest(w, 4)))

# %%
classes = list(CATEGORIES)
shown = [(w, k) for k, c in enumerate(classes) for w in CATEGORIES[c]]
X = np.stack([vectors["skipgram+neg"][ix[w]] for w, _ in shown]).astype(np.float64)   # (n, 32)
X = X - X.mean(axis=0)
_, sv_s, Vt = np.linalg.svd(X, full_matrices=False)
pc = X @ Vt[:2].T                                                                      # (n, 2)
fig, ax = plt.subplots(figsize=(7, 5))
sc = ax.scatter(pc[:, 0], pc[:, 1], c=[k for _, k in shown], cmap=plt.get_cmap("tab10", len(classes)),
                vmin=-0.5, vmax=len(classes) - 0.5, s=25)
for (px, py), (w, _) in zip(pc, shown):
    ax.annotate(w, (px, py), fontsize=7, xytext=(2, 2), textcoords="offset points")
cb = fig.colorbar(sc, ticks=range(len(classes)))
cb.ax.set_yticklabels(classes); cb.set_label("category in the grammar")
ax.set_xlabel("principal component 1"); ax.set_ylabel("principal component 2")
ax.set_title("skip-gram + negative sampling word vectors, PCA")
plt.tight_layout(); plt.show()
print(f"the two components keep {(sv_s[:2] ** 2).sum() / (sv_s ** 2).sum():.0%} of the variance")

# %% [markdown]
# ## 4. Where static vectors fail: one vector per word
# "bank" is a place by the river and a store of money; "bat" an animal and a thing to
# carry. The grammar records which sense every token has. Label each token's sense with
# the sense whose category (places or money; animals or things) has its centroid nearest
# to the token's vector: a static model has one vector per word, so every token gets the
# same label, and the accuracy is at most the share of the more frequent sense.

# %%
senses = {w: [SENSES[w][s] for w_, s in zip(words, states) if w_ == w] for w in SENSES}
for w in SENSES:
    acc, majority = sense_accuracy(sv, w, senses[w])
    print(f"{w}: {len(senses[w])} tokens; sense accuracy {acc:.2f} (majority share {majority:.2f})")
print("nearest words to 'bat':", ", ".join(n for n, _ in sv.nearest("bat", 3)))

# %% tags=["checks"]
assert all(sense_accuracy(sv, w, senses[w])[0] <= sense_accuracy(sv, w, senses[w])[1] + 1e-12 for w in SENSES)
assert len(senses["bank"]) == 2391 and len(senses["bat"]) == 3227
assert abs(sense_accuracy(sv, "bank", senses["bank"])[0] - 0.62) < 0.005
assert abs(np.mean(np.array(senses["bank"]) == "bank/river") - 0.62) < 0.005
assert abs(np.mean(np.array(senses["bat"]) == "bat/animal") - 0.53) < 0.005
assert abs(sense_accuracy(sv, "bat", senses["bat"])[0] - 0.47) < 0.005
assert [n for n, _ in sv.nearest("bat", 3)] == ["key", "stone", "ball"]

# %% [markdown]
# "bank" has 2,391 tokens, 62 % of them by the river. Its one vector sits among the
# places, so every token is labelled "river": accuracy 0.62, the majority share and no
# more. "bat" (3,227 tokens, 53 % animals) has a vector that leans to the things (its
# nearest words are key, stone, ball), so every token is labelled "thing": accuracy 0.47,
# below the majority share.
#
# With the sense labels given, the corpus can spell the two senses as two words
# ("bank/river", "bank/money") and train again: each sense gets its own vector, in its
# own neighbourhood: "bank/river" among the places, "bat/animal" among the animals,
# "bank/money" next to coin and gold, "bat/thing" next to stone, key and ball.
# Contextual models (ELMo, BERT) get there without labels: the vector of a token
# depends on the sentence around it.

# %%
split_words = [SENSES[w][s] if w in SENSES else w for w, s in zip(words, states)]
split_vocab = sorted(set(split_words))
six = {w: i for i, w in enumerate(split_vocab)}
split_ids = np.array([six[w] for w in split_words])
split_docs = [d for d in np.split(split_ids, np.flatnonzero(split_ids == six["\n"]) + 1) if len(d)]
split_vectors, _ = train_word2vec("skipgram", "neg", split_docs, np.bincount(split_ids), len(split_vocab))
split_sv = StaticVectors(split_vectors, split_vocab)
for w in ("bank", "bat"):
    print(f"one vector for {w!r}: " + ", ".join(n for n, _ in sv.nearest(w, 5)))
    for sense in SENSES[w].values():
        print(f"   {sense:>11}: " + ", ".join(n for n, _ in split_sv.nearest(sense, 5)))

# %% tags=["checks"]
near = lambda sense, k: {n for n, _ in split_sv.nearest(sense, k)}
assert near("bank/river", 5) <= {"river", "forest", "house", "garden", "field", "castle"}
assert near("bat/animal", 5) <= {"cat", "dog", "fox", "bird", "horse"}
assert near("bank/money", 2) == {"coin", "gold"} and near("bat/thing", 3) == {"stone", "key", "ball"}

# %% [markdown]
# ## 5. And no vector at all for a new word
# A word that never occurred in training has no row in the table, and nothing in
# word2vec or GloVe can make one:

# %%
try:
    sv.vector("unicorn")
except KeyError as e:
    print("KeyError:", e)
else:
    raise AssertionError("an unseen word got a vector")

# %% [markdown]
# **Summary.** word2vec and GloVe turn co-occurrence into geometry: categories cluster and
# (some) analogies become vector arithmetic, at a cost of seconds. On this small language,
# count vectors (PPMI + SVD) do as well or better, as Levy & Goldberg (2014) found the
# two to be closely related. Two limits remain, and they are the bridge to ELMo: one vector
# per word whatever the sentence (the senses of "bank" merge), and none for a word never
# seen.

# %% [markdown]
# ## Exercises
# 1. Train skip-gram with negative sampling and `sample=0` (no subsampling of frequent
#    words). How do the analogy score and the category gap change?
# 2. The Huffman tree: what code lengths do six words of equal counts get, and why does
#    that make hierarchical softmax cost $\log_2 V$ per word?
# 3. Answer one analogy by hand: which word is nearest to king − man + woman in the
#    skip-gram vectors?
#
# ## Solutions

# %%
# 1. Without subsampling the frequent words ("the", ".", "a") make most of the pairs.
#    On this language the analogies barely move and the categories cluster more tightly:
model_ns = Word2Vec(len(vocab), 32, arch="skipgram", output="neg", window=4, counts=counts, sample=0,
                    rng=np.random.default_rng(0))
model_ns.fit(docs, epochs=5, rng=np.random.default_rng(1))
no_sub = evaluate(model_ns.vectors(), vocab)
print(f"sample=0: analogies {no_sub['analogy']:.2f}, category gap {no_sub['category_gap']:.2f} "
      f"(with subsampling {scores['skipgram+neg']['analogy']:.2f}, {scores['skipgram+neg']['category_gap']:.2f})")

# %%
# 2. Equal counts give a balanced tree: every code has log2(6) rounded, 2 or 3 bits. Each
#    word's probability is a product of one sigmoid per bit, so a word costs ~log2 V dot products.
p_eq, c_eq = huffman_tree(np.full(6, 10))
print("code lengths:", (p_eq >= 0).sum(1).tolist(), " log2(6) =", round(np.log2(6), 2))

# %%
# 3. b - a + c with a, b, c excluded from the answers.
E = vectors["skipgram+neg"] / np.linalg.norm(vectors["skipgram+neg"], axis=1, keepdims=True)
q = E[ix["king"]] - E[ix["man"]] + E[ix["woman"]]
sims = E @ q
for w in ("king", "man", "woman"):
    sims[ix[w]] = -np.inf
print("king - man + woman ->", vocab[int(np.argmax(sims))])
