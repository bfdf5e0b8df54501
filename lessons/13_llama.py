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
# # 13 · LLaMA: three changes to GPT-2, measured
#
# LLaMA (Touvron et al. 2023, Sec. 2.2) keeps GPT-2's decoder and changes three things:
#
# 1. **pre-RMSNorm** (Zhang & Sennrich 2019) instead of LayerNorm;
# 2. **SwiGLU** (Shazeer 2020) instead of the GELU MLP;
# 3. **rotary positions**, RoPE (Su et al. 2021), instead of a learned position table;
#
# and drops every bias and the weight tying of the output layer.

# %% [markdown]
# This lesson derives the
# three changes, checks the LLaMA-style model's gradient in float64, then trains GPT-2,
# each change alone, and all of them on the toy language, **at equal parameter count**
# (`minipt.models.decoder.llama` picks the feed-forward width that makes each model as big as
# GPT-2), and finally measures what "relative positions" buys.
#
# Shapes: `B` batch, `T` time, `C` channels, `V` vocabulary, `H` heads, `D` head size,
# `F` feed-forward width.

# %%
import time
from dataclasses import replace

import matplotlib.pyplot as plt
import numpy as np

from minipt import check_module
from minipt import lesson_budget as budget
from minipt.data.batching import TokenStream
from minipt.data.hmm_language import toy_corpus
from minipt.experiments import ledger
from minipt.models.decoder.gpt import GPT, GPTConfig
from minipt.models.decoder.llama import (
    count_parameters,
    llama_like,
    match_d_ff,
)
from minipt.nn.feedforward import FeedForward
from minipt.ops.norms import layer_norm_forward, rms_norm_forward
from minipt.ops.positions import rope_forward
from minipt.tokenizers.char import CharTokenizer
from minipt.train import TrainConfig, train

# %% [markdown]
# ## 1. RMSNorm: LayerNorm without the mean
# LayerNorm centres and scales each row $x \in \mathbb{R}^C$, then applies a gain and a bias:
#
# $$\mathrm{LN}(x) = g \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + b,\qquad
#   \mu = \tfrac1C\textstyle\sum_i x_i,\ \ \sigma^2 = \tfrac1C\sum_i (x_i - \mu)^2 .$$
#
# RMSNorm keeps only the rescaling, by the root mean square, and only the gain:
#
# $$\mathrm{RMSNorm}(x) = g \odot \frac{x}{\sqrt{\tfrac1C \sum_i x_i^2 + \epsilon}} .$$

# %% [markdown]
# Zhang & Sennrich's argument: the re-scaling invariance is what helps training, the
# re-centring is not needed, and dropping it saves a reduction (and $C$ parameters per
# norm). On a row with zero mean the two agree exactly (with $b = 0$):

# %%
r = np.random.default_rng(0)
x = r.standard_normal((2, 8))                                  # (N, C)
g, b = np.ones(8), np.zeros(8)
ln, _ = layer_norm_forward(x, g, b, 1e-6)
rms, _ = rms_norm_forward(x, g, 1e-6)
x0 = x - x.mean(axis=1, keepdims=True)                          # centre the rows first
print(f"LN vs RMSNorm on raw rows: max difference {np.abs(ln - rms).max():.3f}")
centred_diff = np.abs(layer_norm_forward(x0, g, b, 1e-6)[0] - rms_norm_forward(x0, g, 1e-6)[0]).max()
print(f"on zero-mean rows: {centred_diff:.1e}")

# %% tags=["checks"]
assert np.abs(ln - rms).max() > 0.1 and centred_diff < 1e-12

