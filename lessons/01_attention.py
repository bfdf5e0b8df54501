# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 01 · Attention, its masks and its backward
#
# Every pretrained Transformer in minipt (GPT, BERT, T5, UniLM, XLNet ...) is built from one
# operation, **scaled dot-product attention** (Vaswani et al. 2017):
#
# $$\operatorname{Attention}(Q, K, V) = \operatorname{softmax}\!\Big(\frac{Q K^\top}{\sqrt{D}} + M\Big)\, V,$$

# %% [markdown]
# where the mask $M$ is $0$ where a query may look at a key and $-\infty$ where it may not.
# What separates GPT from BERT from T5 is, to a surprising degree, **only that mask** (and
# how positions enter). This lesson
# 1. writes attention from the equation and checks it against `minipt.ops.attention`;
# 2. splits it into heads (`MultiHeadAttention`);
# 3. draws the mask family as heat maps;
# 4. derives the backward of softmax and of attention, and gradchecks it;
# 5. ends with a table of the mask and position choices of GPT, BERT, T5 and UniLM.
#
# Shape names used everywhere in minipt: `B` batch, `T` time (queries), `S` source (keys),
# `C` channels (model width), `H` heads, `D = C / H` head size.

# %%
import math

import matplotlib.pyplot as plt
import numpy as np

from minipt import check_module, check_op
from minipt.nn import masks
from minipt.nn.attention import MultiHeadAttention
from minipt.ops.attention import attention_backward, attention_forward

rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. Attention from the equation
# One batch element, one head: $T$ queries and $S$ keys/values, each a vector of size $D$.
# Score $s_{ij} = q_i \cdot k_j / \sqrt{D}$ says how well query $i$ matches key $j$; a softmax
# over $j$ turns row $i$ into weights $p_{ij} \ge 0$ that sum to one; the output $o_i$ is the
# weighted average $\sum_j p_{ij} v_j$.

# %%
T, S, D = 4, 6, 8
q = rng.standard_normal((T, D))           # (T, D)
k = rng.standard_normal((S, D))           # (S, D)
v = rng.standard_normal((S, D))           # (S, D)


def softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))   # subtract the row max: exp never overflows
    return e / e.sum(axis=-1, keepdims=True)


s = q @ k.T / math.sqrt(D)                # (T, S) scores
p = softmax(s)                            # (T, S) weights, rows sum to 1
o = p @ v                                 # (T, D) outputs
print("row sums of p:", p.sum(axis=1))

# minipt's op works on (B, H, T, D): add two axes of size 1
o_op, cache = attention_forward(q[None, None], k[None, None], v[None, None])
print("max |by hand - minipt| =", np.abs(o_op[0, 0] - o).max())

# %% tags=["checks"]
assert np.allclose(p.sum(axis=1), 1) and np.abs(o_op[0, 0] - o).max() < 1e-12

# %% [markdown]
# **Why divide by $\sqrt{D}$?** If the entries of $q$ and $k$ are independent with variance 1,
# $q \cdot k$ is a sum of $D$ such products and has variance $D$. Large scores push the softmax
# into a near one-hot corner where its gradient vanishes. Dividing by $\sqrt D$ brings the
# variance back to 1 whatever the head size (2000 samples each, so within a few percent):

# %%
variances = {}
for d in (4, 64, 1024):
    dots = (rng.standard_normal((2000, d)) * rng.standard_normal((2000, d))).sum(axis=1)
    variances[d] = dots.var()
    print(f"D = {d:5d}: var(q.k) = {dots.var():7.1f}   var(q.k / sqrt(D)) = {(dots / math.sqrt(d)).var():.2f}")

# %% [markdown]
# ## 2. Many heads
# Multi-head attention projects $x$ (B, T, C) to $Q, K, V$ (B, T, C) with one matrix
# `c_attn` (C, 3C), splits C into H heads of size D, runs attention in each head
# independently, concatenates the heads back to C and mixes them with `c_proj`.
# Each head can attend to something different (a previous token, a matching bracket ...).
# The reshape is the whole trick: `(B, T, C) -> (B, T, H, D) -> (B, H, T, D)`.

# %%
B, T, C, H = 2, 5, 12, 3
D = C // H
mha = MultiHeadAttention(C, H, rng=np.random.default_rng(1), dtype=np.float64, std=0.3)
x = rng.standard_normal((B, T, C))        # (B, T, C)
y = mha(x, causal=True)                   # (B, T, C)

