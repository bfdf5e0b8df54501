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
# # 07 · The LSTM: backpropagation through time by hand
#
# A recurrent network reads a sequence one step at a time and carries a state. The LSTM
# (Hochreiter & Schmidhuber 1997, with the forget gate of Gers et al. 2000) carries two,
# a hidden state $h$ and a cell $c$, and gates what enters, stays and leaves the cell.
# This lesson writes the cell and its backward pass through time, checks them in float64
# and against minipt's LSTM, shows why the cell lets gradients travel farther than a
# plain RNN's, and trains an LSTM language model on the toy language.
#
# Shapes: `B` batch, `T` time, `C` input width, `H` hidden width, `V` vocabulary.

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

from minipt import gradcheck
from minipt import lesson_budget as budget
from minipt.core.gradcheck import check_op
from minipt.data.batching import TokenStream
from minipt.data.hmm_language import toy_corpus
from minipt.models import registry
from minipt.ops.lstm import lstm_backward, lstm_forward
from minipt.tokenizers.char import CharTokenizer
from minipt.train import TrainConfig, train

# %% [markdown]
# ## 1. The cell, one step
# With $z_t = x_t W_{ih}^\top + b + h_{t-1} W_{hh}^\top$ split into four blocks of $H$
# (gate order i, f, g, o, as in PyTorch):
#
# $$i = \sigma(z_i),\ f = \sigma(z_f),\ g = \tanh(z_g),\ o = \sigma(z_o),\qquad
#   c_t = f \odot c_{t-1} + i \odot g,\qquad h_t = o \odot \tanh(c_t).$$
#
# The step keeps what its backward needs: the four activated gates, $c_{t-1}$, $\tanh c_t$
# and the step's inputs.

# %%
def sigmoid(a):
    return 1 / (1 + np.exp(-a))


def cell_forward(x_t, h_prev, c_prev, w_ih, w_hh, b):
    """x_t (B, C), h_prev, c_prev (B, H) -> h_t, c_t (B, H), cache."""
    H = h_prev.shape[1]
    z = x_t @ w_ih.T + b + h_prev @ w_hh.T                     # (B, 4H)
    i, f = sigmoid(z[:, :H]), sigmoid(z[:, H:2 * H])           # (B, H) each
    g, o = np.tanh(z[:, 2 * H:3 * H]), sigmoid(z[:, 3 * H:])   # (B, H) each
    c = f * c_prev + i * g                                     # (B, H)
    tc = np.tanh(c)                                            # (B, H)
    return o * tc, c, (x_t, h_prev, c_prev, i, f, g, o, tc)


def lstm_by_hand(x, w_ih, w_hh, b, h0, c0):
    """x (B, T, C) -> y (B, T, H) (every h_t), caches of the T steps."""
    h, c, ys, caches = h0, c0, [], []
    for t in range(x.shape[1]):
        h, c, cache = cell_forward(x[:, t], h, c, w_ih, w_hh, b)
        ys.append(h)
        caches.append(cache)
    return np.stack(ys, axis=1), caches


# %% [markdown]
# ## 2. Backward through time
# Walk the steps backwards. The gradient reaching $h_t$ is the output's $dy_t$ plus what
# step $t+1$ sends back through $z_{t+1}$; the gradient reaching $c_t$ comes from $h_t$
# and from step $t+1$'s cell:
#
# $$dh_t = dy_t + dz_{t+1} W_{hh},\qquad
#   dc_t = dc_{t+1}\odot f_{t+1} + dh_t \odot o \odot (1 - \tanh^2 c_t),$$
# $$dz_i = dc_t\, g\, i(1-i),\ dz_f = dc_t\, c_{t-1} f(1-f),\ dz_g = dc_t\, i (1-g^2),\
#   dz_o = dh_t \tanh(c_t)\, o(1-o).$$
#
# The weight gradients are sums over the steps: $dW_{hh} = \sum_t dz_t^\top h_{t-1}$,
# $dW_{ih} = \sum_t dz_t^\top x_t$, $db = \sum_t dz_t$.

