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
# # 03 · One sentence, every pre-training objective
#
# GPT, BERT, T5, BART, UniLM, XLNet and GLM differ less in their layers than in what
# they do to a batch before the model sees it: which tokens are hidden, what is
# predicted, and which positions may attend to which. Every objective in
# `minipt.objectives` is a pure function of token ids and a random generator. This lesson
# sends one sentence through all of them (like Table 3 of the T5 paper) and draws the
# attention masks that turn one Transformer into each model.

# %%

import matplotlib.pyplot as plt
import numpy as np

from minipt.objectives import IGNORE, mask_tokens, span_corruption
from minipt.objectives.bart_noise import (
    document_rotation,
    sentence_permutation,
    text_infilling,
    token_deletion,
    token_masking,
)
from minipt.objectives.electra import discriminator_inputs, generator_inputs
from minipt.objectives.permutation import glm_blank_infilling, permutation_lm
from minipt.objectives.sentence_pairs import sentence_order_prediction
from minipt.objectives.unified import mass, prefix_lm, unilm_example

specials = ["[PAD]", "[CLS]", "[SEP]", "[MASK]", "[SOS]", "[EOS]", "[START]", "[END]"] + \
           [f"<X{k}>" for k in range(8)]
words = "the old fox sees a fish near the river . the fish swims away .".split()
vocab = specials + sorted(set(words))
ID = {w: i for i, w in enumerate(vocab)}
S = lambda name: ID[name]
sentence = np.array([ID[w] for w in words])
show = lambda ids: " ".join("_" if i == IGNORE else vocab[i] for i in ids)
rng = np.random.default_rng(3)
V = len(vocab)
ORDINARY = np.arange(len(specials), V)
print(show(sentence))

# %% [markdown]
# ## 1. Input → target, objective by objective

# %%
rows = []
x, y = sentence[:-1], sentence[1:]
rows.append(("causal LM (GPT)", show(x), show(y)))
inp, tgt = mask_tokens(sentence, rng, mask_id=S("[MASK]"), vocab_size=V, special_ids=range(len(specials)),
                       mask_prob=0.3, random_ids=ORDINARY)
rows.append(("MLM 80/10/10 (BERT)", show(inp), show(tgt)))
inp, tgt = span_corruption(sentence, rng, [S(f"<X{k}>") for k in range(8)])
rows.append(("span corruption (T5)", show(inp), show(tgt)))
rows.append(("token masking (BART)", show(token_masking(sentence, rng, S("[MASK]"), 0.3)), "the original"))
rows.append(("token deletion (BART)", show(token_deletion(sentence, rng, 0.3)), "the original"))
rows.append(("text infilling (BART)", show(text_infilling(sentence, rng, S("[MASK]"))), "the original"))
rows.append(("sentence permutation (BART)", show(sentence_permutation(sentence, rng, S("."))), "the original"))
rows.append(("document rotation (BART)", show(document_rotation(sentence, rng)), "the original"))
enc, dec, frag, _ = mass(sentence, rng, S("[MASK]"))
rows.append(("MASS", show(enc), f"decoder in: {show(dec)} | out: {show(frag)}"))
x, y, prefix_mask = prefix_lm(sentence, rng, min_prefix=4)
rows.append(("prefix LM (T5)", show(x), show(y)))
g_in, g_tgt = generator_inputs(sentence[None], rng, mask_id=S("[MASK]"), vocab_size=V, special_ids=range(len(specials)))
samples = np.where(g_tgt != IGNORE, rng.choice(ORDINARY, g_tgt.shape), sentence[None])
d_in, labels = discriminator_inputs(sentence[None], g_tgt, samples)
rows.append(("replaced token detection (ELECTRA)", show(d_in[0]), "".join(map(str, labels[0]))))
docs = [[sentence[:10], sentence[10:]]]
pair, segs, label = sentence_order_prediction(docs, rng, S("[CLS]"), S("[SEP]"))
rows.append(("sentence order (ALBERT SOP)", show(pair), f"label {label} (1 = in order)"))
for name, a, b in rows:
    print(f"{name:<36} {a}\n{'':<36} -> {b}\n")

# %% [markdown]
# ## 2. BERT's rates, measured
# 15 % of the ordinary tokens are chosen; of those 80 % become `[MASK]`, 10 % a random
# token, 10 % stay. Over 4000 sentences (60,000 tokens, about 9,000 chosen) the counts agree
# within two percentage points (a standard error is about half of one).

# %%
batch = np.tile(sentence, (4000, 1))
inp, tgt = mask_tokens(batch, np.random.default_rng(0), mask_id=S("[MASK]"), vocab_size=V,
                       special_ids=range(len(specials)), random_ids=ORDINARY)