# %% [markdown]
# ## 2. SwiGLU, and why its width is $\tfrac23 \cdot 4C$
# GPT-2's MLP is $\mathrm{GELU}(x W_1) W_2$ with $W_1 \in \mathbb{R}^{C\times 4C}$. A GLU
# variant multiplies two projections, one of them through a gate; SwiGLU's gate is
# Swish/SiLU, $\mathrm{silu}(a) = a\,\sigma(a)$ (LLaMA's names: gate `w1`, up `w3`, down `w2`):
#
# $$\mathrm{FFN}_{\mathrm{SwiGLU}}(x) = \big(\mathrm{silu}(x W_1) \odot x W_3\big) W_2 .$$
#
# Three $C \times F$ matrices instead of two: for the same count, $3CF = 2C \cdot 4C$, so
# $F = \tfrac23 \cdot 4C = 8C/3$ (LLaMA then rounds up to a multiple of 256).

# %%
C = 64
rng = np.random.default_rng(0)
gelu = FeedForward(C, 4 * C, rng=rng, activation="gelu_tanh", bias=False)
swiglu = FeedForward(C, 8 * C // 3, rng=rng, activation="swiglu", bias=False)
print(f"GELU MLP, F = 4C = {4 * C}: {gelu.num_parameters():,} parameters")
print(f"SwiGLU,   F = 8C/3 = {8 * C // 3}: {swiglu.num_parameters():,} parameters")

# %% tags=["checks"]
assert abs(swiglu.num_parameters() / gelu.num_parameters() - 1) < 0.01      # 8C/3 is rounded down to 170

# %% [markdown]
# ## 3. RoPE: rotate queries and keys by their position
# Split a head's $D$ channels into pairs $(x_i, x_{i+D/2})$ ("rotate halves", the Hugging
# Face LLaMA layout) and rotate pair $i$ of the token at position $m$ by the angle
# $m\,\theta_i$, $\theta_i = 10000^{-2i/D}$:
#
# $$\mathrm{RoPE}(x, m) = x \odot \cos(m\theta) + \mathrm{rotate\_half}(x) \odot \sin(m\theta),
#   \qquad \mathrm{rotate\_half}([x_1, x_2]) = [-x_2, x_1].$$
#
# Rotations compose, $R_m^\top R_n = R_{n-m}$, so the attention score of a query at $m$
# and a key at $n$ is $\langle R_m q, R_n k\rangle = \langle q, R_{n-m} k\rangle$: it depends on
# the distance $n - m$ only. Nothing is learned, no $T \times C$ table, and every position is
# computable. The scores of one $q, k$ pair at positions $0..7$ and $1000..1007$:

# %%
q, k = np.random.default_rng(1).standard_normal((2, 1, 1, 8, 16))     # (B, H, T, D) each


def scores(positions):
    qr, kr = rope_forward(q, positions)[0], rope_forward(k, positions)[0]
    return qr[0, 0] @ kr[0, 0].T                                          # (T, T)


shift_diff = np.abs(scores(np.arange(8) + 1000) - scores(np.arange(8))).max()
print(f"scores at positions shifted by 1000: max difference {shift_diff:.1e}")
doubled_diff = np.abs(scores(2 * np.arange(8)) - scores(np.arange(8))).max()
print(f"scores at positions 0, 2, 4, ... (distances doubled): {doubled_diff:.2f}")

# %% tags=["checks"]
assert shift_diff < 1e-10 and doubled_diff > 0.1

# %% [markdown]
# ## 4. A LLaMA-style config with GPT-2's parameter count
# `llama_config` switches all of it on. LLaMA removes the position table ($-TC$), the
# biases and LayerNorm's biases, and adds an untied output layer ($+VC$); `llama_like`
# keeps GPT-2's vocabulary, context, layers, heads and width and solves for the SwiGLU
# width $F$ that restores GPT-2's total (`count_parameters` is the closed form of
# `GPT(config).num_parameters()`).

# %%
train_text, val_text, oracle, _ = toy_corpus(120_000, seed=0)
tok = CharTokenizer().fit(train_text + val_text)
gpt2 = GPTConfig.gpt2(vocab_size=tok.vocab_size, block_size=64, n_layer=2, n_head=4, d_model=64)
llama = llama_like(gpt2)


def groups(config):
    """Parameters of GPT(config) by role."""
    names = GPT(config, rng=np.random.default_rng(0)).parameters()
    role = lambda n: ("norms" if ".ln_" in n or n.startswith("h.ln_f") else "attention" if ".attn." in n
                      else "MLP" if ".mlp." in n else n.split(".")[0])
    out = {}
    for n, p in names.items():
        out[role(n)] = out.get(role(n), 0) + p.size
    return out


g2, gl = groups(gpt2), groups(llama)
print(f"{'':10} {'GPT-2':>8} {'LLaMA':>8}")
for key in ("wte", "wpe", "attention", "MLP", "norms", "lm_head"):
    print(f"{key:10} {g2.get(key, 0):>8,} {gl.get(key, 0):>8,}")
print(f"{'total':10} {count_parameters(gpt2):>8,} {count_parameters(llama):>8,}   (LLaMA d_ff {llama.d_ff}; 8C/3 = {8 * 64 / 3:.0f})")

# %% [markdown]
# ## 5. The whole LLaMA-style model's gradient, in float64
# Same check as lesson 09, on a small `llama_like` model: RMSNorm, SwiGLU's three
# matrices, the rotated q and k and the untied head all get their gradients by hand.

# %%
small = llama_like(GPTConfig.gpt2(vocab_size=11, block_size=8, n_layer=2, n_head=2, d_model=16))
model64 = GPT(small, rng=np.random.default_rng(0)).to(np.float64)
idx = np.random.default_rng(1).integers(0, 11, (2, 6))
result = check_module(model64, idx, np.roll(idx, -1, axis=1), select=lambda out: out[0], max_checks=8)
print(f"{len(result.arrays)} arrays checked; worst relative error {result.max_error():.1e} in {result.worst.name}")

# %% tags=["checks"]
assert result.passed and "lm_head.weight" in [a.name for a in result.arrays]

# %% [markdown]
# ## 6. The ablation: one change at a time, at equal size
# Every variant starts from the GPT-2 config, changes one thing, and gets the feed-forward
# width that brings it back to GPT-2's parameter count (`match_d_ff`). "All three" changes
# only the three; "LLaMA-style" is `llama_like`: the three plus no biases, an untied
# head, and no scaled residual init.

# %% [markdown]
# Same seed, same batches, same AdamW schedule,
# 250 steps of 16 windows of 64 characters (100 at the quick budget of
# `MINIPT_LESSON_BUDGET`, see `lessons/README.md`; the numbers quoted are the full run's). Validation loss is measured on the whole
# validation text (non-overlapping windows), next to the oracle loss of that text.

# %%
P = count_parameters(gpt2)
variants = {
    "GPT-2": gpt2,
    "+ RMSNorm": match_d_ff(replace(gpt2, norm="rms"), P),
    "+ SwiGLU": match_d_ff(replace(gpt2, activation="swiglu"), P),
    "+ RoPE": match_d_ff(replace(gpt2, positions="rope"), P),
    "+ all three": match_d_ff(replace(gpt2, norm="rms", activation="swiglu", positions="rope"), P),
    "LLaMA-style": llama,
}
data = TokenStream(tok.encode_array(train_text), tok.encode_array(val_text), block_size=64, batch_size=16)
val_ids = tok.encode_array(val_text)
n_win = (len(val_ids) - 1) // 128
windows = val_ids[:n_win * 128 + 1]                              # (n_win * 128 + 1,) for 64- and 128-windows


def position_losses(model, ids, offset=0):
    """Loss per position (T,), averaged over windows ids (N, T + 1), at positions
    offset..offset+T-1: GPT.hidden without its block_size check (a learned table ends at
    block_size; RoPE computes any position)."""
    x, y = ids[:, :-1], ids[:, 1:]                                # (N, T) each
    model.eval()
    h = model.wte(x)                                              # (N, T, C)
    if model.wpe is not None:
        h = h + model.wpe(x.shape[1], offset)                     # (T, C)
    rope = np.arange(offset, offset + x.shape[1]) if model.wpe is None else None
    logits = model.h(h, causal=True, positions=rope) @ model.head_weight()[0].T   # (N, T, V)
    logits = logits - logits.max(axis=-1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    return -np.take_along_axis(logp, y[..., None], axis=-1)[..., 0].mean(axis=0)  # (T,)


def windows_of(T):
    """Non-overlapping windows (N, T + 1) of the validation text."""
    n = (len(windows) - 1) // T
    return np.stack([windows[i * T:(i + 1) * T + 1] for i in range(n)])


steps = budget.pick(full=250, quick=100)
tc = TrainConfig(steps=steps, lr=3e-3, min_lr=3e-4, warmup=steps // 10, eval_every=steps // 5, eval_batches=8,
                 progress=False)
runs = {}
for name, config in variants.items():
    model = GPT(config, rng=np.random.default_rng(0))
    ticks = []
    res = train(model, data.get_batch, tc, callback=lambda step, record: ticks.append(time.perf_counter()))
    runs[name] = dict(config=config, model=model, history=res.history, params=model.num_parameters(),
                      val=float(position_losses(model, windows_of(64)).mean()),
                      ms=1000 * float(np.median(np.diff(ticks))))

counts = np.bincount(tok.encode_array(train_text), minlength=tok.vocab_size) / len(train_text)
unigram = float(-(counts[counts > 0] * np.log(counts[counts > 0])).sum())
print(f"{'variant':12} {'d_ff':>5} {'params':>8} {'vs GPT-2':>8} {'val loss':>9} {'- oracle':>9} {'ms/step':>8}")
for name, run in runs.items():
    print(f"{name:12} {run['config'].d_ff:>5} {run['params']:>8,} {run['params'] / P - 1:>+8.2%} "
          f"{run['val']:>9.3f} {run['val'] - oracle:>9.3f} {run['ms']:>8.1f}")
print(f"oracle loss of this validation text {oracle:.3f}; unigram entropy {unigram:.3f} nats/char")

# %% tags=["checks"]
assert all(abs(run["params"] / P - 1) < 0.02 for run in runs.values())
assert all(np.isfinite(run["val"]) and run["val"] < unigram - 0.5 for run in runs.values())
val = {name: run["val"] for name, run in runs.items()}
rope_gain = val["GPT-2"] - val["+ RoPE"]
assert min(val["+ RoPE"], val["+ all three"], val["LLaMA-style"]) > oracle
assert max(val["+ RoPE"], val["+ all three"], val["LLaMA-style"]) < val["GPT-2"] - 0.1
assert max(abs(val["GPT-2"] - val[n]) for n in ("+ RMSNorm", "+ SwiGLU")) < rope_gain
for name, claim in (("GPT-2", "1.392"), ("+ RMSNorm", "1.439"), ("+ SwiGLU", "1.396"), ("+ RoPE", "0.687"),
                    ("+ all three", "0.633"), ("LLaMA-style", "0.562")):
    budget.stated(f"validation loss of {name}", val[name], claim)
_ = budget.stated("oracle", oracle, "0.427")

# %% [markdown]
# Wall time per step is the median over the run, on a machine shared with other work:
# differences of a few milliseconds are noise. SwiGLU's three thinner matrices do the
# multiply-adds of GELU's two wider ones (the same parameter count); RoPE adds two
# element-wise rotations per layer.

# %% [markdown]
# What the table says at this budget (full: GPT-2 1.392, RoPE alone 0.687, all three 0.633,
# LLaMA-style 0.562 nats/char against an oracle loss of 0.427): the variants with
# **RoPE learn much faster**. A
# learned position table starts as noise of std 0.02 and must be learned before attention
# can find "the previous character" or "the start of this word"; rotary positions put
# relative distance into every score from the first step. RMSNorm and SwiGLU alone move
# the loss much less, in either direction (1.439 and 1.396): one seed and this budget
# cannot separate such differences. Does GPT-2 close the gap when trained longer? That
# is exercise 1.

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.4))
for name, run in runs.items():
    loss = np.array([h["loss"] for h in run["history"]])
    smooth = np.convolve(loss, np.ones(10) / 10, mode="valid")
    line, = ax1.plot(np.arange(10, len(loss) + 1), smooth, lw=1, label=name)
    ev = [(h["step"], h["val_loss"]) for h in run["history"] if h.get("val_loss") is not None]
    ax1.plot(*zip(*ev), "o", ms=3, color=line.get_color())
