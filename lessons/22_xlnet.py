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
# # 22 · XLNet: every factorisation order, two streams
#
# A left-to-right LM factorises $p(x) = \prod_t p(x_t \mid x_{<t})$ and so only ever
# conditions on the left; BERT sees both sides but predicts masked tokens independently
# of each other. XLNet (Yang et al. 2019) keeps the autoregressive product and samples
# **the order** instead: for a permutation $z$ of $1..T$,
#
# $$\log p(x) = \sum_{t=1}^{T} \log p\big(x_{z_t} \mid x_{z_{<t}}\big),$$
#
# and in expectation over $z$ every token is predicted from every subset of the others.
# Tokens keep their positions; only the attention masks follow $z$. This lesson draws an
# order and its masks, shows why one stream is not enough (the **two-stream attention**),
# checks minipt's XLNet (`minipt.models.unified.xlnet`) against its gradients and against
# the independence of the query stream from its own token, and trains it on the toy
# language.
#
# What is left out: Transformer-XL's segment **recurrence** (a memory of the previous
# segment's states). Every window here is read on its own; the relative positional
# attention is kept. Shapes: `B` batch, `T` time, `C` channels, `V` vocabulary, `H`
# heads, `D` head size.

# %%
import matplotlib.pyplot as plt
import numpy as np

from minipt import lesson_budget as budget
from minipt.core.module import eval_mode
from minipt.data.hmm_language import toy_corpus
from minipt.models import registry
from minipt.models.unified.xlnet import XLNet, XLNetConfig, tiny_model
from minipt.objectives.permutation import order_masks, permutation_lm
from minipt.ops.relative_attention import rel_shift_forward
from minipt.recipes.xlnet import PermutedWindows
from minipt.tokenizers.char import CharTokenizer
from minipt.train import TrainConfig, train

# %% [markdown]
# ## 1. An order and its masks
# `permutation_lm` samples $z$ and predicts only its last $1/K$ (**partial prediction**:
# the first tokens of an order have too little context to be worth predicting). With
# $\mathrm{rank}[i]$ the place of position $i$ in $z$:
#
# - the **content stream** $h_i$ may attend to $j$ when $\mathrm{rank}[j] \le \mathrm{rank}[i]$
#   (itself included): it is the representation other tokens read;
# - the **query stream** $g_i$ may attend to $j$ when $\mathrm{rank}[j] < \mathrm{rank}[i]$:
#   it predicts $x_i$, so it must not see $x_i$.

# %%
T, K = 8, 4
made = permutation_lm(np.arange(T), np.random.default_rng(3), K)
order = made["order"]
content, query = made["content_mask"], made["query_mask"]
print("order z:", order.tolist(), " predicted positions:", np.nonzero(made["targets"] >= 0)[0].tolist())
assert np.array_equal(content, order_masks(order)[0]) and np.array_equal(query, order_masks(order)[1])
assert content.diagonal().all() and not query.diagonal().any()
assert (content & ~query).sum() == T                      # the two masks differ by the diagonal only

fig, axes = plt.subplots(1, 2, figsize=(8, 3.6))
for ax, m, title in zip(axes, (content, query), ("content stream h (sees itself)", "query stream g (never itself)")):
    ax.imshow(m, cmap="Greens", vmin=0, vmax=1.3)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("key position j")
    ax.set_ylabel("query position i")
    for r, i in enumerate(order):
        ax.text(-1.2, i, f"z{r}", va="center", fontsize=7, color="gray")
plt.tight_layout()
plt.show()

