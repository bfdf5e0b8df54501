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
# # 26 · Text and images: one stream or two
#
# Vision-language pre-training reads an image as a set of regions, each a detector's
# feature vector with a box, and learns how words map to them. Two designs:
#
# - **single stream** (VisualBERT, UNITER): words and regions go into one Transformer
#   together, and every layer mixes them;
# - **two streams** (ViLBERT, LXMERT): a text Transformer and a region Transformer,
#   joined by **co-attention**, where each stream's queries read the other stream.
#
# This lesson builds co-attention, pre-trains a two-stream model and looks at which
# region each word attends to; then it reads the comparisons from the claims ledger.

# %% [markdown]
# Shapes: `B` batch, `T` words, `N` regions, `F` region features, `C` width, `H` heads.

# %%
import matplotlib.patches as patches
import matplotlib.pyplot as plt
import numpy as np

from minipt import gradcheck
from minipt import lesson_budget as budget
from minipt.core.gradcheck import check_module
from minipt.data import toy_scenes as ts
from minipt.experiments import ledger, multimodal
from minipt.experiments.verdict import VERDICTS
from minipt.models.multimodal.single_stream import VLConfig
from minipt.models.multimodal.single_stream import tiny as tiny_single
from minipt.models.multimodal.two_stream import CoAttentionLayer
from minipt.models.multimodal.two_stream import tiny as tiny_two
from minipt.objectives.vision_language import make_batch, vocabulary
from minipt.train import TrainConfig, train

print("budget:", budget.current())

# %% [markdown]
# ## 1. A scene, as a detector reports it
#
# Two to four objects on a unit square. The model never sees the labels: each region is
# a feature vector (category and colour one-hots plus noise, mixed by a fixed rotation)
# and a box (x0, y0, x1, y1). The caption names one or two objects, and we know which
# words name which region.

# %%
rng = np.random.default_rng(4)
scene = ts.make_scene(rng, 3)
words, grounding = ts.caption(scene, rng)
fig, ax = plt.subplots(figsize=(4, 4))
for r, (x0, y0, x1, y1) in enumerate(scene.boxes):
    ax.add_patch(patches.Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False,
                                   color=ts.COLOURS[scene.colours[r]], lw=2))
    ax.text(x0, y0 - 0.01, f"{r}: {ts.COLOURS[scene.colours[r]]} {ts.CATEGORIES[scene.categories[r]]}", fontsize=8)
ax.set(xlim=(0, 1), ylim=(1, 0), xlabel="x", ylabel="y", title=" ".join(words))
plt.show()
print("grounding (word -> region):", [(words[w], r) for w, r in grounding])
print("region features", scene.features.shape, "boxes", scene.boxes.shape)

# %% tags=["checks"]
assert ts.describes(scene, words)

# %% [markdown]
# ## 2. The three objectives on one batch
#
# Half the pairs are mismatched (another scene's caption, checked to be false of this
# scene). On matched pairs only, 15 % of the words are masked (BERT's 80/10/10) and 15 %
# of the regions have their features zeroed: the model must name the hidden object's
# category (MRC) and regress its features (MRFR) from the words and the other regions;
# image-text matching (ITM) asks whether caption and scene belong together.

# %%
pairs = ts.matching_pairs(400, seed=0)
b = make_batch(pairs, np.random.default_rng(0))
vocab = vocabulary()
for i, (_, caption, match) in enumerate(pairs[:4]):
    shown = " ".join(vocab[t] for t in b.ids[i] if vocab[t] != "[PAD]")
    print(f"match={match}: {shown:45s} masked regions: {np.flatnonzero(b.region_labels[i] >= 0).tolist()}")
