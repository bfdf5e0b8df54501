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
# # 14 · Hugging Face interop: the same model in two libraries
#
# A model is its numbers plus the code that reads them. Hugging Face `transformers`
# stores a model as a folder: `config.json` (the hyper-parameters; `model_type` names the
# code) and `model.safetensors` (named tensors: a JSON header, then raw bytes, so loading
# runs no code, unlike a pickled `pytorch_model.bin`). If minipt reads and writes those
# folders, a model trained here continues in PyTorch on a GPU, and real weights can be
# read through minipt's plain NumPy code.

# %% [markdown]
# This lesson loads two folders that `transformers` wrote (a tiny random
# `GPT2LMHeadModel` and `LlamaForCausalLM`, saved by `scripts/make_hf_fixtures.py` with
# the logits and gradients PyTorch computed), reads the mapping between the two naming
# schemes, checks minipt's forward *and hand-written backward* against PyTorch's, trains
# a few steps in minipt and exports the result back. No torch is needed here.
#
# Shapes: `B` batch, `T` time, `C` channels, `V` vocabulary, `H` heads, `D` head size,
# `F` feed-forward width.

# %%
import json
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import minipt
from minipt import lesson_budget as budget
from minipt.data.hmm_language import toy_corpus
from minipt.interop import from_pretrained, save_pretrained, their_named
from minipt.interop.gpt2_layout import entries as gpt2_entries
from minipt.interop.llama_layout import entries as llama_entries
from minipt.interop.safetensors_io import read_file, tensor_index
from minipt.ops.positions import rope_forward
from minipt.optim import AdamW
from minipt.tokenizers.char import CharTokenizer
from minipt.tokenizers.gpt2_files import load_gpt2_files

FIXTURES = Path(minipt.__file__).resolve().parent.parent / "tests" / "interop" / "fixtures"
print(sorted(p.name for p in FIXTURES.iterdir()))

# %% [markdown]
# ## 1. What is in a transformers folder
# The config is plain JSON. The safetensors header gives every tensor's name, dtype and
# shape without reading the data.

# %%
config = json.loads((FIXTURES / "gpt2" / "config.json").read_text())
print({k: config[k] for k in ("model_type", "architectures", "n_embd", "n_layer", "n_head", "n_inner",
                              "n_positions", "vocab_size", "activation_function", "layer_norm_epsilon",
                              "tie_word_embeddings", "dtype")})
index = tensor_index(FIXTURES / "gpt2")
for name in sorted(index)[:8]:
    print(f"{name:40s} {index[name].dtype} {index[name].shape}")
print(f"... {len(index)} tensors; lm_head.weight present: {'lm_head.weight' in index}")

# %% tags=["checks"]
assert tuple(index["transformer.h.0.attn.c_attn.weight"].shape) == (32, 96) == (config["n_embd"], 3 * config["n_embd"])
assert config["tie_word_embeddings"] and "lm_head.weight" not in index

# %% [markdown]
# Three things to notice, each a line of the mapping (`minipt/interop/gpt2_layout.py`):
#
# - **Conv1D.** `attn.c_attn.weight` is (32, 96) = (C_in, 3C): GPT-2's `Conv1D` computes
#   $y = xW + b$ and stores $W$ as (in, out). minipt's `Linear` computes $y = xW^\top + b$
#   and stores (out, in). Every block matrix is transposed on the way in and out.
# - **Fused q, k, v.** `c_attn` maps C to 3C, q then k then v, head h in columns
#   $hD{:}(h+1)D$ of each third: the same layout as minipt's `c_attn`.
# - **Tied head.** `tie_word_embeddings` is true, and there is no `lm_head.weight`: the
#   logits are $h W_e^\top$ with the token embedding itself.

# %%
table = {e.theirs: e for e in gpt2_entries(from_pretrained(FIXTURES / "gpt2").config)}
for name in ("transformer.wte.weight", "transformer.h.0.attn.c_attn.weight", "transformer.h.0.attn.c_attn.bias",
             "transformer.h.0.mlp.c_fc.weight", "transformer.ln_f.weight"):
    print(f"{name:38s} <- {table[name].ours:32s} {table[name].how}")

