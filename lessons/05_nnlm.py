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
# # 05 · Bengio's neural language model
#
# An n-gram treats "king" and "queen" as unrelated symbols. Bengio, Ducharme, Vincent &
# Jauvin (2003) gave every word a learnt feature vector $C(w) \in \mathbb{R}^m$ and
# predicted the next word with a small network over the $n-1$ previous words' vectors:
#
# $$x = [C(w_{t-n+1}); \dots; C(w_{t-1})],\qquad
#   y = b + W x + U \tanh(d + H x),\qquad P(w_t \mid \cdot) = \mathrm{softmax}(y).$$
#
# $W x$ are the optional *direct* connections. This lesson writes the model and its
# backward by hand, checks them, shows they equal minipt's `NNLM`, then trains it against
# lesson 04's n-grams and the oracle. Shapes: `N` windows, `V` vocabulary, `m` features,
# `h` hidden units.

# %%
import math

import matplotlib.pyplot as plt
import numpy as np

from minipt import gradcheck
from minipt.data.batching import TokenStream
from minipt.data.toy_grammar import CATEGORIES
from minipt.models.classic.ngram import NGramLM, NGramVocab
from minipt.models.classic.nnlm import NNLM
from minipt.ops.softmax import log_softmax_forward
from minipt.recipes.classic import NL, stream_nats, word_splits
from minipt.train import TrainConfig, train

# %% [markdown]
# ## 1. From one-hot to embeddings
# A word as a one-hot row $e_w \in \{0,1\}^V$ times a matrix $C \in \mathbb{R}^{V\times m}$
# selects row $w$ of $C$. A lookup does the same without the $V$-wide product; its
# backward adds the gradient into the rows used (twice, if a word appears twice).

# %%
rng = np.random.default_rng(0)
C = rng.normal(size=(6, 3))                                  # (V, m)
context = np.array([4, 1, 4])                                # three words, one repeated
one_hot = np.eye(6)[context]                                 # (n-1, V)
print("one-hot @ C:\n", (one_hot @ C).round(3), "\nequals the lookup C[context]:", np.array_equal(one_hot @ C, C[context]))

# %% [markdown]
# ## 2. The forward and the backward, by hand
# The backward reads the forward bottom to top. With $\delta = \partial L/\partial y =
# (\mathrm{softmax}(y) - \mathrm{onehot}(w_t))/N$: $dU = \delta^\top z$, $db = \sum \delta$,
# $dW = \delta^\top x$; through $z = \tanh(a)$, $da = \delta U \odot (1 - z^2)$, so
# $dH = da^\top x$, $dd = \sum da$. The input gets two paths, $dx = \delta W + da\, H$,
# and $dC$ is $dx$ scattered back onto the rows that were looked up.

# %%
def nnlm_forward(ctx, targets, p):
    """ctx (N, n-1) word ids, targets (N,) -> mean cross-entropy, cache."""
    N = len(ctx)
    x = p["C"][ctx].reshape(N, -1)                       # (N, (n-1)m)
    z = np.tanh(x @ p["H"].T + p["d"])                   # (N, h)
    y = z @ p["U"].T + p["b"] + x @ p["W"].T             # (N, V)
    y_max = y.max(axis=1, keepdims=True)
    logp = y - y_max - np.log(np.exp(y - y_max).sum(axis=1, keepdims=True))   # (N, V)
    loss = -logp[np.arange(N), targets].mean()
    return loss, (ctx, targets, x, z, logp)


def nnlm_backward(dloss, cache, p):
    ctx, targets, x, z, logp = cache
    N = len(targets)
    dy = np.exp(logp)                                    # softmax (N, V)
    dy[np.arange(N), targets] -= 1
    dy *= dloss / N                                      # dL/dy (N, V)
    g = {"U": dy.T @ z, "b": dy.sum(axis=0), "W": dy.T @ x}   # (V, h), (V,), (V, (n-1)m)
    da = (dy @ p["U"]) * (1 - z ** 2)                    # (N, h)
    g["H"], g["d"] = da.T @ x, da.sum(axis=0)            # (h, (n-1)m), (h,)
    dx = dy @ p["W"] + da @ p["H"]                       # (N, (n-1)m): direct + hidden path
    g["C"] = np.zeros_like(p["C"])                       # (V, m)
    np.add.at(g["C"], ctx, dx.reshape(*ctx.shape, -1))   # scatter-add: a repeated word gets both
    return g


