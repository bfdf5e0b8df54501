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
# # 23 · GLM: autoregressive blank infilling
#
# BERT fills blanks but predicts the tokens of a blank independently of each other and
# must know how many there are; GPT generates but only at the end. GLM (Du et al. 2022)
# blanks out **spans**, puts one [MASK] per span in the text (**Part A**), and generates
# the spans one after the other, each token from the ones before it (**Part B**):
#
# $$\max_\theta\ \mathbb{E}_z\Big[\sum_{i} \log p_\theta\big(s_{z_i} \mid x_{\text{corrupt}}, s_{z_{<i}}\big)\Big],$$
#
# with $z$ a random order of the spans. One mask makes Part A an encoder (it sees all of
# Part A, nothing of Part B) and Part B a decoder (it sees Part A and itself up to the
# current token). **2-D positions** tell a Part B token which blank it fills and where it
# is inside the span, without telling the model the span's length.

# %% [markdown]
# This lesson builds one example, its 2-D positions and its mask by hand, and the 2-D
# position embedding with its backward; checks each against the library; trains
# minipt's GLM (`minipt.models.unified.glm`: post-LN blocks, GELU and a single tied output
# layer, as the survey this book follows describes it) on toy sentences; and asks how
# often its fills are sentences the toy language can say, against random words and
# against BERT's way of filling at equal steps. Shapes: `B` batch, `N` Part A + Part B,
# `C` channels, `V` vocabulary.

# %%
import matplotlib.pyplot as plt
import numpy as np

from minipt import lesson_budget as budget
from minipt.core.module import eval_mode
from minipt.models import registry
from minipt.objectives.common import IGNORE
from minipt.objectives.permutation import blank_lengths, glm_blank_infilling
from minipt.objectives.spans import place_spans
from minipt.recipes import unified as R
from minipt.train import TrainConfig, train

tok = R.tokenizer()
sp = R.special_ids()

# %% [markdown]
# ## 1. One example by hand: Part A, Part B, the positions, the mask
# GLM draws span lengths from Poisson(3) (zero left out) until about 15 % of the tokens
# are covered (at least one span), and places the spans at random, at least one token
# apart (the library's `blank_lengths` and `place_spans`). The rest is bookkeeping, built
# here: Part A is the text with one [MASK] per span; Part B holds the spans in a random
# order, each opened by [START] and closed by [END] as a target.

# %%
def glm_example(ids, rng, ratio):
    """ids (T,) -> Part A + Part B ids (N,), positions (2, N), targets (N,), mask (N, N), n_a."""
    T = len(ids)
    lengths = blank_lengths(T, rng, ratio)                              # (k,) Poisson(3) lengths
    spans = sorted((int(s), int(s) + int(n)) for s, n in zip(place_spans(lengths, T, rng, min_gap=1), lengths))
    part_a, blank_at, i = [], {}, 0
    for s, e in spans:                                                  # Part A: one [MASK] per span
        part_a += list(ids[i:s])
        blank_at[(s, e)] = len(part_a)
        part_a.append(sp["mask_id"])
        i = e
    part_a += list(ids[i:])
    n_a = len(part_a)
    b_ids, b_tgt, pos_1, pos_2 = [], [], [], []
    for k in rng.permutation(len(spans)):                               # Part B: the spans, shuffled
        s, e = spans[k]
        b_ids += [sp["start_id"], *ids[s:e]]                            # [START] s_1 .. s_l
        b_tgt += [*ids[s:e], sp["end_id"]]                              # s_1 .. s_l [END]
        pos_1 += [blank_at[(s, e)]] * (e - s + 1)                       # 1st id: where the blank is
        pos_2 += list(range(1, e - s + 2))                              # 2nd id: place inside the span
    N = n_a + len(b_ids)
    positions = np.array([list(range(n_a)) + pos_1, [0] * n_a + pos_2])   # (2, N)
    mask = np.zeros((N, N), dtype=bool)
    mask[:, :n_a] = True                                                # everyone sees Part A
    mask[n_a:, n_a:] = np.tril(np.ones((N - n_a, N - n_a), dtype=bool))   # Part B: left to right
    return np.array(part_a + b_ids), positions, np.array([IGNORE] * n_a + b_tgt), mask, n_a


