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
# # 00 · Backpropagation by hand
#
# Every model in minipt, from Bengio's NNLM to T5, is trained with gradients that are
# written by hand: each layer is a pair of plain functions, a **forward** that computes
# the output and keeps what it needs in a `cache`, and a **backward** that takes the
# gradient of the loss with respect to the output, `dy`, and returns the gradients with
# respect to the inputs and parameters. The chain rule does the rest.

# %% [markdown]
# This lesson
# 1. writes the backward of a two-layer MLP by hand and trains it on a toy task;
# 2. derives the backward of **LayerNorm**, the normaliser in every Transformer block;
# 3. checks both against central differences with `minipt.gradcheck`;
# 4. shows why the check must use a *random* upstream gradient, not all ones.
#
# Shape names used everywhere in minipt: `B` batch, `T` time, `C` channels, `V` vocabulary.

# %%
import matplotlib.pyplot as plt
import numpy as np

from minipt import check_op, gradcheck
from minipt import lesson_budget as budget
from minipt.ops.cross_entropy import cross_entropy_backward, cross_entropy_forward
from minipt.ops.linear import linear_backward, linear_forward
from minipt.ops.norms import layer_norm_backward, layer_norm_forward

rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. A toy task: three interleaved spirals
# 300 points in the plane, three classes. A linear classifier cannot separate them;
# one hidden layer can.

# %%
def spirals(n_per_class, rng):
    xs, ys = [], []
    for k in range(3):
        r = np.linspace(0.1, 1.0, n_per_class)
        angle = np.linspace(k * 4.0, (k + 1) * 4.0, n_per_class) + rng.normal(0, 0.2, n_per_class)
        xs.append(np.stack([r * np.sin(angle), r * np.cos(angle)], axis=1))
        ys.append(np.full(n_per_class, k))
    return np.concatenate(xs), np.concatenate(ys)

X, Y = spirals(100, rng)            # X (N, 2), Y (N,)
plt.figure(figsize=(4.5, 3.5))
plt.scatter(X[:, 0], X[:, 1], c=Y, cmap=plt.get_cmap("viridis", 3), vmin=-0.5, vmax=2.5, s=10)
plt.colorbar(ticks=[0, 1, 2], label="class")
plt.xlabel("x1"); plt.ylabel("x2"); plt.title("three spirals"); plt.axis("equal"); plt.show()

# %% tags=["checks"]
assert X.shape == (300, 2) and np.bincount(Y).tolist() == [100, 100, 100]

# %% [markdown]
# ## 2. The MLP and its backward, derived
# Forward, for a batch `X` (N, 2):
#
# $$h = \tanh(X W_1^\top + b_1), \qquad z = h W_2^\top + b_2, \qquad
#   L = -\frac1N \sum_n \log \operatorname{softmax}(z_n)_{y_n}.$$
#
# Backward, one line per forward line, read bottom to top:
#
# * softmax + cross-entropy: $\partial L/\partial z = (\operatorname{softmax}(z) - \operatorname{onehot}(y)) / N$
# * second linear layer: $\partial L/\partial W_2 = dz^\top h$, $\partial L/\partial b_2 = \sum_n dz_n$, $dh = dz\, W_2$
# * tanh: $da = dh \odot (1 - h^2)$ (the derivative of tanh, written with its output)
# * first linear layer: $dW_1 = da^\top X$, $db_1 = \sum_n da_n$.

# %%
def mlp_forward(X, Y, p):
    a = X @ p["W1"].T + p["b1"]                    # (N, H)
    h = np.tanh(a)                                 # (N, H)
    z = h @ p["W2"].T + p["b2"]                    # (N, 3)
    z_max = z.max(axis=1, keepdims=True)
    logp = z - z_max - np.log(np.exp(z - z_max).sum(axis=1, keepdims=True))  # (N, 3)
    loss = -logp[np.arange(len(Y)), Y].mean()
    return loss, (X, Y, h, logp)