# %% [markdown]
# ## 3. Check it, then compare it with the library
# `minipt.gradcheck` nudges every parameter in float64, compares the central differences
# with the backward under a random upstream gradient, and reports the worst relative
# error per array. Then minipt's `NNLM`, given the same parameters, must give the same
# loss and the same gradients: it pads the first window positions with a document-end
# word, so we read its windows with `contexts` and flatten them.

# %%
V, n, m, h = 9, 3, 4, 5
lib = NNLM(V, order=n, dim=m, hidden=h, direct=True, pad_id=0, rng=np.random.default_rng(0), dtype=np.float64)
params = {k: np.random.default_rng(1).normal(0, 0.3, v.shape) for k, v in lib.params.items()}
idx = rng.integers(0, V, size=(2, 5))                    # (B, T)
tgt = np.roll(idx, -1, axis=1)                           # (B, T)
ctx = lib.contexts(idx).reshape(-1, n - 1)               # (B T, n-1), padded like the library


def run():
    loss, cache = nnlm_forward(ctx, tgt.ravel(), params)
    return loss, lambda dloss: nnlm_backward(dloss, cache, params)


result = gradcheck(run, params, kinds={k: "param" for k in params})
print(result)
for k in params:
    lib.params[k][...] = params[k]
lib.zero_grad()
lib_loss, _ = lib(idx, tgt)
lib.backward()
loss_hand, cache = nnlm_forward(ctx, tgt.ravel(), params)
grads_hand = nnlm_backward(1.0, cache, params)
print(f"loss by hand {loss_hand:.12f}, minipt's NNLM {float(lib_loss):.12f}")
np.testing.assert_allclose(loss_hand, lib_loss, rtol=1e-12)
for k in params:
    np.testing.assert_allclose(grads_hand[k], lib.grads[k], rtol=1e-10, atol=1e-12)

# %% tags=["checks"]
assert result.passed and result.max_error() < 1e-6
assert set(lib.params) == set(params) == {"C", "H", "d", "U", "b", "W"}

# %% [markdown]
# ## 4. Training on the toy language
# The same 200,000 training words and 20,029 validation words as lesson 04. The model
# reads 4 previous words (n = 5), $m = 32$, $h = 64$, with direct connections. minipt's
# training loop (AdamW, warm-up, cosine decay, clipping) runs 600 batches of 32 windows
# of 16 words, measuring the validation loss on 10 batches every 50 steps.

# %%
train_w, val_w, oracle, _ = word_splits(200_000, None, seed=0)
vocab = NGramVocab([train_w])
train_ids, val_ids = vocab.encode(train_w), vocab.encode(val_w)
nl = vocab.index[NL]
nnlm = NNLM(len(vocab), order=5, dim=32, hidden=64, direct=True, pad_id=nl, rng=np.random.default_rng(0))
stream = TokenStream(train_ids, val_ids, 16, 32)
run = train(nnlm, stream.get_batch, TrainConfig(steps=600, lr=1e-2, min_lr=1e-3, warmup=20, weight_decay=0.0,
                                                 eval_every=50, progress=False, seed=0))
nnlm_nats = stream_nats(nnlm, val_ids, nl)
kn = {n: NGramLM(len(vocab), order=n, smoothing="kn").fit(train_ids) for n in (3, 5)}
kn_nats = {n: stream_nats(m, val_ids, nl) for n, m in kn.items()}
addk_nats = stream_nats(NGramLM(len(vocab), order=3, smoothing="addk").fit(train_ids), val_ids, nl)
print(f"{nnlm.num_parameters():,} parameters, trained in {run.seconds:.1f} s")
for name, x in [("NNLM n=5", nnlm_nats), ("KN trigram", kn_nats[3]), ("KN 5-gram", kn_nats[5]),
                ("add-1 trigram", addk_nats), ("oracle", oracle)]:
    print(f"{name:>14}: {x:.3f} nats/word, perplexity {math.exp(x):.2f}, {x / math.log(2):.3f} bits/word")
print(f"gap to the oracle {nnlm_nats - oracle:.4f} nats/word")