# %% [markdown]
# The same random draws in the same order give the library's example exactly. One
# sentence with 30 % of its words blanked, shown as a table and as a mask:

# %%
sentence = "the old king sees his gold near the river ."
ids_, positions, targets, mask, n_a = glm_example(R.ids(sentence), np.random.default_rng(1), ratio=0.3)
ex = glm_blank_infilling(R.ids(sentence), np.random.default_rng(1), ratio=0.3, **sp)
N = len(ids_)
names = [tok.id_to_token(i) for i in ids_]
print(f"{'':>8}" + "".join(f"{w:>8}" for w in names))
print(f"{'pos 1':>8}" + "".join(f"{q:>8}" for q in positions[0]))
print(f"{'pos 2':>8}" + "".join(f"{q:>8}" for q in positions[1]))
print(f"{'target':>8}" + "".join(f"{tok.id_to_token(t) if t >= 0 else '-':>8}" for t in targets))

plt.figure(figsize=(5.5, 4.5))
plt.imshow(mask, cmap="Greys", vmin=0, vmax=1)
plt.colorbar(label="may attend", shrink=0.8)
plt.axvline(n_a - 0.5, color="C1")
plt.axhline(n_a - 0.5, color="C1")
plt.xticks(range(N), names, rotation=90, fontsize=7)
plt.yticks(range(N), names, fontsize=7)
plt.xlabel("key")
plt.ylabel("query")
plt.title("GLM's mask: Part A | Part B")
plt.show()

# %% tags=["checks"]
for key, mine in (("ids", ids_), ("positions", positions), ("targets", targets), ("mask", mask)):
    np.testing.assert_array_equal(mine, ex[key])                              # the library's example
for seed in range(50):                                                        # and on other sentences
    s50 = R.ids(R.toy_sentences(1, seed)[0])
    mine = glm_example(s50, np.random.default_rng(seed), 0.15)
    theirs = glm_blank_infilling(s50, np.random.default_rng(seed), ratio=0.15, **sp)
    for a_, key in zip(mine, ("ids", "positions", "targets", "mask", "n_a")):
        np.testing.assert_array_equal(a_, theirs[key])
assert mask[:n_a, :n_a].all() and not mask[:n_a, n_a:].any()             # A: bidirectional, blind to B
assert mask[n_a:, :n_a].all()                                              # B sees all of A
starts = np.flatnonzero(ids_ == sp["start_id"])
for s_ in starts:                                # each span's [START] sits at its [MASK]'s position, 2nd id 1
    assert ids_[positions[0, s_]] == sp["mask_id"] and positions[1, s_] == 1
assert (positions[1, :n_a] == 0).all()

# %% [markdown]
# The first position of every Part B token is the position of its blank's [MASK] in
# Part A; the second counts up inside the span from 1 at [START]. A span's length shows
# nowhere in Part A: one [MASK] stands for a span of any length, and the model decides
# when to stop by predicting [END].
#
# ## 1b. The 2-D position embedding: forward and backward
# Each token's input is the sum of three rows: its word, its first position id (a place
# in Part A) and its second (a place inside a span), each from its own learned table.
# Backward, the gradient of a row is the sum of the upstream gradients of the tokens
# that read it (`np.add.at` adds repeated ids correctly).

# %%
def embed_2d(ids, positions, W_tok, W_pos, W_blk):
    """ids (B, N), positions (B, 2, N); tables (V, C), (P, C), (P, C) -> x (B, N, C)."""
    return W_tok[ids] + W_pos[positions[:, 0]] + W_blk[positions[:, 1]]


def embed_2d_backward(dx, ids, positions, shapes):
    """dx (B, N, C) -> dW_tok, dW_pos, dW_blk: each row the sum over the tokens that read it."""
    grads = [np.zeros(s) for s in shapes]
    for g, index in zip(grads, (ids, positions[:, 0], positions[:, 1])):
        np.add.at(g, index, dx)                                          # (B, N) rows <- (B, N, C)
    return grads


# %% [markdown]
# Checked in float64 by central differences (a random upstream gradient $G$,
# $L = \sum x \odot G$), then against the library's GLM on the example above.