# the same thing one head at a time, from the weights
W, b = mha.c_attn.params["weight"], mha.c_attn.params["bias"]       # (3C, C), (3C,)
qkv = x @ W.T + b                                                   # (B, T, 3C): q | k | v
heads = []
for h in range(H):
    cols = slice(h * D, (h + 1) * D)
    qh, kh, vh = qkv[..., :C][..., cols], qkv[..., C:2 * C][..., cols], qkv[..., 2 * C:][..., cols]   # (B, T, D)
    sh = qh @ kh.transpose(0, 2, 1) / math.sqrt(D)                  # (B, T, T)
    sh = np.where(np.tril(np.ones((T, T), bool)), sh, -np.inf)      # causal mask
    heads.append(softmax(sh) @ vh)                                  # (B, T, D)
by_hand = np.concatenate(heads, axis=-1) @ mha.c_proj.params["weight"].T + mha.c_proj.params["bias"]
print("max |per-head loop - MultiHeadAttention| =", np.abs(by_hand - y).max())

# %% tags=["checks"]
assert all(abs(v / d - 1) < 0.1 for d, v in variances.items())
assert np.abs(by_hand - y).max() < 1e-12

# %% [markdown]
# ## 3. The mask family
# A mask in minipt is a boolean **may-attend** array: `mask[i, j]` is True when query $i$ may
# look at key $j$ (row = query, column = key). The op turns False into $-\infty$ before the
# softmax, so those weights are exactly zero. Each pre-training objective is a mask:

# %% [markdown]
# - **bidirectional**: everyone sees everyone (BERT, encoders);
# - **causal** (left-to-right): $j \le i$ (GPT, decoders);
# - **right-to-left**: $j \ge i$ (UniLM's backward LM, ELMo's backward direction);
# - **prefix / seq2seq**: a source block sees itself fully, the target sees the source and
#   its own past (UniLM seq2seq, T5's prefix LM);
# - **padding**: keys beyond each sequence's length are hidden (every model with batches);
# - **banded**: causal within a window (GPT-3's sparse layers, after Child et al. 2019);
# - **arbitrary / permutation**: XLNet samples an order $z$ of the positions and lets $i$ see
#   $j$ when $j$ comes earlier in $z$: any may-attend matrix is allowed.

# %%
T = 8
order = np.random.default_rng(3).permutation(T)          # a factorisation order z
rank = np.empty(T, int)
rank[order] = np.arange(T)                                # rank[i]: when position i comes in z
family = {
    "bidirectional (BERT)": masks.bidirectional(T),
    "causal (GPT)": masks.causal(T),
    "right-to-left": masks.right_to_left(T),
    "prefix 3 / seq2seq": masks.prefix(T, 3),
    "padding (length 5)": np.broadcast_to(masks.padding(np.array([5]), T)[0], (T, T)),
    "banded, window 3 (GPT-3)": masks.banded(T, 3),
    f"permutation z={order.tolist()}": masks.from_matrix(rank[None, :] < rank[:, None]),
}
fig, axes = plt.subplots(1, len(family), figsize=(2.2 * len(family), 2.6))
for ax, (name, m) in zip(axes, family.items()):
    im = ax.imshow(m, cmap="Blues", vmin=0, vmax=1)
    ax.set_title(name, fontsize=7)
    ax.set_xticks([]); ax.set_yticks([]); ax.set_xlabel("key j", fontsize=7)
axes[0].set_ylabel("query i")
fig.colorbar(im, ax=axes, ticks=[0, 1], shrink=0.8, label="1: query i may attend to key j")
fig.suptitle("the mask family", fontsize=9)
plt.show()

# %% [markdown]
# A row of the permutation mask is empty for the first position of $z$ (it sees nothing,
# as the first token of a causal LM would if it could not see itself); the op returns a
# zero output and zero gradient for such a row instead of NaN:

# %%
qq, kk, vv = (rng.standard_normal((1, 1, T, 4)) for _ in range(3))
perm_mask = family[f"permutation z={order.tolist()}"]
out, c = attention_forward(qq, kk, vv, perm_mask)
dq, dk, dv = attention_backward(rng.standard_normal(out.shape), c)[:3]
print(f"position {order[0]} (first in z) sees {perm_mask[order[0]].sum()} keys; its output {out[0, 0, order[0]]}, "
      f"its query's gradient {dq[0, 0, order[0]]}")

# %% tags=["checks"]
assert not perm_mask[order[0]].any() and np.all(out[0, 0, order[0]] == 0) and np.all(dq[0, 0, order[0]] == 0)
assert np.isfinite(out).all() and np.isfinite(dq).all()

# %% [markdown]

# The masks act on the weights: here are the attention weights of one head under three of
# them (the same $q, k$; only the mask differs).