ax1.axhline(oracle, color="k", ls="--", lw=0.8, label="oracle")
ax1.set_xlabel("step"); ax1.set_ylabel("nats/char (dots: validation)"); ax1.legend(fontsize=7)
ax1.set_title("Training loss at equal parameter count")
names = list(runs)
ax2.barh(names, [runs[n]["val"] for n in names], color="tab:blue")
ax2.axvline(oracle, color="k", ls="--", lw=0.8, label="oracle"); ax2.legend(fontsize=7)
ax2.invert_yaxis(); ax2.set_xlabel("validation loss, nats/char"); ax2.set_ylabel("variant")
ax2.set_title("Validation loss (one seed)")
plt.tight_layout(); plt.show()

# %% [markdown]
# ## 7. What "relative positions" buys, measured
# **Shift.** With RoPE nothing in the model knows absolute positions: every score
# depends on distances only. So a trained RoPE model must give the *same* loss on a window
# placed at positions 0..63 or at 1000..1063 (a position it never saw), up to float32
# round-off. A learned table gives different vectors at different rows: the same text at
# rows 32..63 instead of 0..31 changes the loss, and rows past 63 do not exist.

# %%
w64, w32 = windows_of(64), windows_of(32)
shifted = {}
for name in ("+ RoPE", "LLaMA-style"):
    model = runs[name]["model"]
    shifted[name] = position_losses(model, w64).mean(), position_losses(model, w64, offset=1000).mean()
    print(f"{name:12} loss at positions 0..63: {shifted[name][0]:.5f}; at 1000..1063: {shifted[name][1]:.5f}")