# %%
rng = np.random.default_rng(0)
C = 8
tables = [rng.standard_normal((tok.vocab_size, C)), rng.standard_normal((32, C)), rng.standard_normal((32, C))]
I, P = ids_[None], positions[None]                                       # (1, N), (1, 2, N)
G = rng.standard_normal((1, N, C))
grads = embed_2d_backward(G, I, P, [t.shape for t in tables])
worst = 0.0
for t, g in zip(tables, grads):
    rows = np.unique(np.concatenate([I.ravel(), P.ravel()]) % len(t))    # rows read, and some unread
    for idx in [(r, c) for r in rows[:12] for c in range(0, C, 3)]:
        old = t[idx]
        t[idx] = old + 1e-6
        up = (embed_2d(I, P, *tables) * G).sum()
        t[idx] = old - 1e-6
        down = (embed_2d(I, P, *tables) * G).sum()
        t[idx] = old
        worst = max(worst, abs((up - down) / 2e-6 - g[idx]))
print(f"gradcheck of the three tables: largest absolute error {worst:.1e}")
lib = registry.get("glm").build(rng=np.random.default_rng(0), dtype=np.float64, vocab_size=tok.vocab_size,
                                max_position=32, n_layer=1, n_head=2, d_model=C)
for module, t in zip((lib.word_embeddings, lib.position_embeddings, lib.block_position_embeddings), tables):
    module.params["weight"][...] = t
lib.zero_grad()
lib_x = lib.embed(I, P)
for module in (lib.word_embeddings, lib.position_embeddings, lib.block_position_embeddings):
    module.backward(G)

# %% tags=["checks"]
assert worst < 1e-8
np.testing.assert_allclose(embed_2d(I, P, *tables), lib_x, rtol=1e-12)
for module, g in zip((lib.word_embeddings, lib.position_embeddings, lib.block_position_embeddings), grads):
    np.testing.assert_allclose(module.grads["weight"], g, rtol=1e-12, atol=1e-12)

# %% [markdown]
# ## 2. Training on toy sentences
# The library's GLM (these embeddings, then lesson 01's attention under the mask above
# in post-LN blocks, and the tied output layer) is trained on toy sentences. The dashed
# line is a model that ignores the context: the entropy of the words and [END] it must
# predict.