def mlp_backward(cache, p):
    X, Y, h, logp = cache
    N = len(Y)
    dz = np.exp(logp)                              # softmax (N, 3)
    dz[np.arange(N), Y] -= 1
    dz /= N                                        # dL/dz (N, 3)
    g = {"W2": dz.T @ h, "b2": dz.sum(axis=0)}     # (3, H), (3,)
    dh = dz @ p["W2"]                              # (N, H)
    da = dh * (1 - h ** 2)                         # (N, H)
    g["W1"] = da.T @ X                             # (H, 2)
    g["b1"] = da.sum(axis=0)                       # (H,)
    return g


H = 32
params = {"W1": rng.normal(0, 1.0, (H, 2)), "b1": np.zeros(H),
          "W2": rng.normal(0, 0.1, (3, H)), "b2": np.zeros(3)}

# %% [markdown]
# ## 3. Check it before training it
# `minipt.gradcheck(run, arrays)` nudges every element of every array by $\pm h$ and
# $\pm 2h$, recomputes the loss and compares the fourth-order central difference
# $\big(8(L(a+h) - L(a-h)) - (L(a+2h) - L(a-2h))\big)/12h$ with the backward. It runs in
# float64: in float32 round-off (1e-7) swamps the difference quotient. A correct backward
# gives relative errors of order 1e-10 (asserted below 1e-8); a wrong one, near 1.

# %%
def run():
    loss, cache = mlp_forward(X[:20], Y[:20], params)
    return loss, lambda dloss: {k: v * dloss for k, v in mlp_backward(cache, params).items()}

result = gradcheck(run, params)
print(result)

# %% tags=["checks"]
assert result.passed and result.max_error() < 1e-8

# %% [markdown]
# The same network from minipt's ops gives the same loss and gradients: the lesson's
# code and the library's agree.

# %%
a, c1 = linear_forward(X, params["W1"], params["b1"])
h = np.tanh(a)
z, c2 = linear_forward(h, params["W2"], params["b2"])
loss_ops, c3 = cross_entropy_forward(z, Y)
dz = cross_entropy_backward(1.0, c3)
dh, dW2, db2 = linear_backward(dz, c2)
_, dW1, db1 = linear_backward(dh * (1 - h ** 2), c1)
loss_hand, cache = mlp_forward(X, Y, params)
g = mlp_backward(cache, params)
print(f"loss by hand {loss_hand:.12f}, by ops {float(loss_ops):.12f}")

# %% tags=["checks"]
assert np.isclose(loss_hand, loss_ops) and np.allclose(g["W1"], dW1) and np.allclose(g["W2"], dW2)

# %% [markdown]
# ## 4. Train it
# Plain gradient descent in float32, as every minipt training run: 600 steps at the full
# budget (`MINIPT_LESSON_BUDGET`, see `lessons/README.md`), 200 at the quick one.

# %%
p32 = {k: v.astype(np.float32) for k, v in params.items()}
X32 = X.astype(np.float32)
losses = []
for step in range(budget.pick(full=600, quick=200)):
    loss, cache = mlp_forward(X32, Y, p32)
    grads = mlp_backward(cache, p32)
    for k in p32:
        p32[k] -= 1.0 * grads[k]
    losses.append(float(loss))
accuracy = (mlp_forward(X32, Y, p32)[1][3].argmax(axis=1) == Y).mean()
print(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}, training accuracy {accuracy:.0%}, dtype {p32['W1'].dtype}")

fig, ax = plt.subplots(1, 2, figsize=(8, 3.5))
ax[0].plot(losses); ax[0].set_xlabel("step"); ax[0].set_ylabel("loss"); ax[0].set_title("training loss")
gx, gy = np.meshgrid(np.linspace(-1.1, 1.1, 120), np.linspace(-1.1, 1.1, 120))
grid = np.stack([gx.ravel(), gy.ravel()], axis=1).astype(np.float32)
pred = (np.tanh(grid @ p32["W1"].T + p32["b1"]) @ p32["W2"].T).argmax(axis=1)
ax[1].contourf(gx, gy, pred.reshape(gx.shape), levels=[-0.5, 0.5, 1.5, 2.5], alpha=0.3, cmap="viridis")
sc = ax[1].scatter(X[:, 0], X[:, 1], c=Y, cmap=plt.get_cmap("viridis", 3), vmin=-0.5, vmax=2.5, s=8)
fig.colorbar(sc, ax=ax[1], ticks=[0, 1, 2], label="class (points) and predicted class (regions)")
ax[1].set_xlabel("x1"); ax[1].set_ylabel("x2"); ax[1].set_title("decision regions")
plt.tight_layout(); plt.show()