# %%
def cell_backward(dh, dc_next, cache):
    """dh (B, H) reaching h_t, dc_next (B, H) from step t+1's cell -> dz (B, 4H), dc_prev (B, H)."""
    _, _, c_prev, i, f, g, o, tc = cache                       # x_t, h_prev are for the weights
    dc = dc_next + dh * o * (1 - tc ** 2)                      # (B, H)
    dz = np.concatenate([dc * g * i * (1 - i),                 # dz_i
                         dc * c_prev * f * (1 - f),            # dz_f
                         dc * i * (1 - g ** 2),                # dz_g
                         dh * tc * o * (1 - o)], axis=1)       # dz_o (B, 4H)
    return dz, dc * f


def bptt_by_hand(dy, caches, w_ih, w_hh):
    """dy (B, T, H) -> dx (B, T, C), dw_ih, dw_hh, db, dh0, dc0."""
    B, T, H = dy.shape
    dh_next, dc_next = np.zeros((B, H)), np.zeros((B, H))
    dx, dw_ih, dw_hh, db = [None] * T, np.zeros_like(w_ih), np.zeros_like(w_hh), np.zeros(4 * H)
    for t in range(T - 1, -1, -1):
        x_t, h_prev = caches[t][:2]
        dz, dc_next = cell_backward(dy[:, t] + dh_next, dc_next, caches[t])   # (B, 4H), (B, H)
        dx[t] = dz @ w_ih                                      # (B, C)
        dw_ih += dz.T @ x_t                                    # (4H, C)
        dw_hh += dz.T @ h_prev                                 # (4H, H)
        db += dz.sum(axis=0)                                   # (4H,)
        dh_next = dz @ w_hh                                    # (B, H) to h_{t-1}
    return np.stack(dx, axis=1), dw_ih, dw_hh, db, dh_next, dc_next


# %% [markdown]
# ## 3. Check it, then compare it with the library
# The gradcheck draws a random upstream gradient for every output $h_t$ and compares
# $\sum_t \langle dy_t, h_t \rangle$'s central differences with the backward, for the inputs,
# the three weights and both initial states. Then minipt's `lstm_forward` /
# `lstm_backward` (one matrix product for all steps' inputs, a compiled cell) must give
# the same outputs and gradients.

# %%
r = np.random.default_rng(0)
B, T, C, H = 3, 6, 4, 5
arrays = {"x": r.standard_normal((B, T, C)), "w_ih": 0.5 * r.standard_normal((4 * H, C)),
          "w_hh": 0.5 * r.standard_normal((4 * H, H)), "b": 0.3 * r.standard_normal(4 * H),
          "h0": r.standard_normal((B, H)), "c0": r.standard_normal((B, H))}
a = arrays


def run_lstm(bptt=bptt_by_hand):
    y, caches = lstm_by_hand(a["x"], a["w_ih"], a["w_hh"], a["b"], a["h0"], a["c0"])
    names = ("x", "w_ih", "w_hh", "b", "h0", "c0")
    return y, lambda dy: dict(zip(names, bptt(dy, caches, a["w_ih"], a["w_hh"])))


by_hand = gradcheck(run_lstm, arrays)
print(by_hand)
dy = r.standard_normal((B, T, H))                              # one random upstream gradient
y_hand, caches = lstm_by_hand(a["x"], a["w_ih"], a["w_hh"], a["b"], a["h0"], a["c0"])
grads_hand = bptt_by_hand(dy, caches, a["w_ih"], a["w_hh"])
(y_lib, _, _), cache = lstm_forward(a["x"], a["w_ih"], a["w_hh"], a["b"], a["h0"], a["c0"])
dx, dh0, dc0, dw_ih, dw_hh, db, _ = lstm_backward(dy, cache)
np.testing.assert_allclose(y_hand, y_lib, rtol=1e-12, atol=1e-14)
for mine, theirs in zip(grads_hand, (dx, dw_ih, dw_hh, db, dh0, dc0)):
    np.testing.assert_allclose(mine, theirs, rtol=1e-10, atol=1e-12)
print(f"outputs and all six gradients equal minipt's LSTM (largest output gap {np.abs(y_hand - y_lib).max():.0e})")

# %% tags=["checks"]
assert by_hand.passed and by_hand.max_error() < 1e-6