# %%
fig, axes = plt.subplots(1, 3, figsize=(7.5, 2.6))
for ax, name in zip(axes, ["bidirectional (BERT)", "causal (GPT)", "prefix 3 / seq2seq"]):
    _, c = attention_forward(qq, kk, vv, family[name])
    im = ax.imshow(c["p"][0, 0], cmap="viridis", vmin=0, vmax=1)
    ax.set_title(f"weights p, {name.split(' (')[0]}", fontsize=8)
    ax.set_xticks([]); ax.set_yticks([]); ax.set_xlabel("key j", fontsize=8)
axes[0].set_ylabel("query i")
fig.colorbar(im, ax=axes, shrink=0.8, label="attention weight")
plt.show()

# %% [markdown]
# ## 4. The backward of softmax, then of attention
# **Softmax.** For one row, $p_j = e^{s_j} / \sum_l e^{s_l}$. Its Jacobian is
# $\partial p_j / \partial s_i = p_j(\delta_{ij} - p_i)$. Given the upstream gradient
# $dp = \partial L / \partial p$,
#
# $$ds_i = \sum_j dp_j\, p_j(\delta_{ij} - p_i) = p_i\Big(dp_i - \sum_j dp_j\, p_j\Big).$$
#
# So the backward needs only the output $p$ (cached by the forward): multiply, take one dot
# product per row, subtract. A masked entry has $p_j = 0$, hence $ds_j = 0$: no gradient
# flows to a key the query was not allowed to see.
#
# **Attention.** Read the forward bottom-up, one line at a time:

# %% [markdown]
# | forward | backward |
# |---|---|
# | $O = P V$ | $dV = P^\top dO$,  $dP = dO\, V^\top$ |
# | $P = \operatorname{softmax}(S)$ | $dS = P \odot (dP - \operatorname{rowsum}(dP \odot P))$ |
# | $S = Q K^\top / \sqrt D$ | $dQ = dS\, K / \sqrt D$,  $dK = dS^\top Q / \sqrt D$ |
#
# Written out for one head:

# %%
def attention_backward_by_hand(dO, q, k, v, p):
    """dO (T, D); q (T, D); k, v (S, D); p (T, S) -> dq, dk, dv."""
    dv = p.T @ dO                                              # (S, D)
    dp = dO @ v.T                                              # (T, S)
    ds = p * (dp - (dp * p).sum(axis=1, keepdims=True))        # (T, S) softmax backward
    d = q.shape[1]
    return ds @ k / math.sqrt(d), ds.T @ q / math.sqrt(d), dv  # dq (T, D), dk (S, D)


T, S, D = 4, 6, 8
q, k, v = rng.standard_normal((T, D)), rng.standard_normal((S, D)), rng.standard_normal((S, D))
mask = masks.prefix(6, 2)[2:]                                  # (T, S): 4 target rows over 6 keys
out, cache = attention_forward(q[None, None], k[None, None], v[None, None], mask)
dO = rng.standard_normal((T, D))
mine = attention_backward_by_hand(dO, q, k, v, cache["p"][0, 0])
theirs = attention_backward(dO[None, None], cache)[:3]
for name, a, b_ in zip(("dq", "dk", "dv"), mine, theirs):
    print(f"{name}: max |by hand - minipt| = {np.abs(a - b_[0, 0]).max():.1e}")

# %% [markdown]
# ## 5. Check it by central differences
# As in lesson 00: $L = \sum O \odot G$ for a random $G$, every input nudged by $\pm h$,
# float64, pass when the largest relative error is below $10^{-6}$. First the op with a
# causal mask and a key-padding mask, then the whole `MultiHeadAttention` module (its
# input and its four parameter arrays).

# %%
B, H, T, D = 2, 2, 5, 4
inputs = {n: rng.standard_normal((B, H, T, D)) for n in ("q", "k", "v")}
pad = masks.padding(np.array([5, 3]), T)                       # (B, 1, T)
res = check_op(attention_forward, lambda d, c: attention_backward(d, c)[:3], inputs, mask=pad, causal=True)
print(res)

res = check_module(MultiHeadAttention(8, 2, rng=np.random.default_rng(0), dtype=np.float64, std=0.5),
                   rng.standard_normal((2, 4, 8)), forward_kwargs={"causal": True})
print(res)

# %% tags=["checks"]
assert all(np.abs(a - b_[0, 0]).max() < 1e-12 for a, b_ in zip(mine, theirs))
assert res.passed
assert res.passed

# %% [markdown]
# ## 6. One stack, many models: masks and positions
# Attention is blind to order: permuting the keys permutes nothing in the output. Models
# add position information in one of three ways: **learned absolute** vectors added to the
# input (GPT, BERT), a **relative bias** added to the scores by distance bucket (T5), or a
# **rotation** of q and k by angle proportional to the position (RoPE, LLaMA).