# %% [markdown]
# Row $i$ of each picture is what position $i$ may read; rows ordered by the picture,
# labels $z_r$ give each position's place in the order. The position first in $z$
# reads only itself in the content stream and nothing in the query stream.
#
# ## 2. Why two streams
# A standard Transformer would predict $x_{z_t}$ from $h_{z_t}$, but $h$ is computed from
# the token itself, so it cannot also be the query that predicts it. Dropping the token
# from $h$ would not do either: then the prediction would not know **which position** it
# predicts, and $p(x_{z_t} = y \mid x_{z_{<t}})$ would be the same for every target
# position. XLNet keeps two states per position with shared weights:
#
# $$g_i^{(m)} = \mathrm{Attn}\big(Q = g_i^{(m-1)},\ KV = h_{z_{<t}}^{(m-1)}\big),\qquad
# h_i^{(m)} = \mathrm{Attn}\big(Q = h_i^{(m-1)},\ KV = h_{z_{\le t}}^{(m-1)}\big),$$
#
# with $g^{(0)} = w$ (one learned vector, `mask_emb`) and $h^{(0)}$ the token embeddings.
# The position reaches $g_i$ through the relative encodings of $i - j$ in its attention
# scores (section 3). The claim to check: the query stream's prediction at $i$ does not
# change when $x_i$, or anything later in the order, changes; it does when an earlier
# token changes.

# %%
model = tiny_model()                                      # float64, V 7, C 8, 2 layers
idx = np.array([[1, 2, 3, 4, 5, 6]])
z = np.array([3, 0, 5, 1, 4, 2])
_, base = model(idx, None, z)
unchanged = changed = 0
for r, i in enumerate(z):
    for j in range(6):
        other = idx.copy()
        other[0, j] = (other[0, j] + 1) % 7
        same = np.array_equal(model(other, None, z)[1][0, i], base[0, i])
        later = list(z).index(j) >= r                     # j is i itself or after it in z
        assert same == later
        unchanged += same
        changed += not same
print(f"{unchanged} (position, edit) pairs leave the prediction unchanged (the edit is at or after it in z), "
      f"{changed} change it")

# %% [markdown]
# ## 3. Relative positions and the shift
# XLNet takes Transformer-XL's attention score (Dai et al. 2019):
#
# $$A_{ij} = (q_i + u)^\top k_j + (q_i + v)^\top W_r R_{i-j}\ \big[+ (q_i + b)^\top s_{ij}\big],$$
#
# $u$ = `r_w_bias` (content), $v$ = `r_r_bias` (position), $R_m$ a sinusoid of the
# distance $m$, and, with segments, $s_{ij}$ one of two learned vectors (same segment or
# not). The position term is computed against all $2T$ distances $T, T-1, \dots, -T+1$
# as one matrix product, then each row is slid into place: $bd[i, j] = bd_{full}[i, T - i + j]$.
# Transformer-XL does this without any index arithmetic: view the $(T, 2T)$ block as
# $(2T, T)$, drop the first row, view the rest as $(T, 2T-1)$ and keep $T$ columns. Each step
# relabels memory, so the backward is the same views in reverse with zeros in the
# dropped places.

# %%
full = np.arange(4 * 8).reshape(1, 1, 4, 8)               # (B, H, T, 2T): entry = 8 i + column
shifted, _ = rel_shift_forward(full, 4)
print(shifted[0, 0])
i, j = np.arange(4)[:, None], np.arange(4)[None, :]
assert np.array_equal(shifted[0, 0], full[0, 0, i, 4 - i + j])   # column T - i + j holds distance i - j

# %% [markdown]
# Each row of the result starts further right in its source row: row $i$ reads the
# columns for distances $i, i-1, \dots, i-3$.
#
# ## 4. The gradient check
# Every piece has a hand-written backward: the relative shift, the position and segment
# terms, both streams sharing weights, the tied output layer. The registry's checks run
# minipt's whole XLNet in float64 against central differences: once from token ids in
# left-to-right order, once from token embeddings (so the input gradient is checked too)
# with sampled orders and two segments.

# %%
for case in registry.get("xlnet").all_gradchecks():
    result = case.run()
    print(f"{case.name:24s} ({case.shapes}): max relative error {result.max_error():.1e}, worst {result.worst.name}")
    assert result.passed and result.max_error() < 1e-6