# %% tags=["checks"]
assert losses[-1] < 0.5 * losses[0]
budget.stated("first loss", losses[0], "1.207")
budget.stated("last loss", losses[-1], "0.040")
budget.stated("training accuracy", accuracy, "1.00")

# %% [markdown]
# At the full budget the loss falls from 1.207 (a uniform guess would give $\ln 3 = 1.099$)
# to 0.040, and the network classifies all 300 training points correctly: one hidden
# layer bends the decision regions around the spirals.
#
# ## 5. LayerNorm's backward
# LayerNorm (Ba et al. 2016) normalises each row of `x` (…, C) over its C features:
#
# $$\mu = \tfrac1C \sum_i x_i,\quad \sigma^2 = \tfrac1C\sum_i (x_i-\mu)^2,\quad
#   r = (\sigma^2+\epsilon)^{-1/2},\quad \hat x_i = (x_i - \mu)\, r,\quad y_i = g_i \hat x_i + b_i .$$

# %% [markdown]
# Gains and biases are easy: $dg = \sum_{\text{rows}} dy \odot \hat x$, $db = \sum_{\text{rows}} dy$.
# For the input, write $d\hat x = dy \odot g$. Every $\hat x_j$ depends on every $x_i$ through
# $\mu$ and $r$, with $\partial \mu/\partial x_i = 1/C$ and $\partial r/\partial x_i = -r^3 (x_i-\mu)/C$:
#
# $$\frac{\partial \hat x_j}{\partial x_i} = r\Big(\delta_{ij} - \tfrac1C\Big) - \tfrac{r}{C}\,\hat x_j \hat x_i .$$
#
# Summing against $d\hat x_j$ gives the three-term formula minipt's `layer_norm_backward` uses:
#
# $$dx_i = r\Big(d\hat x_i - \underbrace{\tfrac1C\textstyle\sum_j d\hat x_j}_{\text{mean term}}
#          - \hat x_i\,\underbrace{\tfrac1C\textstyle\sum_j d\hat x_j \hat x_j}_{\text{variance term}}\Big).$$
#
# So the forward only has to cache $\hat x$ (or $x$, $\mu$) and $r$ per row.

# %%
x = rng.standard_normal((4, 8))
g_ln, b_ln = rng.standard_normal(8), rng.standard_normal(8)
res = check_op(layer_norm_forward, layer_norm_backward, {"x": x, "g": g_ln, "b": b_ln}, params=("g", "b"))
print(res)

# %% tags=["checks"]
assert res.passed and res.max_error() < 1e-8

# %% [markdown]
# ## 6. Why the upstream gradient must be random
# Suppose we forget the variance term. Check it the lazy way, with $L = \sum y$
# (an all-ones upstream gradient) and $g = 1$: then $d\hat x$ is the same number in every
# position of a row, the mean term cancels it exactly, and the variance term is
# $\hat x_i \cdot \text{const} \cdot \operatorname{mean}(\hat x) = 0$ because $\hat x$ has zero
# mean. The true gradient is zero, and so is the buggy one: **the bug is invisible**.
# With a random upstream gradient (what `gradcheck` draws) it is caught at once.

# %%
def buggy_layer_norm_backward(dy, cache):
    """LayerNorm backward with the variance term left out (a wrong formula)."""
    xhat, r, g = cache
    dxhat = dy * g
    dx = r * (dxhat - dxhat.mean(axis=-1, keepdims=True))         # no - xhat * mean(dxhat * xhat)
    return dx


def ln(x, g):
    mu = x.mean(axis=-1, keepdims=True)
    r = 1.0 / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5)
    xhat = (x - mu) * r
    return g * xhat, (xhat, r, g)


ones_g = np.ones(8)


def numeric_grad(upstream, eps=1e-6):
    """Central differences of L = sum(y * upstream) with respect to every x."""
    num = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + eps; plus = np.sum(ln(x, ones_g)[0] * upstream)
        x[i] = old - eps; minus = np.sum(ln(x, ones_g)[0] * upstream)
        x[i] = old
        num[i] = (plus - minus) / (2 * eps)
    return num