matched = np.array([m for _, _, m in pairs]) == 1
words_real = (b.ids != vocab.index("[PAD]")) & (b.ids != vocab.index("[CLS]")) & (b.ids != vocab.index("[SEP]"))
word_rate = (b.mlm_labels >= 0)[matched].sum() / words_real[matched].sum()
region_rate = (b.region_labels >= 0)[matched].sum() / b.region_mask[matched].sum()
print(f"over {matched.sum()} matched pairs: {word_rate:.3f} of the words and {region_rate:.3f} of the regions masked")

# %% tags=["checks"]
assert abs(word_rate - 0.15) < 0.03 and abs(region_rate - 0.15) < 0.03


# %% [markdown]
# ## 3. Co-attention, built here
#
# One co-attention exchange: the words' queries read the regions' keys and values, and
# the regions' queries read the words', both from the states before the layer.
# Cross-attention is lesson 18's attention with queries from one sequence and keys and
# values from another: `softmax(Q K^T / sqrt(D)) V`, masked where the other stream pads.

# %%
def cross_attention_forward(x, memory, keys, P, H):
    """Queries from x (B, T, C), keys and values from memory (B, S, C); keys (B, 1, S) True
    where a memory position is real -> y (B, T, C), cache."""
    B, T, C = x.shape
    S, D = memory.shape[1], C // H
    q = (x @ P["Wq"].T + P["bq"]).reshape(B, T, H, D).transpose(0, 2, 1, 3)       # (B, H, T, D)
    kv = memory @ P["Wkv"].T + P["bkv"]                                          # (B, S, 2C)
    k = kv[..., :C].reshape(B, S, H, D).transpose(0, 2, 1, 3)                    # (B, H, S, D)
    v = kv[..., C:].reshape(B, S, H, D).transpose(0, 2, 1, 3)                    # (B, H, S, D)
    s = np.where(keys[:, None], q @ k.transpose(0, 1, 3, 2) / np.sqrt(D), -np.inf)   # (B, H, T, S)
    a = np.exp(s - s.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)                                                # (B, H, T, S)
    o = (a @ v).transpose(0, 2, 1, 3).reshape(B, T, C)                           # heads side by side
    return o @ P["Wo"].T + P["bo"], (x, memory, q, k, v, a, o, H)


# %%
def cross_attention_backward(dy, cache, P):
    """dy (B, T, C) -> dx (B, T, C), dmemory (B, S, C), {name: gradient}."""
    x, memory, q, k, v, a, o, H = cache
    B, T, C = x.shape
    S, D = memory.shape[1], C // H
    g = {"Wo": dy.reshape(-1, C).T @ o.reshape(-1, C), "bo": dy.sum((0, 1))}
    do = (dy @ P["Wo"]).reshape(B, T, H, D).transpose(0, 2, 1, 3)               # (B, H, T, D)
    da = do @ v.transpose(0, 1, 3, 2)                                            # (B, H, T, S)
    dv = a.transpose(0, 1, 3, 2) @ do                                            # (B, H, S, D)
    ds = a * (da - (da * a).sum(-1, keepdims=True)) / np.sqrt(D)                 # softmax, then the scale
    dq, dk = ds @ k, ds.transpose(0, 1, 3, 2) @ q                                # (B, H, T|S, D)
    rows = lambda t, n: t.transpose(0, 2, 1, 3).reshape(B * n, C)               # (B, H, n, D) -> (B*n, C)
    dkv = np.concatenate([rows(dk, S), rows(dv, S)], 1)                          # (B*S, 2C)
    g.update(Wq=rows(dq, T).T @ x.reshape(-1, C), bq=rows(dq, T).sum(0),
             Wkv=dkv.T @ memory.reshape(-1, C), bkv=dkv.sum(0))
    return (rows(dq, T) @ P["Wq"]).reshape(B, T, C), (dkv @ P["Wkv"]).reshape(B, S, C), g