# %% [markdown]
# minipt's LSTM does two more things. **Padding**: a batch of sentences of different
# lengths is padded on the right; `lengths[b]` says how many steps are real. Past it a
# row's state is carried unchanged and its output is 0. **Truncated BPTT**: initial states
# in and final states out let a long stream be cut into chunks; the state is handed on,
# the gradient stops at the cut. The library's own check covers outputs, final states,
# padding and the initial states' gradients; reading in two chunks equals one pass.

# %%
lengths = np.array([6, 4, 1])


def forward(x, w_ih, w_hh, b, h0, c0):
    (y, hn, cn), cache = lstm_forward(x, w_ih, w_hh, b, h0, c0, lengths)
    return np.concatenate([y.ravel(), hn.ravel(), cn.ravel()]), cache  # every output at once


def backward(d, cache):
    n = B * T * H
    dx, dh0, dc0, dw_ih, dw_hh, db, _ = lstm_backward(d[:n].reshape(B, T, H), cache, d[n:n + B * H].reshape(B, H),
                                                      d[n + B * H:].reshape(B, H))
    return dx, dw_ih, dw_hh, db, dh0, dc0


res = check_op(forward, backward, dict(arrays))
print(res)
x, w_ih, w_hh, b, h0, c0 = (arrays[k] for k in ("x", "w_ih", "w_hh", "b", "h0", "c0"))
(y, hn, cn), _ = lstm_forward(x, w_ih, w_hh, b, h0, c0)
(y1, h1, c1), _ = lstm_forward(x[:, :4], w_ih, w_hh, b, h0, c0)
(y2, h2, c2), _ = lstm_forward(x[:, 4:], w_ih, w_hh, b, h1, c1)
gap = np.abs(np.concatenate([y1, y2], 1) - y).max()
print(f"two chunks with the state handed on vs one pass: max difference {gap:.1e}")

# %% tags=["checks"]
assert res.passed and gap < 1e-12

# %% [markdown]
# ## 4. Why the cell: gradients over distance
# In a plain RNN, $h_t = \tanh(x_t W_x^\top + h_{t-1} W_h^\top + b)$, the gradient going
# back one step is multiplied by $W_h^\top \mathrm{diag}(1 - h_t^2)$; over $k$ steps by $k$
# such factors, which shrink it geometrically when their norm is below one (Bengio et al.
# 1994). In the LSTM the cell's path multiplies by $f$ only, elementwise, and a forget
# bias of 1 starts $f$ near $\sigma(1) = 0.73$. Below: the norm of $\partial h_T / \partial x_t$
# for both networks freshly initialised the same way, $U(\pm 1/\sqrt H)$, $H = 64$,
# $T = 100$, averaged over 20 random sequences.

# %%
H, C, T = 64, 16, 100
rng = np.random.default_rng(1)
k = 1 / np.sqrt(H)


def rnn_grad_norms(x, wx, wh, b, dy_last):
    """A tanh RNN, forward and backward written out: |dL/dx_t| for L = <dy_last, h_T>."""
    Bx = x.shape[0]
    hs = [np.zeros((Bx, H))]
    for t in range(T):
        hs.append(np.tanh(x[:, t] @ wx.T + hs[-1] @ wh.T + b))         # (B, H)
    dh, norms = dy_last, np.zeros(T)
    for t in range(T - 1, -1, -1):
        dz = dh * (1 - hs[t + 1] ** 2)                                  # through tanh
        norms[t] = np.linalg.norm(dz @ wx, axis=1).mean()               # dL/dx_t
        dh = dz @ wh                                                    # to h_{t-1}
    return norms


x = rng.standard_normal((20, T, C))
dy_last = rng.standard_normal((20, H))
rnn = rnn_grad_norms(x, rng.uniform(-k, k, (H, C)), rng.uniform(-k, k, (H, H)), rng.uniform(-k, k, H), dy_last)
lstm_w = registry.build({"model": "lstm", "vocab_size": 2, "d_model": C, "hidden": H}, dtype=np.float64).layers[0]
p = lstm_w.params
(yl, _, _), cache = lstm_forward(x, p["weight_ih"], p["weight_hh"], p["bias"])
dy = np.zeros_like(yl)
dy[:, -1] = dy_last
lstm = np.linalg.norm(lstm_backward(dy, cache)[0], axis=2).mean(0)      # (T,)
dist = T - 1 - np.arange(T)
plt.figure(figsize=(6, 3))
plt.semilogy(dist, rnn, label="tanh RNN")
plt.semilogy(dist, lstm, label="LSTM (forget bias 1)")
plt.xlabel("distance T - t (steps)"); plt.ylabel("|dh_T / dx_t| (log scale)")
plt.title("gradient reaching an input T - t steps back"); plt.legend(); plt.tight_layout()
plt.show()
for d in (1, 10, 20, 40):
    print(f"distance {d:>2}: RNN {rnn[T - 1 - d]:.1e}   LSTM {lstm[T - 1 - d]:.1e}   "
          f"LSTM / RNN {lstm[T - 1 - d] / rnn[T - 1 - d]:.3g}")