# %% [markdown]
# ## 5. Training on the toy language
# Windows of 24 characters, each with its own order; the last quarter of each order is
# predicted. The validation loss is the same objective on held-out text, in nats per
# predicted character. Because the left-to-right order is one of the orders, the same
# model can then read the validation text left to right (the query stream at $t$ predicts
# $x_t$ from $x_{<t}$), which we compare with the toy language's oracle.

# %%
steps = budget.pick(full=800, quick=150)
train_text, val_text, oracle, _ = toy_corpus(budget.pick(full=200_000, quick=40_000), seed=0)
tok = CharTokenizer().fit(train_text + val_text)
data = PermutedWindows(tok.encode_array(train_text).astype(np.int64), tok.encode_array(val_text).astype(np.int64),
                       24, 16, 4)
model = XLNet(XLNetConfig(vocab_size=tok.vocab_size, n_layer=2, n_head=2, d_model=32, activation="gelu_tanh"),
              rng=np.random.default_rng(0))
val_batches = [data.get_batch("val", np.random.default_rng(100 + k)) for k in range(20)]


def val_loss(m) -> float:
    with eval_mode(m):
        return float(np.mean([float(m(*b)[0]) for b in val_batches]))


start = val_loss(model)
result = train(model, data.get_batch, TrainConfig(steps=steps, lr=3e-3, min_lr=3e-4, warmup=steps // 10,
                                                   eval_every=max(steps // 8, 1), eval_batches=5, progress=False))
end = val_loss(model)
left_to_right = data.left_to_right_loss(model)
print(f"{model.num_parameters():,} parameters, {steps} steps in {result.seconds:.0f} s")
print(f"permutation-LM validation loss: {start:.3f} at the start (log V = {np.log(tok.vocab_size):.3f}), "
      f"{end:.3f} after training")
print(f"left-to-right loss of the validation text {left_to_right:.3f} nats/char; oracle {oracle:.3f}")

hist = [h for h in result.history if "loss" in h]
plt.figure(figsize=(6, 3.2))
plt.plot([h["step"] for h in hist], [h["loss"] for h in hist], label="train (permuted orders)")
ev = [h for h in result.history if h.get("val_loss") is not None]
plt.plot([h["step"] for h in ev], [h["val_loss"] for h in ev], "o-", label="validation")
plt.axhline(oracle, color="gray", ls="--", label="oracle, left to right")
plt.xlabel("step")
plt.ylabel("nats per predicted char")
plt.legend()
plt.show()

assert end < start - 0.5                                  # it learns, at either budget
assert left_to_right < start

# %% [markdown]
# At the full budget the permutation loss falls from 3.3 to 1.28 nats per predicted
# character, while the left-to-right loss is 2.08 against the oracle's 0.42. The model
# learnt what it was asked: to predict a character from the three quarters of its window
# that come before it *in the order*, which lie on both sides of it. Read left to right,
# most characters have far less context (the first of a window has none), and a
# left-to-right order is one of $24!$ possible orders: most likely it never saw it.

# %% tags=["checks"]
budget.stated("start loss", start, "3.3")
budget.stated("permutation loss after training", end, "1.28")
budget.stated("left-to-right loss", left_to_right, "2.08")
budget.stated("oracle", oracle, "0.42")

# %% [markdown]
# ## Summary
# - XLNet samples a factorisation order per sequence; masks, not token positions, follow it.
# - Two streams share weights: the content stream sees its own token, the query stream
#   only its position and the tokens earlier in the order, so it can predict its own token.
# - Relative positional attention (Transformer-XL) with the two biases $u$, $v$ and the
#   relative shift; segments enter as a relative same/different term.
# - Only the last $1/K$ of each order is predicted.
#
# **Exercises.** (1) Train with $K = 2$ and $K = 8$: which predicts better per token, and
# why? (2) Replace the query stream by the content stream with its diagonal masked out:
# what does the model lose (section 2)? (3) Compare the left-to-right loss of this model
# with a GPT of the same size trained left to right (lesson 09).