# %%
def co_attention(t, r, t_keys, r_keys, Pt, Pr, H):
    """t (B, T, C), r (B, N, C) -> (t', r') and backward(dt', dr') -> (dt, dr, text grads,
    region grads). Each stream's gradient comes back by two paths: as queries and as memory."""
    t_new, cache_t = cross_attention_forward(t, r, r_keys, Pt, H)               # words read regions
    r_new, cache_r = cross_attention_forward(r, t, t_keys, Pr, H)               # regions read words

    def backward(dt_new, dr_new):
        dt, dr_as_memory, gt = cross_attention_backward(dt_new, cache_t, Pt)
        dr, dt_as_memory, gr = cross_attention_backward(dr_new, cache_r, Pr)
        return dt + dt_as_memory, dr + dr_as_memory, gt, gr
    return t_new, r_new, backward


# %% [markdown]
# Checked in float64 (a random upstream gradient on both outputs; both inputs and every
# weight of both directions), then against the cross-attention sub-layers of the
# library's `CoAttentionLayer`, given the same weights.

# %%
rng = np.random.default_rng(0)
B, T, N, C, H = 2, 5, 3, 8, 2
layer = CoAttentionLayer(VLConfig(vocab_size=20, d_model=C, n_head=H).block(rng, np.float64))
names = {"Wq": ("q_proj", "weight"), "bq": ("q_proj", "bias"), "Wkv": ("kv_proj", "weight"),
         "bkv": ("kv_proj", "bias"), "Wo": ("c_proj", "weight"), "bo": ("c_proj", "bias")}


def weights(block):
    """Random weights into the library block's cross-attention; the same arrays for ours."""
    for module, key in names.values():
        p = getattr(block.cross_attn, module).params[key]
        p[...] = rng.normal(0, 0.5, p.shape)
    return {k: getattr(block.cross_attn, module).params[key].copy() for k, (module, key) in names.items()}


Pt, Pr = weights(layer.text_block), weights(layer.region_block)
t, r = rng.normal(size=(B, T, C)), rng.normal(size=(B, N, C))
t_keys = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], bool)[:, None]           # (B, 1, T): 2nd caption padded
r_keys = np.array([[1, 1, 1], [1, 1, 0]], bool)[:, None]                       # (B, 1, N): 2nd scene padded


def run():
    t_new, r_new, backward = co_attention(t, r, t_keys, r_keys, Pt, Pr, H)

    def grads(G):
        dt, dr, gt, gr = backward(G[:t_new.size].reshape(t_new.shape), G[t_new.size:].reshape(r_new.shape))
        return {"t": dt, "r": dr, **{f"text {k}": v for k, v in gt.items()},
                **{f"region {k}": v for k, v in gr.items()}}
    return np.concatenate([t_new.ravel(), r_new.ravel()]), grads


check = gradcheck(run, {"t": t, "r": r, **{f"text {k}": v for k, v in Pt.items()},
                        **{f"region {k}": v for k, v in Pr.items()}})
print(f"gradcheck of the notebook's co-attention: {len(check.arrays)} arrays, "
      f"worst relative error {check.max_error():.1e}")
Gt, Gr = rng.normal(size=(B, T, C)), rng.normal(size=(B, N, C))
t_new, r_new, backward = co_attention(t, r, t_keys, r_keys, Pt, Pr, H)
dt, dr, gt, gr = backward(Gt, Gr)
layer.zero_grad()
lib_t = layer.text_block.cross_attn(t, r, mask=r_keys)
lib_r = layer.region_block.cross_attn(r, t, mask=t_keys)
back_t, back_r = layer.text_block.cross_attn.backward(Gt), layer.region_block.cross_attn.backward(Gr)
print("largest gap to the library: outputs", max(np.abs(t_new - lib_t).max(), np.abs(r_new - lib_r).max()),
      " input gradients", max(np.abs(dt - back_t.dx - back_r.dmemory).max(),
                              np.abs(dr - back_r.dx - back_t.dmemory).max()))