gaps = {}
for label, upstream in [("all-ones upstream", np.ones_like(x)), ("random upstream", rng.standard_normal(x.shape))]:
    _, cache = ln(x, ones_g)
    buggy = buggy_layer_norm_backward(upstream, cache)
    gaps[label] = np.abs(buggy - numeric_grad(upstream)).max()
    print(f"{label:>18}: largest |buggy - numeric| = {gaps[label]:.1e}")

# %% tags=["checks"]
assert gaps["all-ones upstream"] < 1e-8 and gaps["random upstream"] > 0.1

# %% [markdown]
# With all ones the buggy gradient and the truth are both zero (up to round-off, below 1e-8)
# and nothing looks wrong; with a random upstream they differ by order one. That is why every gradient check in
# minipt draws `G ~ N(0, 1)` and checks `sum(y * G)`.
#
# **Summary.** A layer is a forward/backward pair; backward mirrors forward line by line;
# gradients are checked in float64 against central differences with a random upstream
# gradient before anything is trained. `minipt gradcheck` runs that check for every op and
# module in the library.

# %% [markdown]
# ## Exercises
# 1. Derive RMSNorm's backward ($y = g \odot x r$, $r = (\overline{x^2} + \epsilon)^{-1/2}$: no
#    mean subtraction, no bias) and check it against `minipt.ops.norms.rms_norm_backward`.
# 2. Replace tanh by ReLU in the MLP: which line of the backward changes? Gradcheck it.
# 3. Why does the gradient check of ReLU need inputs away from 0?
#
# ## Solutions

# %%
# 1. As LayerNorm's, without the mean term: dx = r (dxhat - xhat mean(dxhat xhat)), dg = sum(dy xhat).
from minipt.ops.norms import rms_norm_backward, rms_norm_forward


def rms_backward_by_hand(dy, x, g, eps=1e-6):
    r = 1 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)     # (..., 1)
    xhat, dxhat = x * r, dy * g                                     # (..., C)
    return r * (dxhat - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True)), (dy * xhat).sum(axis=0)


xr, gr, dyr = rng.standard_normal((4, 8)), rng.standard_normal(8), rng.standard_normal((4, 8))
_, rms_cache = rms_norm_forward(xr, gr)
dx_lib, dg_lib = rms_norm_backward(dyr, rms_cache)
dx_me, dg_me = rms_backward_by_hand(dyr, xr, gr)
print("equal to minipt's:", np.allclose(dx_me, dx_lib), np.allclose(dg_me, dg_lib))
print("minipt's RMSNorm passes its gradcheck:",
      check_op(rms_norm_forward, rms_norm_backward, {"x": xr, "g": gr}, params=("g",)).passed)

# %%
# 2. Only the activation's line: da = dh * (a > 0) instead of dh * (1 - h**2); the cache keeps a.
def relu_mlp(X, Y, p):
    a = X @ p["W1"].T + p["b1"]                                     # (N, H)
    h = np.maximum(a, 0)
    z = h @ p["W2"].T + p["b2"]
    logp = z - z.max(1, keepdims=True) - np.log(np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True))
    N = len(Y)

    def backward(dloss):
        dz = np.exp(logp); dz[np.arange(N), Y] -= 1; dz *= dloss / N
        da = (dz @ p["W2"]) * (a > 0)                               # the changed line
        return {"W2": dz.T @ h, "b2": dz.sum(0), "W1": da.T @ X, "b1": da.sum(0)}
    return -logp[np.arange(N), Y].mean(), backward


away = np.abs(X @ params["W1"].T + params["b1"]).min(axis=1) > 1e-3      # points with no a near a kink
Xa, Ya = X[away][:20], Y[away][:20]
print("ReLU MLP gradcheck, points away from the kink:", gradcheck(lambda: relu_mlp(Xa, Ya, params), params).passed)

# %%
# 3. At a kink the central difference straddles both slopes: for relu at 1e-5 with a step of
#    3e-4 it averages 0 and 1, while the backward says 1.
kink = 1e-5
numeric = (max(kink + 3e-4, 0) - max(kink - 3e-4, 0)) / 6e-4
print(f"relu'(1e-5): backward 1.0, central difference {numeric:.3f}")