# %% [markdown]
# | model | self-attention mask | positions | cross-attention |
# |---|---|---|---|
# | GPT-1/2 | causal | learned absolute, added to the tokens | — |
# | GPT-3 | causal, layers alternating dense and banded | learned absolute | — |
# | BERT | bidirectional + padding | learned absolute + segment embeddings | — |
# | T5 encoder | bidirectional + padding | relative bias: 32 buckets x H, one table for all layers | — |
# | T5 decoder | causal | relative bias (causal buckets) | full over the encoder (+ its padding) |
# | UniLM | one of bidirectional, left-to-right, right-to-left, seq2seq per batch | learned absolute + segment | — |
# | XLNet | permutation (two streams) | relative (Transformer-XL) | — |
# | LLaMA | causal | rotary (RoPE) on q, k | — |

# %% [markdown]
# In minipt these are arguments, not architectures: `TransformerStack(..., causal=...,
# mask=..., layer_masks=..., attn_bias=..., rope=...)` is each of these bodies. The same
# weights under two masks give two different models:

# %%
from minipt.nn.stack import TransformerStack  # noqa: E402

stack = TransformerStack(1, d_model=8, n_heads=2, d_ff=16, rng=np.random.default_rng(0), dtype=np.float64)
x = rng.standard_normal((1, 6, 8))                            # (B, T, C): 3 source + 3 target tokens
as_bert = stack(x)                                            # bidirectional
as_gpt = stack(x, causal=True)                                # left-to-right
as_unilm = stack(x, mask=masks.seq2seq(3, 3))                 # UniLM seq2seq
same = {"position 0, BERT vs GPT": np.allclose(as_bert[0, 0], as_gpt[0, 0]),
        "last position, GPT vs seq2seq": np.allclose(as_gpt[0, -1], as_unilm[0, -1]),
        "source position 1, seq2seq vs BERT on the source alone": np.allclose(as_unilm[0, 1], stack(x[:, :3])[0, 1])}
for question, answer in same.items():
    print(f"{question:<56} equal? {answer}")

# %% tags=["checks"]
assert list(same.values()) == [False, True, True]

# %% [markdown]
# Position 0 sees six tokens under BERT's mask and only itself under GPT's; the last
# position sees everything under both causal and seq2seq masks; a source position under
# the seq2seq mask is exactly a bidirectional encoder over the source. (With more layers
# these equalities hold only where every position a token reads also agrees.)
#
# **Summary.** Attention is a softmax-weighted average of values, scored by $q \cdot k/\sqrt D$;
# its backward needs only the weights $P$ and three matrix products around the softmax
# backward $P \odot (dP - \operatorname{rowsum}(dP \odot P))$. Masks decide which model it is;
# positions are added to the input, to the scores, or rotated into q and k.

# %% [markdown]
# ## Exercises
# 1. Mask by multiplying $P$ by the mask *after* the softmax instead of setting the scores
#    to $-\infty$. Show that the rows no longer sum to one, and that renormalising them gives
#    the masked softmax again.
# 2. Prove that RoPE makes $q_i \cdot k_j$ depend on $i - j$ only, then check it numerically
#    with `minipt.ops.positions.rope_forward`.
#
# ## Solutions

# %%
# 1. exp(s_j) / sum over all l, times the mask, loses the masked terms' share of the sum.
s_ex = rng.standard_normal((4, 4))
m_ex = masks.causal(4)
p_full = np.exp(s_ex) / np.exp(s_ex).sum(1, keepdims=True)
p_after = p_full * m_ex
p_masked = np.where(m_ex, np.exp(s_ex), 0) / np.where(m_ex, np.exp(s_ex), 0).sum(1, keepdims=True)
print("row sums after multiplying:", p_after.sum(1).round(3))
print("renormalised == masked softmax:", np.allclose(p_after / p_after.sum(1, keepdims=True), p_masked))

# %%
# 2. Each pair of channels is rotated by t * theta_i; the dot product of two vectors rotated by
#    angles a and b depends on a - b only. Numerically: shift both positions by 5.
from minipt.ops.positions import rope_forward  # noqa: E402

qv, kv = rng.standard_normal((1, 1, 1, 8)), rng.standard_normal((1, 1, 1, 8))
dot = lambda i, j: float((rope_forward(qv, np.array([i]))[0] * rope_forward(kv, np.array([j]))[0]).sum())
print(f"q_7 . k_3 = {dot(7, 3):.6f}, q_12 . k_8 = {dot(12, 8):.6f}, q_4 . k_0 = {dot(4, 0):.6f}")