chosen = tgt != IGNORE
masked, unchanged = (inp[chosen] == S("[MASK]")).mean(), (inp[chosen] == batch[chosen]).mean()
print(f"chosen {chosen.mean():.4f} (0.15) of {batch.size:,} tokens; of those [MASK] {masked:.3f} (0.8), "
      f"unchanged {unchanged:.3f} (0.1 + 0.1/{len(ORDINARY)})")

# %% tags=["checks"]
assert abs(chosen.mean() - 0.15) < 0.005 and abs(masked - 0.8) < 0.02
assert abs(unchanged - (0.1 + 0.1 / len(ORDINARY))) < 0.02

# %% [markdown]
# ## 3. One Transformer, many models: the masks
# Rows are queries, columns keys; yellow = may attend. UniLM trains one network under
# all four of its masks; XLNet's two streams and GLM's two parts are masks too.

# %%
uni = {}
while len(uni) < 4:
    ex = unilm_example(sentence[:5], sentence[5:9], rng, sos_id=S("[SOS]"), eos_id=S("[EOS]"),
                       mask_id=S("[MASK]"), vocab_size=V, special_ids=range(len(specials)))
    uni.setdefault(ex["mode"], ex["mask"])
xl = permutation_lm(sentence[:10], np.random.default_rng(1))
glm = glm_blank_infilling(sentence, np.random.default_rng(2), mask_id=S("[MASK]"), start_id=S("[START]"),
                          end_id=S("[END]"))
panels = [("prefix LM", prefix_mask)] + [(f"UniLM {k}", m) for k, m in uni.items()] + \
         [("XLNet content", xl["content_mask"]), ("XLNet query", xl["query_mask"]), ("GLM", glm["mask"])]
fig, axes = plt.subplots(2, 4, figsize=(12, 6))
for ax, (title, m) in zip(axes.ravel(), panels):
    im = ax.imshow(m, cmap="viridis", vmin=0, vmax=1)
    ax.set_title(title, fontsize=9); ax.set_xticks([]); ax.set_yticks([])
    ax.set_xlabel("key position", fontsize=8); ax.set_ylabel("query position", fontsize=8)
fig.colorbar(im, ax=axes, ticks=[0, 1], shrink=0.6, label="1: the query may attend to the key")
fig.suptitle("the attention masks of the objectives")
plt.show()

# %% [markdown]
# **Summary.** Causal LM predicts every next token; MLM predicts 15 % of tokens from both
# sides; T5 and BART corrupt spans and reconstruct them with a decoder; UniLM, the prefix
# LM, XLNet and GLM reuse one stack and change only the mask. SpanBERT and ERNIE mask
# whole units; ELECTRA learns from every token by spotting replacements.

# %% [markdown]
# ## Exercises
# 1. Why does BERT keep 10 % of the chosen tokens unchanged? Measure the three shares on
#    a long sequence with `mask_tokens`.
# 2. In the XLNet panels, why may a query not see its own position?
# 3. Count how many target tokens T5's span corruption produces per input token at 15 %
#    noise and mean span 3.
#
# ## Solutions

# %%
# 1. At fine-tuning time there is no [MASK]: if the model only ever predicted at [MASK], it
#    would learn nothing about real tokens' own vectors. Keeping 10 % unchanged (and 10 %
#    random) makes every input token a possible target. The shares of the chosen tokens:
long = np.tile(sentence, 500)
inp_l, tgt_l = mask_tokens(long, np.random.default_rng(0), mask_id=S("[MASK]"), vocab_size=V,
                           special_ids=range(len(specials)), random_ids=ORDINARY)
chosen = tgt_l != IGNORE
print(f"chosen {chosen.mean():.3f}: [MASK] {np.mean(inp_l[chosen] == S('[MASK]')):.2f}, "
      f"unchanged {np.mean(inp_l[chosen] == long[chosen]):.2f}, other {np.mean((inp_l[chosen] != long[chosen]) & (inp_l[chosen] != S('[MASK]'))):.2f}")

# %%
# 2. The query stream predicts the token at its own position: seeing its content would give
#    the answer away. It sees only its position (and the tokens before it in the order).
print("diagonal of the XLNet query mask:", np.diag(xl["query_mask"]).astype(int))

# %%
# 3. Noise 0.15 L in spans of 3 gives 0.05 L spans: the target is 0.15 L tokens + 0.05 L
#    sentinels (+1 at the end), about 0.2 per input token; the input shrinks to 0.9 L.
ids_long = np.arange(len(specials), len(specials) + 1000) % V
enc, dec = span_corruption(ids_long, np.random.default_rng(0), list(range(200)))
print(f"per input token: target {len(dec) / len(ids_long):.3f}, encoder input {len(enc) / len(ids_long):.3f}")