# %% tags=["checks"]
assert check.passed and check.max_error() < 1e-7
np.testing.assert_allclose(t_new, lib_t, rtol=1e-12, atol=1e-12)
np.testing.assert_allclose(r_new, lib_r, rtol=1e-12, atol=1e-12)
np.testing.assert_allclose(dt, back_t.dx + back_r.dmemory, rtol=1e-10, atol=1e-12)
np.testing.assert_allclose(dr, back_r.dx + back_t.dmemory, rtol=1e-10, atol=1e-12)
for k, (module, key) in names.items():
    np.testing.assert_allclose(gt[k], getattr(layer.text_block.cross_attn, module).grads[key], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gr[k], getattr(layer.region_block.cross_attn, module).grads[key], rtol=1e-10, atol=1e-12)

# %% [markdown]
# ## 4. The two library models, checked whole
#
# In the library each co-attention block also has self-attention and an FFN, with
# post-LN residuals (lesson 15's block); the single stream concatenates `[CLS] caption
# [SEP]` and the regions into one BERT stack. Both models' backward passes reach the
# region features and boxes, and both are checked whole in float64.

# %%
whole = {}
for name, tiny in (("single stream", tiny_single), ("two streams", tiny_two)):
    model, batch = tiny()
    whole[name] = check_module(model, *batch, select=lambda out: out[0], max_checks=5)
    print(f"{name}: {len(whole[name].arrays)} arrays, worst relative error {whole[name].max_error():.1e}")

# %% tags=["checks"]
assert all(res.passed for res in whole.values())

# %% [markdown]
# ## 5. A two-stream model, pre-trained
#
# The study's two-stream model (one text layer, one co-attention layer) pre-trains on
# the three objectives over generated caption-scene pairs (800 steps here; the study
# gives it 1500). The validation curve reads
# pairs from other scenes; the dashed line is the loss of a uniform guess on the three
# classification parts (MLM, MRC, ITM), before the feature regression's share.

# %%
b = multimodal.BUDGETS["full"]
steps = budget.pick(full=800, quick=60)
two = multimodal.build("two streams", seed=0)
data = {"train": multimodal._pretrain_batches(ts.matching_pairs(b["pairs"], seed=0)),
        "val": multimodal._pretrain_batches(ts.matching_pairs(400, seed=99))}