# %%
steps = np.array([r["step"] for r in run.history])
train_loss = np.array([r["loss"] for r in run.history])
val = np.array([(r["step"], r["val_loss"]) for r in run.history if "val_loss" in r])
smooth = np.convolve(train_loss, np.ones(20) / 20, mode="valid")
fig, ax = plt.subplots(figsize=(6.5, 3.5))
ax.plot(steps, train_loss, color="tab:blue", alpha=0.25, lw=0.7)
ax.plot(steps[19:], smooth, color="tab:blue", label="train (mean of 20 steps)")
ax.plot(val[:, 0], val[:, 1], "o-", color="tab:orange", ms=3, label="validation batches")
ax.axhline(kn_nats[3], color="tab:green", ls=":", label=f"KN trigram {kn_nats[3]:.3f}")
ax.axhline(oracle, color="k", ls="--", lw=0.8, label=f"oracle {oracle:.3f}")
ax.set_ylim(oracle - 0.1, 3.0)
ax.set_xlabel("step"); ax.set_ylabel("loss (nats/word)"); ax.set_title("NNLM training on the toy language")
ax.legend(fontsize=8); plt.tight_layout(); plt.show()

# %% tags=["checks"]
assert nnlm.num_parameters() == 26_256
assert abs(nnlm_nats - 1.806) < 5e-4 and abs(math.exp(nnlm_nats) - 6.09) < 5e-3
assert abs(kn_nats[3] - 1.818) < 5e-4 and abs(kn_nats[5] - 1.975) < 5e-4 and abs(addk_nats - 2.002) < 5e-4
assert nnlm_nats < kn_nats[3] < addk_nats and abs(nnlm_nats - oracle - 0.0145) < 5e-5
assert val[-1, 1] < val[0, 1] and len(val) == 12

# %% [markdown]
# The NNLM reaches **1.806 nats/word** (perplexity 6.09), against 1.818 for the
# Kneser-Ney trigram, 1.975 for the KN 5-gram that sees the same four words of context,
# and 2.002 for add-one: **0.0145 nats/word from the oracle**. The 5-gram has too few
# examples of each 4-word context; the network shares what it learns about a context with
# every context whose words have similar vectors.
#
# ## 5. The paper's mixture with an interpolated trigram
# Bengio et al. report their best results when the network's probabilities are averaged
# with an interpolated trigram's, $P = \lambda P_{\text{NNLM}} + (1-\lambda) P_{\text{tri}}$.
# Choosing $\lambda$ on the first half of the validation words and measuring on the second:

# %%
idx, tgt = np.concatenate([[nl], val_ids[:-1]])[None, :], val_ids[None, :]
nnlm.eval()
_, logits = nnlm(idx, tgt)
p_net = np.exp(np.take_along_axis(log_softmax_forward(logits.astype(np.float64))[0], tgt[..., None], -1))[0, :, 0]
p_tri = kn[3].token_probs(idx, tgt)
half = len(p_net) // 2
nats = lambda p: float(-np.log(p).mean())
grid = np.linspace(0, 1, 21)
lam = grid[np.argmin([nats(l * p_net[:half] + (1 - l) * p_tri[:half]) for l in grid])]
second = {"NNLM": nats(p_net[half:]), "KN trigram": nats(p_tri[half:]),
          f"mixture (lambda {lam:.2f})": nats(lam * p_net[half:] + (1 - lam) * p_tri[half:])}
for name, x in second.items():
    print(f"second half, {name}: {x:.4f} nats/word")
mix = second[f"mixture (lambda {lam:.2f})"]

# %% tags=["checks"]
assert mix < min(second["NNLM"], second["KN trigram"]) and abs(lam - 0.70) < 1e-9
assert abs(mix - 1.810) < 5e-4 and abs(second["NNLM"] - 1.813) < 5e-4 and abs(second["KN trigram"] - 1.825) < 5e-4

# %% [markdown]
# With $\lambda = 0.70$ the mixture scores 1.810 nats/word on the held-out half, against
# 1.813 for the NNLM and 1.825 for the trigram alone: it beats both of its parts, as in
# the paper (where the gain was larger: real text has more that a trigram memorises and
# a small network misses).
#
# ## 6. What the feature vectors learnt
# Nearest neighbours by cosine similarity of the rows of $C$, then every word's row
# projected on its two principal components, coloured by the word class the toy
# language's grammar gives it. Nobody told the model these classes.

# %%
E = nnlm.params["C"] / np.linalg.norm(nnlm.params["C"], axis=1, keepdims=True)
neighbours = {}
for w in ("king", "bread", "river", "sees"):
    sims = E @ E[vocab.index[w]]
    sims[vocab.index[w]] = -np.inf
    neighbours[w] = [vocab.words[i] for i in np.argsort(-sims)[:4]]
    print(f"{w:>6}: " + ", ".join(neighbours[w]))