ratio20, ratio40 = lstm[T - 21] / rnn[T - 21], lstm[T - 41] / rnn[T - 41]

# %% tags=["checks"]
assert ratio40 > ratio20 > 100
budget.stated("LSTM / RNN at distance 20", ratio20, "2030", band=5)
budget.stated("LSTM / RNN at distance 40", ratio40 / 1e7, "1.9", band=0.05)

# %% [markdown]
# At distance 20 the LSTM's gradient is about 2030 times the RNN's, at distance 40
# about $1.9 \times 10^7$ times (the last column above): the RNN's shrinks by a roughly
# constant factor per step, the LSTM's far more slowly.
#
# ## 5. An LSTM language model, on the ladder
# The same character data and oracle as `minipt train gpt`: the toy language, whose
# exact loss (forward algorithm over the HMM) is the floor no model can beat. The LSTM LM
# (`minipt train lstm`) embeds characters, runs the LSTM and predicts the next character;
# it meets the same model protocol as GPT, so the same loop trains both, for the same
# number of steps. For the n-gram rung, a character trigram with add-0.1 smoothing is
# counted here in three lines.

# %%
train_text, val_text, oracle, _ = toy_corpus(200_000, seed=0)
tok = CharTokenizer().fit(train_text + val_text)
tr, va = tok.encode_array(train_text), tok.encode_array(val_text)
V = tok.vocab_size

counts = np.full((V, V, V), 0.1)                                        # trigram counts, add-0.1
np.add.at(counts, (tr[:-2], tr[1:-1], tr[2:]), 1)
probs = counts / counts.sum(-1, keepdims=True)
trigram = float(-np.log(probs[va[:-2], va[1:-1], va[2:]]).mean())

data = TokenStream(tr, va, 64, 32)
steps = 400
cfg = dict(steps=steps, warmup=20, weight_decay=0.0, eval_every=50, eval_batches=20, progress=False)
results, histories = {}, {}
for name, settings, lr in [("lstm", dict(d_model=32, hidden=128), 1e-2),
                           ("gpt", dict(block_size=64, n_layer=2, n_head=4, d_model=64), 3e-3)]:
    model = registry.build({"model": name, "vocab_size": V, **settings}, rng=np.random.default_rng(0))
    t0 = time.perf_counter()
    run = train(model, data.get_batch, TrainConfig(lr=lr, min_lr=lr / 10, **cfg))
    results[name] = (run.val_loss, model.num_parameters(), time.perf_counter() - t0)
    histories[name] = run.history
print(f"{'model':<22} {'params':>8} {'val nats/char':>14} {'seconds':>8}")
print(f"{'char trigram (counts)':<22} {'':>8} {trigram:>14.3f}")
for name, (loss, n, s) in results.items():
    print(f"{name:<22} {n:>8,} {loss:>14.3f} {s:>8.0f}")
print(f"{'oracle':<22} {'':>8} {oracle:>14.3f}")

# %%
fig, ax = plt.subplots(figsize=(6.5, 3.5))
for (name, hist), colour in zip(histories.items(), ("tab:blue", "tab:red")):
    ax.plot([h["step"] for h in hist], [h["loss"] for h in hist], color=colour, alpha=0.35, lw=0.7)
    val = [(h["step"], h["val_loss"]) for h in hist if "val_loss" in h]
    ax.plot(*zip(*val), "o-", color=colour, ms=3, label=f"{name}: train (faint), validation (dots)")
