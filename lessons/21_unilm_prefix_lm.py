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
# # 21 · UniLM and the prefix LM: one network, four masks
#
# BERT reads a sentence in both directions and cannot generate; GPT generates and reads
# only to the left. UniLM (Dong et al. 2019) notices that the difference is **the
# attention mask**, not the network: one Transformer with one set of weights becomes a
# bidirectional encoder, a left-to-right LM, a right-to-left LM or a sequence-to-sequence
# model depending on which keys each query may see,
#
# $$A_l = \mathrm{softmax}\Big(\frac{Q K^\top}{\sqrt{d_k}} + M\Big) V,\qquad
#   M_{ij} = \begin{cases} 0 & \text{$i$ may attend to $j$}\\ -\infty & \text{otherwise.}\end{cases}$$
#
# Every mode is trained with the same **cloze** task (predict [MASK]ed tokens), so one
# model learns all four at once. The **prefix LM** (T5, Raffel et al. 2020) keeps only the
# sequence-to-sequence mask and makes it an architecture: a decoder whose prefix is read
# fully. This lesson draws the masks, checks that the mask is all that changes, trains
# one UniLM on the 1/3, 1/3, 1/6, 1/6 mix, measures its cloze loss in each mode, decodes
# with a KV cache, and trains a prefix LM. Shapes: `B` batch, `T` time, `C` channels,
# `V` vocabulary.

# %%
import matplotlib.pyplot as plt
import numpy as np

from minipt import lesson_budget as budget
from minipt.core.module import eval_mode
from minipt.models import registry
from minipt.models.unified.prefix_lm import prefix_mask
from minipt.objectives.unified import (
    UNILM_MODES,
    UNILM_WEIGHTS,
    unilm_example,
    unilm_mask,
)
from minipt.recipes import unified as R
from minipt.train import TrainConfig, train

tok = R.tokenizer()
SOS, EOS, MASK = (tok.token_to_id(t) for t in (R.SOS, R.EOS, R.MASK))

# %% [markdown]
# ## 1. The four masks
# A pair of toy sentences in UniLM's layout `[SOS] S [EOS] T [EOS]`: S is a sentence, T a
# new sentence about S's subject (the recipe's pre-training pairs). Segment 0 covers
# `[SOS] S [EOS]`, segment 1 the rest. Black means "may attend".

# %%
source, target = R.reply_pairs(1, seed=7)[0]
n_src, T = len(source) + 2, len(source) + len(target) + 3
words = [R.SOS, *tok.decode(source).split(), R.EOS, *tok.decode(target).split(), R.EOS]
print(" ".join(words))
fig, axes = plt.subplots(1, 4, figsize=(14, 3.8))
for ax, mode in zip(axes, UNILM_MODES):
    m = unilm_mask(mode, T, n_src)
    ax.imshow(m, cmap="Greys", vmin=0, vmax=1)
    ax.set_title(f"{mode} ({m.sum()} of {T * T})")
    ax.set_xticks(range(T), words, rotation=90, fontsize=7)
    ax.set_yticks(range(T), words, fontsize=7)
plt.tight_layout()
plt.show()

m = {mode: unilm_mask(mode, T, n_src) for mode in UNILM_MODES}
assert m["bidirectional"].all()
assert (m["left_to_right"] | m["right_to_left"]).all() and (m["left_to_right"] & m["right_to_left"]).sum() == T
assert m["seq2seq"][:n_src, n_src:].sum() == 0             # the source never sees the target
assert (m["seq2seq"][n_src:, :n_src]).all()                # every target token sees all of the source
assert m["left_to_right"].sum() == T * (T + 1) // 2

# %% [markdown]
# The two one-way masks are triangles that share only the diagonal: together they are
# the bidirectional mask. The seq2seq mask is bidirectional in its top-left block (the
# source reads itself both ways), empty top-right (no source token sees the target) and
# causal bottom-right: a target token sees the source and the target up to itself.
#
# ## 2. One model: the mask is all that changes
# minipt's UniLM (`minipt.models.unified.unilm`) is BERT's encoder and heads
# (`models/encoder/bert.py`) with the mask passed to every layer. Change one token and
# watch which positions' outputs move: exactly those whose row of the mask lets them see
# it (the four masks are transitive, so a deeper stack reaches no further).

# %%
entry = registry.get("unilm")
model = entry.build(rng=np.random.default_rng(0), vocab_size=tok.vocab_size, **entry.presets["toy"].model)
ids = np.concatenate([[SOS], source, [EOS], target, [EOS]])[None]             # (1, T)
seg = (np.arange(T) >= n_src)[None].astype(np.int64)                          # (1, T)
j = n_src + 1                                                                  # the target's second token
other = ids.copy()
other[0, j] = tok.token_to_id("cat") if ids[0, j] != tok.token_to_id("cat") else tok.token_to_id("dog")
reach = {}
with eval_mode(model):
    for mode in UNILM_MODES:
        a = model(ids, seg, mode, src_len=n_src)[1]
        b = model(other, seg, mode, src_len=n_src)[1]
        reach[mode] = np.abs(a - b).max(-1)[0] > 1e-6                          # (T,) whose output moved
        assert np.array_equal(reach[mode], m[mode][:, j])
        print(f"{mode:>14}: positions that see token {j}: {np.flatnonzero(reach[mode]).tolist()}")