# %%
classes = list(CATEGORIES)
words = [w for c in classes for w in CATEGORIES[c] if w in vocab.index]
codes = np.array([classes.index(c) for c in classes for w in CATEGORIES[c] if w in vocab.index])
X = nnlm.params["C"][[vocab.index[w] for w in words]].astype(np.float64)    # (n_words, m)
X = X - X.mean(axis=0)
_, s, Vt = np.linalg.svd(X, full_matrices=False)
pc = X @ Vt[:2].T                                                              # (n_words, 2)
fig, ax = plt.subplots(figsize=(7, 5))
sc = ax.scatter(pc[:, 0], pc[:, 1], c=codes, cmap=plt.get_cmap("tab10", len(classes)),
                vmin=-0.5, vmax=len(classes) - 0.5, s=25)
for (px, py), w in zip(pc, words):
    ax.annotate(w, (px, py), fontsize=7, xytext=(2, 2), textcoords="offset points")
cb = fig.colorbar(sc, ticks=range(len(classes)))
cb.ax.set_yticklabels(classes); cb.set_label("word class in the grammar")
ax.set_xlabel("principal component 1"); ax.set_ylabel("principal component 2")
ax.set_title("NNLM word vectors C(w), projected by PCA")
plt.tight_layout(); plt.show()
print(f"the two components keep {(s[:2] ** 2).sum() / (s ** 2).sum():.0%} of the variance of these rows")

# %% tags=["checks"]
assert neighbours["king"][0] == "prince"
assert set(neighbours["sees"]) <= {"likes", "finds", "wants", "carries", "eats"}
assert len(words) == len(codes) > 40

# %% [markdown]
# Words the grammar uses in the same slots end up close: "king" next to "prince", "sees"
# next to the other transitive verbs. In the plane the subjects' adjectives, the subjects
# (animals, people, royals) and the nouns that follow a verb or a preposition form
# separate groups. Two components keep only part of the variance (printed above), so
# classes that overlap in the picture may still be apart in the 32 dimensions.
#
# **Summary.** Replacing counts by vectors and a network lets a language model share
# statistics between similar words; on the toy language the NNLM beats every n-gram and
# comes within 0.0145 nats/word of the oracle. Its context is still a fixed window of
# $n-1$ words, and its feature vectors are a by-product. Lesson 06 makes the vectors the
# goal (word2vec, GloVe); recurrent models (lessons 07-08) drop the fixed window.

# %% [markdown]
# ## Exercises
# 1. Turn off the direct connections (`W = 0` and no gradient for it) in
#    `nnlm_forward` / `nnlm_backward`. Which lines change, and does the gradcheck still pass?
# 2. A context with the same word twice: show on a tiny example that `np.add.at` gives
#    that row twice the gradient, and that `g["C"][ctx] += ...` would not.
# 3. The mixture picked $\lambda$ on the first half. What does the second half score
#    at $\lambda = 0.5$ and at $\lambda = 1$?
#
# ## Solutions

# %%
# 1. Without W: y = z U^T + b, dx = da H. The check passes on the remaining parameters.
p_nd = {k: v.copy() for k, v in params.items() if k != "W"}
p_nd["W"] = np.zeros_like(params["W"])


def run_no_direct():
    loss, cache = nnlm_forward(ctx, tgt_small, p_nd)
    return loss, lambda dl: {k: g for k, g in nnlm_backward(dl, cache, p_nd).items() if k != "W"}


tgt_small = np.roll(rng.integers(0, V, size=(2, 5)), -1, axis=1).ravel()
print("without direct connections:", gradcheck(run_no_direct, {k: v for k, v in p_nd.items() if k != "W"}).passed)

# %%
# 2. np.add.at accumulates repeated indices; fancy-index += keeps only one of them.
g_add, g_fancy = np.zeros((3, 2)), np.zeros((3, 2))
rows, upd = np.array([1, 1]), np.ones((2, 2))
np.add.at(g_add, rows, upd)
g_fancy[rows] += upd
print("add.at row 1:", g_add[1], " fancy += row 1:", g_fancy[1])

# %%
# 3. The mixture on the second half at other weights.
for l in (0.5, 1.0):
    print(f"lambda {l}: {nats(l * p_net[half:] + (1 - l) * p_tri[half:]):.4f} nats/word")
