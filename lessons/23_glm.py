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
# is inside the span, without telling the model the span's length. This lesson builds one
# example by hand, checks the mask and the positions, trains minipt's GLM
# (`minipt.models.unified.glm`: post-LN blocks, GELU and a single tied output layer, as
# seed 004 notes it) on toy sentences, and asks how often its fills are sentences the toy
# language can say, against random words. Shapes: `B` batch, `N` Part A + Part B, `C`
# channels, `V` vocabulary.

# %%
import matplotlib.pyplot as plt
import numpy as np

from minipt import lesson_budget as budget
from minipt.models import registry
from minipt.objectives.permutation import glm_blank_infilling
from minipt.recipes import unified as R
from minipt.train import TrainConfig, train

tok = R.tokenizer()
sp = R.special_ids()

# %% [markdown]
# ## 1. One example: Part A, Part B, the mask, the positions
# `glm_blank_infilling` draws span lengths from Poisson(3) (zero left out) until about
# 15 % of the tokens are covered (at least one span), places the spans at random,
# replaces each by one [MASK], and appends the spans in a random order, each opened by
# [START] and closed by [END] as a target. The toy sentences are short, so the one span
# most of them get covers far more than 15 % of their words: the blanks here are larger
# than the paper's.

# %%
sentence = "the old king sees his gold near the river ."
ex = glm_blank_infilling(R.ids(sentence), np.random.default_rng(1), ratio=0.3, **sp)
n_a, N = ex["n_a"], len(ex["ids"])
names = [tok.id_to_token(i) for i in ex["ids"]]
print(f"{'':>8}" + "".join(f"{w:>8}" for w in names))
print(f"{'pos 1':>8}" + "".join(f"{p:>8}" for p in ex["positions"][0]))
print(f"{'pos 2':>8}" + "".join(f"{p:>8}" for p in ex["positions"][1]))
print(f"{'target':>8}" + "".join(f"{tok.id_to_token(t) if t >= 0 else '-':>8}" for t in ex["targets"]))

plt.figure(figsize=(4.5, 4.5))
plt.imshow(ex["mask"], cmap="Greys")
plt.axvline(n_a - 0.5, color="C1")
plt.axhline(n_a - 0.5, color="C1")
plt.xticks(range(N), names, rotation=90, fontsize=7)
plt.yticks(range(N), names, fontsize=7)
plt.title("GLM's mask: Part A | Part B")
plt.show()

mask = ex["mask"]
assert mask[:n_a, :n_a].all() and not mask[:n_a, n_a:].any()             # A: bidirectional, blind to B
assert mask[n_a:, :n_a].all()                                              # B sees all of A
assert np.array_equal(mask[n_a:, n_a:], np.tril(np.ones((N - n_a, N - n_a), dtype=bool)))   # B: causal
starts = np.flatnonzero(ex["ids"] == sp["start_id"])
for s in starts:                                 # each span's [START] sits at its [MASK]'s position, 2nd id 1
    assert ex["ids"][ex["positions"][0, s]] == sp["mask_id"] and ex["positions"][1, s] == 1
assert (ex["positions"][1, :n_a] == 0).all()

# %% [markdown]
# The first position of every Part B token is the position of its blank's [MASK] in
# Part A; the second counts up inside the span from 1 at [START]. A span's length shows
# nowhere in Part A: one [MASK] stands for a span of any length, and the model decides
# when to stop by predicting [END].
#
# ## 2. Training on toy sentences

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
hist = [h for h in result.history if "loss" in h]
plt.figure(figsize=(6, 3))
plt.plot([h["step"] for h in hist], [h["loss"] for h in hist], label="train")
plt.plot([h["step"] for h in ev], [h["val_loss"] for h in ev], "o-", label="held out")
plt.xlabel("step")
plt.ylabel("nats per Part B token")
plt.legend()
plt.show()
assert ev[-1]["val_loss"] < np.log(tok.vocab_size) - 1

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
plt.show()
assert rates["grammatical fills"] > rates["grammatical random fills"] + 0.1        # at either budget

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
