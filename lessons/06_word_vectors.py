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

import numpy as np

from minipt.core.gradcheck import check_module
from minipt.data.hmm_language import HMMLanguage
from minipt.data.toy_grammar import SENSES
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
assert (points >= 0).sum(1).tolist() == [1, 3, 3, 3, 4, 4]

# %% [markdown]
# All four variants (CBOW / skip-gram × negative sampling / hierarchical softmax) pass a
# float64 gradient check, and so does GloVe's weighted least squares:

# %%
for arch in ("cbow", "skipgram"):
    for output in ("neg", "hs"):
        model, batch = tiny_variant(arch, output)
        r = check_module(model, *batch, select=lambda out: out[0])
        print(f"{arch:>8} + {output}: max relative error {r.max_error():.1e}")
        assert r.passed
model, batch = glove_tiny()
r = check_module(model, *batch, select=lambda out: out[0])
print(f"   GloVe: max relative error {r.max_error():.1e}")
assert r.passed

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
glove.fit(i, j, x, epochs=150, lr=1.0, batch_size=256, rng=np.random.default_rng(1))
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
#
# Every model is far above chance (0.014). Skip-gram with negative sampling answers 0.59
# of the analogies (19 of 32), skip-gram with hierarchical softmax 0.56, CBOW 0.44 with
# negative sampling and 0.53 with hierarchical softmax, GloVe 0.44, and the count
# baseline 0.56. CBOW groups the categories most tightly (gap 0.44 and 0.49, against
# 0.26 to 0.29 for skip-gram and GloVe and 0.37 for PPMI+SVD), and every model's
# neighbourhoods are between 0.82 (GloVe) and 0.93 (CBOW + hierarchical softmax) pure.

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
# ## 3. Nearest neighbours

# %%
sv = StaticVectors(vectors["skipgram+neg"], vocab)
for w in ("king", "bread", "river", "sees", "happy"):
    print(f"{w:>6}: " + ", ".join(f"{n} {s:.2f}" for n, s in sv.nearest(w, 4)))

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
    assert acc <= majority + 1e-12
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
# "bank/money" next to coin and gold, "bat/thing" next to stone, key and ball. Contextual models (ELMo, BERT) get there without labels: the vector
# of a token depends on the sentence around it.

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
#
# *Exercises.* (1) Train skip-gram with `sample=0` (no subsampling): what happens to the
# vectors of "the" and "."? (2) GloVe's $x_{\max}$: try 10 and 1000.