base = runs["GPT-2"]["model"]
rows0, rows32 = position_losses(base, w32).mean(), position_losses(base, w32, offset=32).mean()
print(f"{'GPT-2':12} 32-char windows at rows 0..31: {rows0:.4f}; at rows 32..63: {rows32:.4f}")
try:
    position_losses(base, w64, offset=1000)
except ValueError as e:
    print(f"{'GPT-2':12} at 1000..1063: {e}")

# %% [markdown]
# **Longer context than trained on.** RoPE can *compute* positions 64..127, but the
# model has never seen distances above 63 between a query and a key. Loss per position
# on 128-character windows shows whether it copes. (Positions 0..63 give the same loss
# as with 64-character windows: attention is causal.) On this language context further
# than a sentence back barely matters, so a model that generalised over distances would
# stay flat past 64; the question is whether unseen distances *hurt*.

# %%
w128 = windows_of(128)
plt.figure(figsize=(6, 3.2))
past_end = {}
for name in ("GPT-2", "+ RoPE", "LLaMA-style"):
    model = runs[name]["model"]
    per_pos = position_losses(model, w128 if model.wpe is None else w64)
    plt.plot(per_pos, lw=1, label=name)
    if model.wpe is None:
        past_end[name] = seen, unseen = per_pos[32:64].mean(), per_pos[64:].mean()
        print(f"{name:12} mean loss at positions 32..63 (trained) {seen:.3f}, at 64..127 (never trained) {unseen:.3f}")