# %% [markdown]
# ## 3. Pre-training on the mix
# Each example draws its mode: bidirectional 1/3, seq2seq 1/3, left-to-right 1/6,
# right-to-left 1/6 (`objectives.unified.unilm_mode`), and 15 % of its tokens are masked
# BERT's way (80 % [MASK], 10 % random, 10 % kept); in seq2seq mode only target tokens
# are, the final [EOS] included. Bidirectional rows also get BERT's next-sentence
# prediction: half of them have their T swapped for a random sentence.

# %%
rng = np.random.default_rng(0)
counts = dict.fromkeys(UNILM_MODES, 0)
for _ in range(6000):
    counts[unilm_example([5], [6], rng, sos_id=SOS, eos_id=EOS, mask_id=MASK, vocab_size=tok.vocab_size)["mode"]] += 1
print({k: round(v / 6000, 3) for k, v in counts.items()})
for (k, v), w in zip(counts.items(), UNILM_WEIGHTS):
    assert abs(v / 6000 - w) < 0.02

steps = budget.pick(full=600, quick=300)
p = entry.presets["toy"]
pairs, held = R.reply_pairs(budget.pick(full=4000, quick=800), 0), R.reply_pairs(500, 1000)
result = train(model, lambda split, r: R.unilm_batch(pairs if split == "train" else held, r, p.batch_size, 0.15),
               TrainConfig(**{**p.train, "steps": steps, "warmup": steps // 10, "eval_every": max(steps // 6, 1)},
                           progress=False))
print(f"{model.num_parameters():,} parameters, {steps} steps in {result.seconds:.0f} s, "
      f"final training loss {result.train_loss:.3f}")

# %% [markdown]
# ## 4. Cloze loss in each mode
# The same held-out pairs, the same masked positions, four masks. A bidirectional
# prediction sees both sides of the blank; a one-way prediction sees one side; a
# seq2seq prediction (blanks in the target only) sees the whole source and the target
# to its left.

# %%
by_mode = R.cloze_by_mode(model, held, seed=1)
print(f"{'mode':>14}  cloze loss  accuracy")
for mode, r in by_mode.items():
    print(f"{mode:>14}  {r['loss']:10.3f}  {r['accuracy']:8.3f}")
plt.figure(figsize=(6, 3))
plt.bar(list(by_mode), [r["loss"] for r in by_mode.values()], color=["C0", "C1", "C2", "C3"])
plt.ylabel("held-out cloze loss (nats)")
plt.title(f"one UniLM, four masks ({steps} steps)")
plt.show()
loss = {k: r["loss"] for k, r in by_mode.items()}
assert loss["bidirectional"] < min(loss["left_to_right"], loss["right_to_left"])   # at either budget

# %% [markdown]
# At the full budget the bidirectional cloze loss is 2.01 nats (accuracy 0.44), the
# left-to-right one 2.22 and the right-to-left one 2.27: seeing both sides of a blank
# is worth about a fifth of a nat per masked word on this language. The seq2seq
# loss, 2.10, is measured on target tokens only, each of which sees the whole source
# and the target to its left: between the two.

# %% tags=["checks"]
budget.stated("bidirectional cloze loss", loss["bidirectional"], "2.01")
budget.stated("bidirectional cloze accuracy", by_mode["bidirectional"]["accuracy"], "0.44")
budget.stated("left-to-right cloze loss", loss["left_to_right"], "2.22")
budget.stated("right-to-left cloze loss", loss["right_to_left"], "2.27")
budget.stated("seq2seq cloze loss", loss["seq2seq"], "2.10")
budget.stated("one-way minus bidirectional", loss["left_to_right"] - loss["bidirectional"], "0.20", band=0.05)

# %% [markdown]
# ## 5. Generating with the seq2seq mask and a KV cache
# To generate, UniLM appends a [MASK] after the tokens so far, predicts it, and writes
# the prediction in its place. Under the seq2seq mask a source token never sees the
# target and a target token sees only what is left of it, so keys and values never
# change once computed: a KV cache keeps them, and each step feeds just (the previous
# token, a new [MASK]) and then forgets the [MASK]'s entry. The cached decoder must give
# exactly what re-reading the whole sequence gives. The pre-trained model has seen
# seq2seq pairs whose target is about the source's subject: does its reply keep the
# subject?

# %%
from minipt.data.toy_tasks import sentence, verb_index  # noqa: E402

rng = np.random.default_rng(5)
kept = same = 0
n_sources = budget.pick(full=100, quick=20)
for k in range(n_sources):
    words_, states = sentence(rng)
    src = R.ids(words_)
    kw = dict(sos_id=SOS, eos_id=EOS, mask_id=MASK, max_len=14)
    reply = model.generate(src, **kw)
    same += reply == model.generate(src, **kw, use_cache=False)
    subject = words_[verb_index(states) - 1]
    kept += subject in tok.decode(reply).split()
    if k < 4:
        print(f"{' '.join(words_):<45} -> {tok.decode(reply)}")
print(f"cached == re-read on {same}/{n_sources} sources; the reply names the source's subject in "
      f"{kept}/{n_sources}")
assert same == n_sources

# %% [markdown]
# At the full budget the pre-trained model answers nearly every source with one generic
# reply ("the cat sees the ball ."), the safe, bland output that lesson 12 met in
# dialogue: it names the source's subject in 20 of 100 sources, and 20 of the 100
# sources have "cat" as their subject. Pre-training alone has not taught it to use the
# source; fine-tuning for generation does (section 5b).

# %% tags=["checks"]
rng = np.random.default_rng(5)
cat_sources = 0
for _ in range(n_sources):
    w, s = sentence(rng)
    cat_sources += w[verb_index(s) - 1] == "cat"
budget.stated("replies that keep the subject", kept, "20")
budget.stated("sources whose subject is cat", cat_sources, "20")

# %% [markdown]
# ## 5b. Fine-tuning for generation
# UniLM's recipe for generation: keep the seq2seq mask, mask only target tokens (here
# half of them, the final [EOS] included), and train on a task's pairs. The task is the
# toy translation (`data/toy_text_tasks.translation`: every word mapped to a word of an
# invented language, adjectives moved after their noun). Then decode the test sources
# greedily with the KV cache.

# %%
ft = R.finetune_and_decode(model, p, seed=0, steps=budget.pick(full=400, quick=40))
print(f"toy translation after fine-tuning: exact match {ft['exact match']:.3f}, "
      f"token accuracy {ft['token accuracy']:.3f} on {p.data['task_sizes'][2]} test sentences")
assert ft["token accuracy"] > 0.1

# %% [markdown]
# At the full budget the fine-tuned model gets 0.64 of the target tokens right (at their
# positions) and 3 % of the 200 test translations exactly right, after 400 steps: most
# words are learnt, whole sentences are not yet.

# %% tags=["checks"]
budget.stated("fine-tuned token accuracy", ft["token accuracy"], "0.64")
budget.stated("fine-tuned exact match", ft["exact match"], "0.03")

# %% [markdown]
# ## 6. The prefix LM
# The prefix LM (`minipt.models.unified.prefix_lm`) is GPT-2's decoder with the
# seq2seq mask of a given prefix length $p$: $M_{ij} = 1$ when $j < p$ or $j \le i$.
# Trained as T5 did (a random split of each window, the loss after the split only), it
# is an encoder and a decoder in one stack. With $p = 0$ it is GPT.

# %%
plt.figure(figsize=(3.2, 3.2))
plt.imshow(prefix_mask(5, 1, 12)[0], cmap="Greys")
plt.title("prefix LM mask, p = 5")
plt.show()

pentry = registry.get("prefixlm")
pp = pentry.presets["toy"]
stream, val = R.word_stream(budget.pick(full=100_000, quick=20_000), 0), R.word_stream(10_000, 1000)
plm = pentry.build(rng=np.random.default_rng(0), vocab_size=tok.vocab_size, **pp.model)
psteps = budget.pick(full=600, quick=300)
res = train(plm, lambda split, r: R.prefix_batch(stream if split == "train" else val, r, pp.batch_size, 32),
            TrainConfig(**{**pp.train, "steps": psteps, "warmup": psteps // 10, "eval_every": max(psteps // 6, 1)},
                        progress=False))
idx, targets, plen = R.prefix_batch(val, np.random.default_rng(2), 256, 32)
with eval_mode(plm):
    with_prefix = float(plm(idx, targets, plen)[0])
    left_to_right = float(plm(idx, targets, 0)[0])
print(f"{psteps} steps in {res.seconds:.0f} s; held-out loss after the prefix {with_prefix:.4f} nats/word, "
      f"the same positions read left to right {left_to_right:.4f}")
assert with_prefix < np.log(tok.vocab_size)

# %% [markdown]
# At the full budget the loss after the prefix is 1.78 nats per word, and reading the
# same windows left to right changes it by less than 0.01: in this toy language the next
# word depends on the last few words only, which a causal reading already sees, so a
# bidirectional prefix has little to add. Where the prefix is an input to be understood
# as a whole (a task's question, a sentence to translate), it is worth more; the
# comparison of architectures (lesson 24) measures that on text-to-text tasks.

# %% tags=["checks"]
budget.stated("prefix LM loss", with_prefix, "1.78")
budget.stated("prefix vs left to right", abs(with_prefix - left_to_right), "0.005", band=0.005)