# %% [markdown]
# ## 2. Same logits, same gradients
# `from_pretrained` builds `GPTConfig.gpt2(...)` from the config (an option minipt does not
# implement would be a `ValueError` naming it), checks every tensor name and shape, and
# copies the numbers in. The reference file holds the batch PyTorch saw, its logits, the
# mean cross-entropy and the gradient of every parameter. We run minipt's forward and its
# hand-written backward, map minipt's gradients to transformers' names with the same
# table, and compare.

# %%
errors, logit_pairs = {}, {}


def compare(arch):
    model = from_pretrained(FIXTURES / arch)                          # float64, as stored
    ref, meta = read_file(FIXTURES / f"{arch}_reference.safetensors")
    model.zero_grad()
    loss, logits = model(ref["input_ids"], ref["targets"])             # (B, T, V)
    model.backward()
    rel = lambda a, b: np.abs(a - b).max() / np.abs(b).max()
    grads = their_named(model, "grads")
    worst = max(rel(grads[k[5:]], ref[k]) for k in ref if k.startswith("grad/"))
    print(f"{arch}: transformers {meta['transformers']}, torch {meta['torch']}; loss {float(loss):.6f} "
          f"(theirs {float(ref['loss']):.6f}); logits rel. error {rel(logits, ref['logits']):.1e}; "
          f"worst of {len(grads)} gradients {worst:.1e}")
    errors[arch] = (rel(logits, ref["logits"]), worst)
    logit_pairs[arch] = (ref["logits"].ravel(), logits.ravel())
    return model


gpt2 = compare("gpt2")

# %% tags=["checks"]
assert errors["gpt2"][0] <= 1e-9 and errors["gpt2"][1] <= 1e-8

# %% [markdown]
# ## 3. LLaMA: split projections and the rotary convention
# `LlamaForCausalLM` keeps `q_proj`, `k_proj`, `v_proj` apart (rows 0:C, C:2C, 2C:3C of
# minipt's fused `c_attn`), has no biases, an untied `lm_head`, RMSNorm and SwiGLU
# (`gate_proj` = minipt's `w1`, `up_proj` = `w3`, `down_proj` = `w2`).
#
# Rotary positions pair channels. transformers' LLaMA rotates **halves**: channel $i$
# pairs with $i + D/2$, rotated by the angle $t\,\theta^{-2i/D}$ (`rotate_half`). Meta's
# original code rotated interleaved pairs $(2i, 2i+1)$; the hub's folders were converted
# by permuting q/k rows once. minipt's `rope_forward` rotates halves too, so the rows are
# copied without a permutation. A unit vector on channel 1 shows it:

# %%
for e in llama_entries(from_pretrained(FIXTURES / "llama").config)[1:5]:
    print(f"{e.theirs:42s} <- {e.ours:30s} {e.how} {e.part}/{e.parts}")