# %%
entry = registry.get("glm")
p = entry.presets["toy"]
steps = budget.pick(full=800, quick=250)
sentences = [R.ids(s) for s in R.toy_sentences(budget.pick(full=4000, quick=800), 0)]
held_words = R.toy_sentences(300, 1000)
held = [R.ids(s) for s in held_words]
model = entry.build(rng=np.random.default_rng(0), vocab_size=tok.vocab_size, **p.model)
result = train(model, lambda split, r: R.glm_batch(sentences if split == "train" else held, r, p.batch_size,
                                                    p.data["ratio"]),
               TrainConfig(**{**p.train, "steps": steps, "warmup": steps // 10, "eval_every": max(steps // 8, 1)},
                           progress=False))
ev = [h for h in result.history if h.get("val_loss") is not None]
print(f"{model.num_parameters():,} parameters, {steps} steps in {result.seconds:.0f} s; held-out loss per "
      f"Part B token {ev[-1]['val_loss']:.3f} (log V = {np.log(tok.vocab_size):.3f})")
wanted = R.glm_batch(sentences, np.random.default_rng(9), 2000, p.data["ratio"])[3]     # Part B targets
counts = np.bincount(wanted[wanted != IGNORE], minlength=tok.vocab_size)
unigram = float(-(counts[counts > 0] / counts.sum() * np.log(counts[counts > 0] / counts.sum())).sum())
print(f"a model without context: {unigram:.3f} nats per Part B token")
hist = [h for h in result.history if "loss" in h]
plt.figure(figsize=(6, 3))
plt.plot([h["step"] for h in hist], [h["loss"] for h in hist], label="train")
plt.plot([h["step"] for h in ev], [h["val_loss"] for h in ev], "o-", label="held out")
plt.axhline(unigram, color="C7", ls="--", label="no context (unigram of Part B targets)")
plt.xlabel("step")
plt.ylabel("nats per Part B token")
plt.title("GLM training: autoregressive blank infilling")
plt.legend()
plt.show()

# %% tags=["checks"]
assert ev[-1]["val_loss"] < np.log(tok.vocab_size) - 1 and ev[-1]["val_loss"] < unigram

# %% [markdown]
# ## 3. Filling blanks
# At inference Part A is given with its [MASK]s; each blank in turn gets a [START] at its
# position and is generated greedily until [END]. The toy language is a hidden Markov
# model, so we can ask its oracle whether a filled sentence is one it can produce at all
# (probability > 0): a right number of words of the right kinds in the right order. The
# baseline fills each blank with random words of the language, as many as were removed
# (it is told the length, which GLM is not).

# %%
rng = np.random.default_rng(3)
for s in held_words[:5]:
    e = glm_blank_infilling(R.ids(s), rng, ratio=p.data["ratio"], **sp)
    part_a = e["ids"][:e["n_a"]]
    spans = model.fill(part_a, **sp, max_span=6)
    shown = iter(spans)
    filled = " ".join(f"[{tok.decode(next(shown))}]" if t == sp["mask_id"] else tok.id_to_token(t) for t in part_a)
    print(f"{' '.join(s):<48} -> {filled}")

rates = R.fill_rates(model, held_words, seed=2, ratio=p.data["ratio"])
for k, v in rates.items():
    print(f"{k:>26}: {v:.3f}")
plt.figure(figsize=(5, 3))
plt.bar(["GLM fills", "random words"], [rates["grammatical fills"], rates["grammatical random fills"]],
        color=["C0", "C7"])
plt.ylabel("share the toy language can say")
plt.ylim(0, 1)
plt.title(f"filled held-out sentences ({len(held_words)})")
plt.show()

# %% [markdown]
# At the full budget 97 % of GLM's fills of the 300 held-out sentences make a sentence
# the toy language can produce, against 1 % for random words of the right lengths; 13 %
# restore exactly the words that were removed. Most blanks admit many right answers (any
# adjective, any food), so exact recovery is not the aim: a fill must fit both sides of
# the blank, which a left-to-right LM, seeing only the left side, cannot promise.

# %% tags=["checks"]
budget.stated("grammatical fills", rates["grammatical fills"], "0.97", band=0.02)
budget.stated("grammatical random fills", rates["grammatical random fills"], "0.01", band=0.01)
budget.stated("exact fills", rates["exact fills"], "0.13", band=0.02)
assert rates["grammatical fills"] > rates["grammatical random fills"] + 0.1        # at either budget

# %% [markdown]
# ## 4. Where Part B looks
# The trained model's attention weights (first layer, first head) on a held-out
# sentence blanked as in training, Part B holding the removed span: Part A rows read
# only Part A; Part B rows read Part A and the span so far. Above the orange line, right of it, every
# weight is 0.

# %%
e = glm_blank_infilling(R.ids(held_words[0]), np.random.default_rng(4), ratio=p.data["ratio"], **sp)
for blk in model.stack.blocks:
    blk.attn.record = True
with eval_mode(model):
    model(e["ids"][None], e["positions"][None], e["mask"])
w = model.stack.blocks[0].attn.last_weights[0, 0]                             # (N, N)
for blk in model.stack.blocks:
    blk.attn.record = False
shown = [tok.id_to_token(i) for i in e["ids"]]
plt.figure(figsize=(6, 5))
plt.imshow(w, cmap="viridis", vmin=0, vmax=1)
plt.colorbar(label="attention weight")
plt.axvline(e["n_a"] - 0.5, color="C1")
plt.axhline(e["n_a"] - 0.5, color="C1")
plt.xticks(range(len(shown)), shown, rotation=90, fontsize=7)
plt.yticks(range(len(shown)), shown, fontsize=7)
plt.xlabel("key (attended to)")
plt.ylabel("query")
plt.title("GLM, layer 1, head 1")
plt.show()

# %% tags=["checks"]
assert (w[~e["mask"]] == 0).all()

# %% [markdown]
# ## 5. Against BERT's way of filling, at equal steps
# BERT would put one [MASK] per missing token, so it must be told each span's length,
# and it predicts the tokens of a span independently of each other. The claims ledger
# trains the same network both ways from the same start, on the same sentences with the
# same span distribution, for the same steps, and fills the same held-out blanks: GLM
# generates each span token by token and decides its length; the BERT-style model gets
# the right number of [MASK]s. Three seeds; error bars are the standard deviation over
# seeds.

# %%
from minipt.experiments import ledger  # noqa: E402

record = ledger.load("glm")
claim = next(r for r in ledger.rows() if r["experiment"] == "glm")
per_seed = {arm: [run["arms"][arm]["fill accuracy"] for run in record["runs"]] for arm in claim["arms"]}
per_seed["random words (floor)"] = [run["floors"]["random words"] for run in record["runs"]]
exact = {arm: [run["arms"][arm]["exact fills"] for run in record["runs"]] for arm in claim["arms"]}
fig, ax = plt.subplots(figsize=(6.5, 3.4))
x = np.arange(len(per_seed))
ax.bar(x - 0.2, [np.mean(v) for v in per_seed.values()], 0.4, yerr=[np.std(v, ddof=1) for v in per_seed.values()],
       capsize=5, label="fill accuracy (the language can say it)")
ax.bar(x[:2] + 0.2, [np.mean(v) for v in exact.values()], 0.4, yerr=[np.std(v, ddof=1) for v in exact.values()],
       capsize=5, label="exact fills (the removed words)")
ax.set_xticks(x, list(per_seed))
ax.set_ylabel("share of held-out sentences")
ax.set_ylim(0, 1)
ax.set_title(f"blank filling at equal steps ({len(record['runs'])} seeds)")
ax.legend(fontsize=8)
plt.show()
for arm in claim["arms"]:
    print(f"{arm:>10}: fill accuracy {np.mean(per_seed[arm]):.3f}, exact fills {np.mean(exact[arm]):.3f}")
print(f"{claim['says']}\n  verdict: {claim['verdict']}. {claim['why']}")

# %% [markdown]
# Over the three seeds, GLM's fills make a sentence the toy language can say 0.969 of the
# time and the BERT-style model's 0.908, although only the BERT-style model is told how
# many words each blank holds; the verdict line above is the ledger's. The BERT-style
# model restores the exact removed words a little more often (0.145 against 0.121):
# the right length narrows its guesses, but guessing each [MASK] on its own can pair
# words that do not go together, which generating the span word by word avoids.

# %% tags=["checks"]
budget.stated("GLM fill accuracy over seeds", np.mean(per_seed["GLM"]), "0.969")
budget.stated("BERT-style fill accuracy over seeds", np.mean(per_seed["BERT-style"]), "0.908")
budget.stated("GLM exact fills over seeds", np.mean(exact["GLM"]), "0.121")
budget.stated("BERT-style exact fills over seeds", np.mean(exact["BERT-style"]), "0.145")
assert list(per_seed)[:2] == ["GLM", "BERT-style"]

# %% [markdown]
# ## Exercises
# 1. Show that Part A does not reveal a span's length: blank spans of different lengths
#    at the same place and compare what Part A looks like.
# 2. Over 200 blanked sentences, check that [END] is a target exactly once per blank,
#    and that every Part B token's first position id points at a [MASK].
# 3. With `embed_2d_backward`, show that the gradient of row 0 of the span-position
#    table is the sum of the upstream gradients of all Part A tokens.
#
# ## Solutions

# %%
# 1. A span of 1, 2 or 3 words after "the": Part A is the same [MASK] at the same place.
words6 = R.ids("the old king sees his gold .")
for n in (1, 2, 3):
    part_a = np.concatenate([words6[:1], [sp["mask_id"]], words6[1 + n:]])
    print(f"span of {n}: Part A = {tok.decode(part_a)!r}, [MASK] at {int(np.flatnonzero(part_a == sp['mask_id'])[0])}")

# %%
# 2. One [END] per [MASK]; every Part B token points at a [MASK] of Part A.
rng = np.random.default_rng(5)
ends = blanks = pointing = 0
for s in R.toy_sentences(200, 7):
    e = glm_blank_infilling(R.ids(s), rng, ratio=0.15, **sp)
    ends += int((e["targets"] == sp["end_id"]).sum())
    blanks += int((e["ids"][:e["n_a"]] == sp["mask_id"]).sum())
    pointing += int((e["ids"][e["positions"][0, e["n_a"]:]] != sp["mask_id"]).sum())
print(f"[END] targets {ends}, blanks {blanks}, Part B tokens pointing elsewhere {pointing}")

# %%
# 3. Every Part A token has span position 0, and only they do.
g_blk = embed_2d_backward(G, I, P, [t.shape for t in tables])[2]
print("max |dW_blk[0] - sum of G over Part A| =", np.abs(g_blk[0] - G[0, :n_a].sum(0)).max())