ax.axhline(trigram, color="tab:green", ls=":", label=f"char trigram {trigram:.3f}")
ax.axhline(oracle, color="k", ls="--", lw=0.8, label=f"oracle {oracle:.3f}")
ax.set_ylim(0.3, 2.0)
ax.set_xlabel("step"); ax.set_ylabel("loss (nats/char)"); ax.set_title("LSTM and GPT language models, same steps")
ax.legend(fontsize=7); plt.tight_layout(); plt.show()

# %% tags=["checks"]
assert oracle < results["lstm"][0] < results["gpt"][0] < trigram

# %% [markdown]
# ## Summary
# - BPTT is the forward loop run backwards, with the weight gradients summed over the
#   steps; the cell and the loop written here equal minipt's LSTM, and the library's
#   padding and chunking pass the same float64 check.
# - The cell's additive path keeps gradients alive over distances where a tanh RNN's
#   have vanished: at initialisation about 2030 times larger at distance 20 and
#   $1.9 \times 10^7$ times at 40 (printed in section 4).
# - The LSTM LM trains with the same loop as GPT and lands between the trigram and the
#   oracle on the toy language (0.492 nats/char against 0.899 and 0.422); at this budget
#   (400 steps) it is ahead of the 2-layer GPT (0.706), whose attention has more to learn
#   from scratch.

# %% tags=["checks"]
budget.stated("LSTM validation loss", results["lstm"][0], "0.492")
budget.stated("GPT validation loss", results["gpt"][0], "0.706")
budget.stated("trigram", trigram, "0.899")
budget.stated("oracle", oracle, "0.422")

# %% [markdown]
# ## Exercises
# 1. Suppose a step's forget gate is exactly 1 and no gradient reaches its $h_t$. What
#    does `cell_backward` pass on to $c_{t-1}$? What does that mean over many such steps?
# 2. In `bptt_by_hand`, drop the `dh_next` term (the gradient through $W_{hh}$). Which
#    arrays does the gradcheck flag?
# 3. In the gradient-over-distance plot, scale the RNN's $W_h$ up by 3. What happens to
#    its gradient now?
#
# ## Solutions

# %%
# 1. dc_prev = dc * f = dc_next: the cell's gradient passes through unchanged. Over many
#    such steps it reaches far back without shrinking (the "constant error carousel").
Hs = 3
cache1 = (None, None, np.zeros((1, Hs)), *(np.full((1, Hs), v) for v in (0.5, 1.0, 0.2, 0.7)), np.zeros((1, Hs)))
dc_in = np.array([[0.3, -1.2, 2.0]])
_, dc_out = cell_backward(np.zeros((1, Hs)), dc_in, cache1)             # i, f, g, o = 0.5, 1, 0.2, 0.7
print("dc_next", dc_in, "-> dc_prev", dc_out)

# %%
# 2. Without dh_next each h_t gets only its own output's gradient, not the future's through
#    W_hh: the check flags every array, c0 too (its gradient also flows through h).
def bptt_no_recurrence(dy, caches, w_ih, w_hh):
    B, T, H = dy.shape
    dx, dw_ih, dw_hh, db, dc_next = [None] * T, np.zeros_like(w_ih), np.zeros_like(w_hh), np.zeros(4 * H), \
        np.zeros((B, H))
    for t in range(T - 1, -1, -1):
        dz, dc_next = cell_backward(dy[:, t], dc_next, caches[t])
        dx[t], db = dz @ w_ih, db + dz.sum(0)
        dw_ih += dz.T @ caches[t][0]
        dw_hh += dz.T @ caches[t][1]
    return np.stack(dx, 1), dw_ih, dw_hh, db, dz @ w_hh, dc_next


broken = gradcheck(lambda: run_lstm(bptt_no_recurrence), arrays)
print(broken)

# %%
# 3. Each step's factor now has a norm above one: the RNN's gradient no longer vanishes,
#    it grows with the distance (exploding gradients, the other half of Bengio et al. 1994).
big = rnn_grad_norms(x, rng.uniform(-k, k, (H, C)), 3 * rng.uniform(-k, k, (H, H)), rng.uniform(-k, k, H), dy_last)
print(f"RNN with 3 W_h: distance 20 {big[T - 21]:.1e}, distance 40 {big[T - 41]:.1e}")