pre = train(two, lambda split, rng: data[split](split, rng),
            TrainConfig(steps=steps, lr=multimodal.LR, min_lr=multimodal.LR / 10, warmup=steps // 10,
                        weight_decay=0.01, eval_every=max(steps // 10, 1), seed=0, progress=False))
uniform = np.log(len(vocab)) + np.log(len(ts.CATEGORIES)) + np.log(2)
fig, ax = plt.subplots(figsize=(6, 3.4))
ax.plot(*zip(*[(h["step"], h["loss"]) for h in pre.history]), lw=0.6, label="train")
ax.plot(*zip(*[(h["step"], h["val_loss"]) for h in pre.history if "val_loss" in h]), "o-", label="validation")
ax.axhline(uniform, ls="--", c="k", lw=1, label="uniform guess (MLM + MRC + ITM)")
ax.set(xlabel="step", ylabel="loss (nats, + MRFR's squared error)", title="two-stream pre-training")
ax.legend(fontsize=8)
plt.show()
print(f"pre-training loss {pre.history[0]['loss']:.2f} at the start, {pre.train_loss:.2f} after {steps} steps "
      f"(validation {pre.val_loss:.2f}; uniform guess {uniform:.2f})")

# %% tags=["checks"]
assert pre.val_loss < pre.history[0]["loss"]

# %% [markdown]
# ## 6. Which region does a word look at?
#
# The last co-attention layer's weights from each word to each region (averaged over
# heads), for one held-out scene: rows are the caption's words, columns the regions, and
# a grounded word's own region is outlined. Over many held-out captions, the share of
# grounded words whose most-attended region is their own object is printed below it.

# %%
rng = np.random.default_rng(11)
scene = ts.make_scene(rng, 3)
words, grounded = ts.caption(scene, rng)
attention = multimodal.word_region_attention(two, [scene], [words])[0, 1:len(words) + 1]   # (words, N)
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
for k, (x0, y0, x1, y1) in enumerate(scene.boxes):
    axes[0].add_patch(patches.Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False,
                                        color=ts.COLOURS[scene.colours[k]], lw=2))
    axes[0].text(x0, y0 - 0.01, f"region {k}", fontsize=8)
axes[0].set(xlim=(0, 1), ylim=(1, 0), xlabel="x", ylabel="y", title=" ".join(words))
image = axes[1].imshow(attention, cmap="Blues", vmin=0, vmax=1, aspect="auto")
fig.colorbar(image, ax=axes[1], label="attention weight")
axes[1].set_yticks(range(len(words)), words)
axes[1].set_xticks(range(scene.n_regions), [f"region {k}" for k in range(scene.n_regions)])
for word, region in grounded:
    axes[1].add_patch(patches.Rectangle((region - 0.5, word - 0.5), 1, 1, fill=False, color="red", lw=2))
axes[1].set(xlabel="region", ylabel="caption word", title="two streams: word -> region co-attention")
plt.tight_layout()
plt.show()
held_out = [ts.make_scene(np.random.default_rng(7 + i)) for i in range(200)]
share = multimodal.grounding(two, held_out, np.random.default_rng(3))
by_chance = np.mean([1 / s.n_regions for s in held_out])
print(f"grounded words attending most to their own object: {share:.2f} (picking a region at random: {by_chance:.2f})")

# %% [markdown]
# Nothing in the three objectives asks a word to attend to its own object: MLM, MRC and
# ITM can be solved by any mix of regions that carries the answer. Compare the printed
# share with what picking a region at random gives; the papers observed grounding in
# attention at scale, with real images and far more pre-training.

# %% [markdown]
# ## 7. Single against two streams, pre-trained against not: the ledger
#
# At about equal parameters (four joint layers against one text layer plus one
# co-attention layer), each design is pre-trained or not, then fine-tuned on two tasks
# and tested on held-out scenes: retrieval (rank 100 scenes for a caption and 100
# captions for a scene by the matching head) and visual question answering ("what colour
# is the ball ?", "how many objects ?"). The scratch arms train for as many steps on each
# task as the pre-trained arms do in pre-training and fine-tuning together. Three seeds:

# %%
sizes = {d: multimodal.build(d).num_parameters() for d in multimodal.DESIGNS}
print(f"parameters: {sizes}; retrieval among {b['candidates']} held-out scenes, VQA on {b['questions']} "
      "held-out questions\n")
claims = [r for r in ledger.rows() if r["experiment"] == "multimodal"]
for row in claims:
    print(f"{row['says']}\n  -> {row['verdict']}: {row['why']}\n")
record = ledger.load("multimodal")
arms = list(record["runs"][0]["arms"])
fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
for ax, (metric, floor) in zip(axes, (("VQA accuracy", "majority answer"), ("R@5", "chance retrieval"))):
    v = np.array([[run["arms"][a][metric] for run in record["runs"]] for a in arms])      # (arms, seeds)
    ax.bar(range(len(arms)), v.mean(1), yerr=v.std(1, ddof=1), capsize=5,
           color=["#bbb", "#69c", "#ddd", "#c63"])
    ax.axhline(np.mean([run["floors"][floor] for run in record["runs"]]), ls="--", c="k", lw=1, label=floor)
    ax.set_xticks(range(len(arms)), [a.replace(", ", "\n") for a in arms], fontsize=8)
    ax.set(xlabel="arm", ylabel=metric, title=f"{metric} (mean ± sd over {v.shape[1]} seeds)")
    ax.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# In the ledger's words: the two-stream model beating the single stream on VQA is
# **reversed**, pre-training helping VQA at equal total steps is **reversed**, and
# pre-training helping retrieval is **not testable at this scale**, because the two-stream
# arms rank the right scene among their top five no more often than chance. Every design
# answers the questions better when its steps go to the questions themselves than when
# most of them go to the three pre-training objectives. The papers pre-trained on
# millions of real image-caption pairs; this toy shows that the objectives alone, at a
# small budget, do not buy what the task's own steps buy.

# %% tags=["checks"]
assert [row["claim"] for row in claims] == ["vl-streams", "vl-pretraining-vqa", "vl-pretraining-retrieval"]
assert all(row["verdict"] in VERDICTS for row in claims)
assert {row["claim"]: row["verdict"] for row in claims} == {
    "vl-streams": "reversed", "vl-pretraining-vqa": "reversed", "vl-pretraining-retrieval": "not testable at this scale"}
assert record["budget"] == "full" and sorted(run["seed"] for run in record["runs"]) == [0, 1, 2]
vqa = {a: np.mean([run["arms"][a]["VQA accuracy"] for run in record["runs"]]) for a in arms}
for design in ("single-stream", "two-stream"):
    assert vqa[f"{design}, scratch"] > vqa[f"{design}, pre-trained"]

# %% [markdown]
# ## Exercises
#
# 1. Give the notebook's `co_attention` a region stream in which every region of the
#    second scene is padding except one. What must each word's attention row be for that
#    scene? Check it from the cache.
# 2. In `co_attention`, both blocks read the states *before* the layer. Write the
#    variant in which the regions read the words' *new* states `t'`. Which extra
#    gradient path does its backward need?
# 3. Count the parameters of one co-attention exchange (both directions) for `C = 32`
#    and compare with one self-attention layer over words and regions together.

# %% [markdown]
# ## Solutions
#
# **1.** With one real region the softmax has one finite score per row, so every word
# puts weight 1 on it.

# %%
one_region = np.array([[1, 1, 1], [1, 0, 0]], bool)[:, None]
_, cache = cross_attention_forward(t, r, one_region, Pt, H)
print("second scene, every word and head on region 0:", np.allclose(cache[5][1, :, :, 0], 1.0))

# %% [markdown]
# **2.** `r' = cross(r, t')` makes the regions depend on `t` through `t'` as well: the
# backward first sends `dr'` into `dt'` (as memory), adds it to the upstream `dt'`, and
# only then runs the text direction's backward.

# %%
def co_attention_sequential(t, r, t_keys, r_keys, Pt, Pr, H):
    t_new, cache_t = cross_attention_forward(t, r, r_keys, Pt, H)
    r_new, cache_r = cross_attention_forward(r, t_new, t_keys, Pr, H)

    def backward(dt_new, dr_new):
        dr, dt_new_as_memory, _ = cross_attention_backward(dr_new, cache_r, Pr)
        dt, dr_as_memory, _ = cross_attention_backward(dt_new + dt_new_as_memory, cache_t, Pt)
        return dt, dr + dr_as_memory
    return t_new, r_new, backward


def run_sequential():
    t_new, r_new, backward = co_attention_sequential(t, r, t_keys, r_keys, Pt, Pr, H)
    split = lambda G: (G[:t_new.size].reshape(t_new.shape), G[t_new.size:].reshape(r_new.shape))
    return np.concatenate([t_new.ravel(), r_new.ravel()]), lambda G: dict(zip(("t", "r"), backward(*split(G))))


print("sequential variant passes its gradcheck:", gradcheck(run_sequential, {"t": t, "r": r}).passed)

# %% [markdown]
# **3.** Each direction has W_q (C×C), W_kv (2C×C), W_o (C×C) and their biases:
# 4C² + 4C weights, twice for the two directions. One self-attention layer has the
# same 4C² + 4C once, but its T + N queries read all T + N keys.

# %%
C = 32
print(f"co-attention exchange: {2 * (4 * C * C + 4 * C)} weights; one joint self-attention: {4 * C * C + 4 * C}")