plt.title("Loss per position, past the trained context")
plt.axvline(63.5, color="gray", ls=":", lw=1, label="end of the trained context")
plt.axhline(oracle, color="k", ls="--", lw=0.8, label="oracle")
plt.yscale("log"); plt.xlabel("position in window"); plt.ylabel("validation loss, nats/char")
plt.legend(fontsize=7); plt.tight_layout(); plt.show()

# %% tags=["checks"]
assert all(abs(at0 - at1000) < 1e-4 for at0, at1000 in shifted.values())
assert abs(rows0 - rows32) > 0.005
assert all(unseen > seen for seen, unseen in past_end.values()), past_end

# %% [markdown]
# They do: past position 63 the loss rises (the two prints above: positions 64..127
# against 32..63). Computable is not the same as learned: scores at distances never seen
# in training are out of distribution, and the model's attention misreads them. "RoPE
# extrapolates" is true of the arithmetic, not of the trained model; real long-context
# LLaMA models are fine-tuned at the longer length, often with the positions squeezed
# into the trained range (position interpolation, Chen et al. 2023).
#
# ## 8. The same comparison over three seeds: the claims ledger
# The claims ledger runs this ablation over three seeds, each variant scored on the whole
# validation text. Its row, in its own words, and each variant's mean with the spread:

# %%
row = next(r for r in ledger.rows() if r["claim"] == "llama-vs-gpt2")
record = ledger.load("llama")
print(f"{row['paper']}: {row['says']}\n   verdict: {row['verdict']}. {row['why']}")
arms = list(record["runs"][0]["arms"])
held = {arm: np.array([run["arms"][arm]["held-out"] for run in record["runs"]]) for arm in arms}
fig, ax = plt.subplots(figsize=(6, 3.2))
ax.barh(arms, [held[a].mean() for a in arms], xerr=[held[a].std(ddof=1) for a in arms], capsize=4, alpha=0.8)
for y, a in enumerate(arms):
    ax.plot(held[a], [y] * len(held[a]), "k.", label="one seed" if y == 0 else None)
ax.invert_yaxis(); ax.set_xlabel("held-out loss, nats/char"); ax.set_ylabel("variant")
ax.set_title(f"The ledger's ablation, {len(record['runs'])} seeds (mean ± sd)"); ax.legend(fontsize=8)
plt.show()

# %% tags=["checks"]
assert row["verdict"] == "reproduced"

# %% [markdown]
# **Summary.** LLaMA is GPT-2 with RMSNorm (scale by the root mean square, no centring,
# no bias), SwiGLU (a gated MLP of width $\tfrac23\cdot 4C$ for the same size) and RoPE
# (rotate each query/key pair by its position, so scores see only distances), without
# biases and with an untied head. At equal parameter count on the toy language, RoPE is
# the change that matters at a short training budget; the LLaMA-style model is exactly
# invariant to a shift of all positions and can be *run* past its training context, but
# its loss there is worse than inside it.

# %% [markdown]
# ## Exercises
# 1. LLaMA-7B has width $C = 4096$. What SwiGLU width $F$ keeps its MLP at the size of a
#    $4C$ GELU MLP, once rounded up to a multiple of 256, as LLaMA does?
# 2. How many parameters do this lesson's GPT-2's norms hold, and how many would the same
#    norms hold as RMSNorms?
# 3. RoPE rotates pairs of channels. Check that it leaves the length of every query
#    vector unchanged, at any position.

# %% [markdown]
# ## Solutions
# **1.** $F = \tfrac23 \cdot 4C$ rounded up to a multiple of 256: LLaMA-7B's 11008.

# %%
F = int(np.ceil(2 / 3 * 4 * 4096 / 256) * 256)
print(f"8C/3 = {8 * 4096 / 3:.0f}, rounded up to a multiple of 256: {F}")

# %% [markdown]
# **2.** A LayerNorm holds a gain and a bias ($2C$), an RMSNorm only the gain ($C$): the
# count halves.

# %%
n_norms = g2["norms"] // (2 * 64)
print(f"GPT-2's {n_norms} LayerNorms: {g2['norms']} parameters; as RMSNorms: {n_norms * 64}")

# %% [markdown]
# **3.** A rotation keeps lengths: each pair $(x_i, x_{i+D/2})$ is turned by an angle.

# %%
rotated = rope_forward(q, np.arange(8) + 5000)[0]                       # (B, H, T, D)
print(f"largest change of a vector's length: {np.abs(np.linalg.norm(rotated, axis=-1) - np.linalg.norm(q, axis=-1)).max():.1e}")