D = 8
x = np.zeros((1, 1, 1, D)); x[..., 1] = 1.0                            # (B, H, T, D): e_1
y, _ = rope_forward(x, np.array([3]))                                  # position t = 3
print("rotated e_1 at t=3:", np.round(y[0, 0, 0], 3), "-> channels 1 and", 1 + D // 2)
llama = compare("llama")

# %% tags=["checks"]
assert np.flatnonzero(np.abs(y[0, 0, 0]) > 1e-12).tolist() == [1, 1 + D // 2]
assert errors["llama"][0] <= 1e-9 and errors["llama"][1] <= 1e-8

# %% [markdown]
# Every logit of both models, minipt's against PyTorch's: the points lie on the diagonal,
# and the right panel shows how far off it they are (float64 rounding).

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
for arch, colour in (("gpt2", "tab:blue"), ("llama", "tab:red")):
    theirs, ours = logit_pairs[arch]
    axes[0].scatter(theirs, ours, s=4, color=colour, label=arch)
    axes[1].scatter(theirs, np.maximum(np.abs(ours - theirs), 1e-17), s=4, color=colour, label=arch)
lims = [min(p[0].min() for p in logit_pairs.values()), max(p[0].max() for p in logit_pairs.values())]
axes[0].plot(lims, lims, "k--", lw=0.8, label="y = x")
axes[0].set_xlabel("logit from transformers (PyTorch)"); axes[0].set_ylabel("logit from minipt")
axes[0].set_title("the same logits in two libraries"); axes[0].legend(fontsize=8)
axes[1].set_yscale("log"); axes[1].set_xlabel("logit from transformers (PyTorch)")
axes[1].set_ylabel("|minipt - PyTorch| (log; 0 at 1e-17)"); axes[1].set_title("their difference"); axes[1].legend(fontsize=8)
plt.tight_layout(); plt.show()
print("largest logit difference:", {a: f"{np.abs(o - t).max():.1e}" for a, (t, o) in logit_pairs.items()})

# %% [markdown]
# (transformers takes RMSNorm and the rotary angles in float32 even in a float64 model;
# the fixture script ran those two formulas in float64 so that the reference is exact to
# float64 rounding.)
#
# ## 4. Continue training in minipt
# The GPT-2 folder is now an ordinary minipt model. A few AdamW steps on the toy language
# (27 characters, so the 64-token vocabulary has room) use minipt's own backward: 61
# steps at the full budget (`MINIPT_LESSON_BUDGET`, see `lessons/README.md`), 21 at the
# quick one.

# %%
train_text, val_text, oracle, _ = toy_corpus(20_000, seed=0)
tok = CharTokenizer().fit(train_text)
print(f"{tok.vocab_size} characters in a vocabulary of {gpt2.config.vocab_size}")
data = tok.encode_array(train_text)                                    # (N,)
rng = np.random.default_rng(0)
opt = AdamW(gpt2, lr=3e-3, weight_decay=0.0)
T = gpt2.config.block_size
val = tok.encode_array(val_text)                                       # (N_val,)
vs = np.random.default_rng(1).integers(0, len(val) - T - 1, size=16)
val_x, val_y = np.stack([val[s:s + T] for s in vs]), np.stack([val[s + 1:s + T + 1] for s in vs])   # (B, T)
losses, val_losses = [], []
for step in range(budget.pick(full=61, quick=21)):
    starts = rng.integers(0, len(data) - T - 1, size=16)
    x = np.stack([data[s:s + T] for s in starts])                      # (B, T)
    y = np.stack([data[s + 1:s + T + 1] for s in starts])              # (B, T)
    gpt2.zero_grad()
    loss, _ = gpt2(x, y)
    gpt2.backward()
    opt.step()
    losses.append(float(loss))
    if step % 10 == 0:
        val_losses.append((step, float(gpt2(val_x, val_y)[0])))
    if step % 20 == 0:
        print(f"step {step:3d}  loss {float(loss):.3f} nats/char  (the language's entropy: {oracle:.3f})")

fig, ax = plt.subplots(figsize=(6, 3.4))
ax.plot(losses, label="train batch")
ax.plot(*zip(*val_losses), "o-", ms=3, label="validation (16 windows)")
ax.axhline(oracle, color="k", ls="--", lw=0.8, label=f"oracle {oracle:.3f}")
ax.set_xlabel("step"); ax.set_ylabel("loss (nats/char)"); ax.set_title("the GPT-2 folder, trained on in minipt")
ax.legend(fontsize=8); plt.tight_layout(); plt.show()

# %% tags=["checks"]
assert tok.vocab_size == 27 and gpt2.config.vocab_size == 64
assert losses[-1] < losses[0] - 1.0 and val_losses[-1][1] < val_losses[0][1]

# %% [markdown]
# ## 5. Export back, reload
# `save_pretrained` writes the folder `GPT2LMHeadModel.from_pretrained` reads: the same
# table in reverse, into a temporary folder that is renamed into place only when complete.
# A character tokenizer has no transformers form, so it is saved as minipt's own
# `minipt_tokenizer.json` (a byte-level BPE tokenizer would become GPT-2's `vocab.json` +
# `merges.txt`). Reloading gives the very same bits.

# %%
out = Path(tempfile.mkdtemp()) / "gpt2-continued"
save_pretrained(gpt2, out, tokenizer=tok)
print(sorted(p.name for p in out.iterdir()))
back = from_pretrained(out)
same = all(np.array_equal(p, back.parameters()[k]) for k, p in gpt2.parameters().items())
print("bitwise identical after the round trip:", same)

# %% tags=["checks"]
assert same

# %% [markdown]
# Where PyTorch is installed, the folder continues there:
#
# ```python
# from transformers import AutoModelForCausalLM
# model = AutoModelForCausalLM.from_pretrained("gpt2-continued")   # a GPT2LMHeadModel
# ```
#
# and `minipt sample --hf FOLDER` samples from any such folder with minipt.

# %% [markdown]
# ## 6. Tokenizer files
# GPT-2's tokenizer is two tables: `vocab.json` (token -> id, bytes shown as printable
# characters: a space is `Ġ`) and `merges.txt` (the merges in learned order). This one was
# trained by the `tokenizers` library and saved by transformers; minipt reads it and gives
# the ids transformers gave.

# %%
bpe = load_gpt2_files(FIXTURES / "tokenizer")
ref = json.loads((FIXTURES / "tokenizer_reference.json").read_text(encoding="utf-8"))
for text, ids in list(zip(ref["texts"], ref["ids"]))[:3]:
    print(f"{text!r:50} {bpe.encode(text) == ids}  {[bpe.id_to_token(i) for i in ids][:6]}")

# %% tags=["checks"]
assert all(bpe.encode(text) == ids for text, ids in zip(ref["texts"], ref["ids"]))

# %% [markdown]
# **Summary.** Interop is a table: each tensor of the other library is one minipt
# parameter, copied, transposed (Conv1D) or cut into rows (split q/k/v); the same table
# maps gradients, so PyTorch's backward checks minipt's to 1e-8 in float64. The rotary
# convention (halves, not interleaved pairs) and the epsilons are part of the mapping too.

# %% [markdown]
# ## Exercises
# 1. GPT-2's `Conv1D` stores $W$ as (in, out) and computes $xW$; minipt's `Linear` stores
#    (out, in) and computes $xW^\top$. Show on the folder's `c_attn` that both give the
#    same output once the matrix is transposed, and that a square matrix left untransposed
#    would load without a shape error yet compute something else.
# 2. Meta's original LLaMA rotated interleaved pairs $(2i, 2i+1)$. Find the permutation
#    of a head's channels that turns the interleaved rotation into the halves rotation.
# 3. The GPT-2 folder has no `lm_head.weight`. How many numbers does the folder store,
#    and how many would an untied head add?
#
# ## Solutions

# %%
# 1. The same product, two storage conventions; a square W.T is a different, valid-shaped map.
W_conv = read_file(FIXTURES / "gpt2" / "model.safetensors")[0]["transformer.h.0.attn.c_attn.weight"]
xc = np.random.default_rng(0).standard_normal((2, W_conv.shape[0]))         # (N, C_in)
W_linear = W_conv.T                                                       # (C_out, C_in), minipt's layout
print("Conv1D x W == Linear x (W^T)^T:", np.allclose(xc @ W_conv, xc @ W_linear.T))
sq = np.random.default_rng(1).standard_normal((4, 4))
print("square W loaded untransposed gives the same map:", np.allclose(xc[:, :4] @ sq, xc[:, :4] @ sq.T))

# %%
# 2. Interleaved pair (2i, 2i+1) must become (i, i + D/2): send channel 2i to i and 2i+1 to i + D/2.
D = 8
perm = np.concatenate([np.arange(0, D, 2), np.arange(1, D, 2)])       # new channel j takes old perm[j]
v = np.random.default_rng(2).standard_normal(D)
t, theta = 3, 10000.0
ang = t * theta ** (-2 * np.arange(D // 2) / D)                          # (D/2,)
inter = v.copy()                                                          # interleaved rotation of v
inter[0::2] = v[0::2] * np.cos(ang) - v[1::2] * np.sin(ang)
inter[1::2] = v[0::2] * np.sin(ang) + v[1::2] * np.cos(ang)
halves, _ = rope_forward(v[perm].reshape(1, 1, 1, D), np.array([t]))
print("halves rotation of the permuted vector == permuted interleaved rotation:",
      np.allclose(halves.ravel(), inter[perm]))

# %%
# 3. Count the stored tensors; an untied head would add a (V, C) matrix.
stored = sum(int(np.prod(tensor.shape)) for tensor in index.values())
print(f"stored numbers {stored:,}; an untied lm_head would add {config['vocab_size'] * config['n_embd']:,}")
