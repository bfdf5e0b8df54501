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
# # 18 · The encoder-decoder: cross-attention, teacher forcing, beam search
#
# The Transformer of Vaswani et al. (2017) was built for translation: an **encoder** reads
# the whole source with bidirectional self-attention, and a **decoder** writes the target
# one token at a time with causal self-attention plus a third sub-layer,
# **cross-attention**, whose queries come from the decoder and whose keys and values are
# the encoder's final output:
#
# $$\mathrm{Cross}(Y, M) = \mathrm{softmax}\!\Big(\frac{(Y W_q)(M W_k)^\top}{\sqrt{D}} + \text{source padding mask}\Big)\, M W_v .$$

# %% [markdown]
# This lesson first writes cross-attention by hand (forward, backward, a gradient check,
# and the same numbers as minipt's `MultiHeadAttention(cross=True)`), then trains
# minipt's encoder-decoder (`minipt.models.seq2seq.transformer`) on the toy translation
# task (an invented language whose adjectives follow their noun), draws where the decoder
# looks in the source, shows what teacher forcing trains, and compares greedy decoding
# with beam search on the self- and cross-attention KV caches.
#
# Shapes: `B` batch, `S` source length, `T` target length, `C` channels, `V` vocabulary,
# `H` heads.

# %%
import matplotlib.pyplot as plt
import numpy as np

from minipt import gradcheck
from minipt import lesson_budget as budget
from minipt.core.gradcheck import check_module
from minipt.core.module import eval_mode
from minipt.data import text_to_text as t2t
from minipt.data.toy_text_tasks import lexicon
from minipt.inference.seq2seq_decoding import beam_search, greedy
from minipt.models.protocol import IGNORE
from minipt.models.seq2seq.transformer import Transformer, TransformerConfig, tiny
from minipt.nn.attention import MultiHeadAttention
from minipt.train import TrainConfig, train

# %% [markdown]
# ## 1. Cross-attention by hand
# Self-attention (lesson 01) takes queries, keys and values from one sequence. Cross-
# attention takes the **queries from the decoder** states $Y$ (B, T, C) and the **keys and
# values from the encoder** output $M$ (B, S, C), each split into $H$ heads of $D = C/H$:
# $Q = Y W_q^\top + b_q$, $[K\,|\,V] = M W_{kv}^\top + b_{kv}$. Scores of padded source
# positions are set to $-\infty$, so no target position reads them. There is no causal
# mask: the whole source is known before the first target word is written.

# %%
def heads(x, H):
    """(B, N, C) -> (B, H, N, D)."""
    B, N, C = x.shape
    return x.reshape(B, N, H, C // H).transpose(0, 2, 1, 3)


def merge(x):
    """(B, H, N, D) -> (B, N, H*D): the heads concatenated."""
    B, H, N, D = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, N, H * D)


def cross_attention_forward(y, memory, real, w, H):
    """y (B, T, C) decoder states; memory (B, S, C) encoder output; real (B, S) True at real
    source tokens; w: q (C, C), bq (C,), kv (2C, C), bkv (2C,), o (C, C), bo (C,)."""
    C = y.shape[-1]
    q = heads(y @ w["q"].T + w["bq"], H)                       # (B, H, T, D) from the decoder
    kv = memory @ w["kv"].T + w["bkv"]                         # (B, S, 2C) from the encoder
    k, v = heads(kv[..., :C], H), heads(kv[..., C:], H)        # (B, H, S, D) each
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(C // H)          # (B, H, T, S)
    s = np.where(real[:, None, None, :], s, -np.inf)           # padding is never read
    p = np.exp(s - s.max(-1, keepdims=True))
    p = p / p.sum(-1, keepdims=True)                           # (B, H, T, S)
    o = merge(p @ v)                                           # (B, T, C)
    return o @ w["o"].T + w["bo"], (y, memory, q, k, v, p, o)  # out (B, T, C)


# %% [markdown]
# The backward is lesson 01's attention backward, with one difference in where the
# gradient goes: $dY$ flows back **only through the queries**, $dM$ **only through the
# keys and values**, and every target position adds its share to $dM$: each encoder
# state is read by every decoder position. Masked scores have $P = 0$, so their
# gradient is zero with no extra rule.

# %%
def cross_attention_backward(dout, cache, w, H):
    """dout (B, T, C) -> dy (B, T, C), dmemory (B, S, C), {name: gradient} of w."""
    y, memory, q, k, v, p, o = cache
    C = dout.shape[-1]
    rows = lambda x: x.reshape(-1, x.shape[-1])                # (B, N, F) -> (B*N, F)
    g = {"o": rows(dout).T @ rows(o), "bo": dout.sum((0, 1))}
    do = heads(dout @ w["o"], H)                               # (B, H, T, D)
    dv = p.transpose(0, 1, 3, 2) @ do                          # (B, H, S, D)
    dp = do @ v.transpose(0, 1, 3, 2)                          # (B, H, T, S)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True)) / np.sqrt(C // H)   # (B, H, T, S)
    dq = merge(ds @ k)                                         # (B, T, C)
    dkv = np.concatenate([merge(ds.transpose(0, 1, 3, 2) @ q), merge(dv)], -1)   # (B, S, 2C)
    g["q"], g["bq"] = rows(dq).T @ rows(y), dq.sum((0, 1))
    g["kv"], g["bkv"] = rows(dkv).T @ rows(memory), dkv.sum((0, 1))
    return dq @ w["q"], dkv @ w["kv"], g                       # dy only via Q; dmemory via K and V


# %% [markdown]
# A float64 check by central differences of every input and weight, with a random
# upstream gradient $G$ ($L = \sum \mathrm{out} \odot G$), on a batch whose second
# source has two padded positions; then the same weights in minipt's
# `MultiHeadAttention(cross=True)` (its `q_proj`, `kv_proj` and `c_proj`), which must give
# the same output and the same gradients.

# %%
rng = np.random.default_rng(0)
B, T, S, C, H = 2, 3, 5, 8, 2
arrays = {"y": rng.standard_normal((B, T, C)), "memory": rng.standard_normal((B, S, C)),
          "q": rng.standard_normal((C, C)) * 0.5, "bq": rng.standard_normal(C) * 0.1,
          "kv": rng.standard_normal((2 * C, C)) * 0.5, "bkv": rng.standard_normal(2 * C) * 0.1,
          "o": rng.standard_normal((C, C)) * 0.5, "bo": rng.standard_normal(C) * 0.1}
real = np.array([[True] * 5, [True, True, True, False, False]])      # (B, S)


def run():
    w = {n: arrays[n] for n in ("q", "bq", "kv", "bkv", "o", "bo")}
    out, cache = cross_attention_forward(arrays["y"], arrays["memory"], real, w, H)

    def backward(G):
        dy, dmemory, g = cross_attention_backward(G, cache, w, H)
        return {"y": dy, "memory": dmemory, **g}
    return out, backward


check = gradcheck(run, arrays)
print(f"by hand, {len(check.arrays)} arrays: max relative error {check.max_error():.1e}")

mha = MultiHeadAttention(C, H, cross=True, rng=rng, dtype=np.float64)
for layer, (wn, bn) in ((mha.q_proj, ("q", "bq")), (mha.kv_proj, ("kv", "bkv")), (mha.c_proj, ("o", "bo"))):
    layer.params["weight"][...], layer.params["bias"][...] = arrays[wn], arrays[bn]
w = {n: arrays[n] for n in ("q", "bq", "kv", "bkv", "o", "bo")}
out, cache = cross_attention_forward(arrays["y"], arrays["memory"], real, w, H)
G = rng.standard_normal(out.shape)
dy, dmemory, g = cross_attention_backward(G, cache, w, H)
lib_out = mha(arrays["y"], arrays["memory"], mask=real[:, None, :])
lib = mha.backward(G)
print(f"minipt's cross-attention: max |difference| of the output {np.abs(out - lib_out).max():.1e}, "
      f"of dY {np.abs(dy - lib.dx).max():.1e}, of dM {np.abs(dmemory - lib.dmemory).max():.1e}")
print("dM at the padded source positions:", np.abs(dmemory[1, 3:]).max())

# %% tags=["checks"]
assert check.passed
np.testing.assert_allclose(out, lib_out, rtol=1e-12, atol=1e-12)
np.testing.assert_allclose(dy, lib.dx, rtol=1e-10, atol=1e-12)
np.testing.assert_allclose(dmemory, lib.dmemory, rtol=1e-10, atol=1e-12)
for layer, (wn, bn) in ((mha.q_proj, ("q", "bq")), (mha.kv_proj, ("kv", "bkv")), (mha.c_proj, ("o", "bo"))):
    np.testing.assert_allclose(g[wn], layer.grads["weight"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g[bn], layer.grads["bias"], rtol=1e-10, atol=1e-12)
assert (dmemory[1, 3:] == 0).all()                                     # padding gets no gradient

# %% [markdown]
# ## 2. The whole model, and its gradient
# `encode(source)` returns the memory $M$ (B, S, C) and which source positions are real;
# `decode(target_in, encoded)` returns logits (B, T, V). Source and target share one
# embedding table here (one vocabulary for both languages), scaled by $\sqrt{C}$, plus the
# fixed sinusoidal positions; the output layer is that same table transposed, so the one
# matrix gets gradient from three places: the source embedding, the target embedding and
# the output layer. A float64 gradient check of the whole model (a tiny one) sees all three.

# %%
model, batch = tiny()
result = check_module(model, *batch, select=lambda out: out[0], max_checks=6)
print(f"{len(result.arrays)} arrays checked, max relative error {result.max_error():.1e}")
shared = next(a for a in result.arrays if a.name == "shared.weight")
print("shared table:", shared.shape, f"error {shared.max_rel_error:.1e}")

# %% tags=["checks"]
assert result.passed

# %% [markdown]
# ## 3. Teacher forcing
# Training feeds the decoder the **gold** target shifted right by one (`target_in` starts
# with `<s>`) and asks it for the next gold token at every position at once
# (`targets` ends with `</s>`). Padding sits right of every real token, so causal
# attention never lets it reach a real position, and its targets are `IGNORE`: it never
# counts in the loss.

# %%
data = t2t.text_to_text(budget.pick(full=(3000, 100, 200), quick=(600, 20, 40)), seed=0, tasks=("translate",))
pairs = data["translate"]
tok = t2t.build_tokenizer(data)
src, tin, tgt = t2t.encode_pairs(tok, pairs["train"][:2], 24, 24)
words = lambda ids: [tok.id_to_token(int(i)) if i != IGNORE else "·" for i in ids]
print(pairs["train"][0]["input"], "->", pairs["train"][0]["target"])
for name, row in (("target_in", tin[1]), ("targets", tgt[1])):
    print(f"{name:>10}:", " ".join(f"{w:>6}" for w in words(row)))

# %% tags=["checks"]
assert tin[1, 0] == tok.token_to_id("<s>") and (tgt[1] == IGNORE).sum() == (tin[1] == 0).sum()

# %% [markdown]
# ## 4. A toy translator
# The toy language maps every word (every *sense* of "bank") to an invented word and moves
# adjectives after their noun: "the old cat" becomes "det cat old". Two layers on each
# side, $C = 48$, trained by teacher forcing on translation pairs only.

# %%
MAX = 24
cfg = TransformerConfig(vocab_size=tok.vocab_size, n_encoder_layers=2, n_decoder_layers=2, n_head=4, d_model=48,
                        max_source_len=MAX, max_target_len=MAX, pad_id=tok.token_to_id("[PAD]"))
translator = Transformer(cfg, rng=np.random.default_rng(0))
mix = {s: t2t.Mixture({"translate": pairs[s]}) for s in ("train", "val")}


def get_batch(split, rng):
    return t2t.encode_pairs(tok, mix[split].sample(32, rng), MAX, MAX)


steps = budget.pick(full=800, quick=60)
run = train(translator, get_batch, TrainConfig(steps=steps, lr=3e-3, min_lr=3e-4, warmup=50, eval_every=steps // 4,
                                               eval_batches=4, grad_clip=1.0, seed=0, progress=False))
start_loss, end_loss = run.history[0]["loss"], run.val_loss
print(f"teacher-forced loss {start_loss:.2f} -> validation {end_loss:.3f} nats/token after {steps} steps")
_, _, train_targets = t2t.encode_pairs(tok, pairs["train"], MAX, MAX)
counts = np.bincount(train_targets[train_targets != IGNORE], minlength=tok.vocab_size)
freq = counts[counts > 0] / counts.sum()
unigram = float(-(freq * np.log(freq)).sum())                  # floor: target words without any context
fig, ax = plt.subplots(figsize=(6, 3.4))
ax.plot([h["step"] for h in run.history], [h["loss"] for h in run.history], lw=0.8, label="train")
ax.plot(*zip(*[(h["step"], h["val_loss"]) for h in run.history if "val_loss" in h]), "o-", ms=4, label="validation")
ax.axhline(unigram, color="k", ls="--", lw=0.8, label=f"floor: target unigram {unigram:.2f}")
ax.set_yscale("log")
ax.set_xlabel("step")
ax.set_ylabel("teacher-forced loss (nats/token, log)")
ax.set_title("the toy translator learns")
ax.legend()
plt.tight_layout()
plt.show()
print(f"the floor, target words without context: {unigram:.2f} nats/token")

# %% [markdown]
# At the full budget the teacher-forced loss falls from 5.07 to 0.001 nats per target
# token on held-out pairs in 800 steps, far below the 3.55 nats of a model that knows
# only how often each target word occurs.

# %% tags=["checks"]
assert end_loss < start_loss - 1                                   # it learns, at either budget
budget.stated("first training loss", start_loss, "5.07")
budget.stated("validation loss", end_loss, "0.001")
budget.stated("target unigram floor", unigram, "3.55")
assert end_loss < unigram

# %% [markdown]
# Teacher forcing scores every position given the **gold** prefix. At test time there is
# no gold prefix: the decoder reads its own earlier guesses, so one mistake can derail
# the rest (*exposure bias*). So the two numbers differ: the fraction of target tokens
# right given the gold prefix, and the fraction of sentences whose greedy translation is
# exactly right.

# %%
test = pairs["test"]
src, tin, tgt = t2t.encode_pairs(tok, test, MAX, MAX)
with eval_mode(translator):
    _, logits = translator(src, tin, tgt)
keep = tgt != IGNORE
token_acc = float((logits.argmax(-1) == tgt)[keep].mean())
start, eos = tok.token_to_id("<s>"), tok.token_to_id("</s>")
greedy_out = [t2t.answer_text(tok, o) for o in greedy(translator, src, start_id=start, eos_id=eos)]
greedy_em = t2t.score("translate", greedy_out, [e["target"] for e in test])
print(f"teacher-forced token accuracy {token_acc:.3f}; greedy exact match {greedy_em:.3f} of {len(test)} sentences")
for e, g in list(zip(test, greedy_out))[:3]:
    print(f"  {e['input'][15:]:<45} -> {g}   (gold: {e['target']})")

# %% [markdown]
# At the full budget 1.000 of the held-out target tokens are right given the gold prefix,
# and 1.000 of the 200 held-out sentences are translated exactly right by greedy
# decoding: on this task there is no gap, because the model is never wrong on the test set.

# %% tags=["checks"]
for what, value, claim in (("teacher-forced token accuracy", token_acc, "1.000"),
                           ("greedy exact match", greedy_em, "1.000")):
    budget.stated(what, value, claim)

# %% [markdown]
# ## 5. Where the decoder looks: cross-attention
# The decoder position that predicts target word $y_t$ should read the source word that
# $y_t$ translates. We record the cross-attention weights (B, H, T, S) of the last decoder
# layer and average the heads, for a sentence with adjectives; the gold alignment
# (from the toy lexicon) is marked with circles.

# %%
def alignment(source_words, target_words):
    """Target position -> the source position of the word it translates (None for '.')."""
    out = []
    inverse = {}
    for (w, _), t in lexicon().items():
        inverse.setdefault(t, set()).add(w)
    for t in target_words:
        cands = [j for j, w in enumerate(source_words) if w in inverse.get(t, ())]
        out.append(cands[0] if len(cands) == 1 else None)
    return out


def cross_weights(model, example):
    s, ti, _ = t2t.encode_pairs(tok, [example], MAX, MAX)
    last = model.decoder.blocks[-1].cross_attn
    last.record = True
    with eval_mode(model):
        model(s, ti)
    last.record = False
    return last.last_weights[0].mean(0)                             # (T, S), heads averaged


example = next(e for e in test if len(e["input"].split()) >= 9 and "old" in e["input"])
w = cross_weights(translator, example)
src_words, tgt_words = tok.decode(tok.encode(example["input"])).split(), example["target"].split() + ["</s>"]
gold = alignment(src_words, tgt_words)
fig, ax = plt.subplots(figsize=(7, 4))
ax.imshow(w, cmap="Blues")
ax.set_xticks(range(len(src_words)), src_words, rotation=60, fontsize=8)
ax.set_yticks(range(len(tgt_words)), tgt_words, fontsize=8)
for t, j in enumerate(gold):
    if j is not None:
        ax.scatter(j, t, s=60, facecolors="none", edgecolors="red")
ax.set_xlabel("source (encoder memory)")
ax.set_ylabel("target word being predicted")
ax.set_title("cross-attention, last decoder layer, heads averaged")
plt.tight_layout()
plt.show()


def aligned_share(model, examples):
    """Of target words with one gold source word: the share whose strongest cross-attention
    (last layer, heads averaged) falls on it."""
    hit = total = 0
    for e in examples:
        weights = cross_weights(model, e)
        sw, tw = tok.decode(tok.encode(e["input"])).split(), e["target"].split()
        for t, j in enumerate(alignment(sw, tw)):
            if j is not None:
                hit += int(np.argmax(weights[t]) == j)
                total += 1
    return hit / total


share = aligned_share(translator, test[:100])
untrained = aligned_share(Transformer(cfg, rng=np.random.default_rng(0)), test[:100])
print(f"strongest cross-attention on the aligned source word: trained {share:.2f}, untrained {untrained:.2f}")

# %% [markdown]
# The red circles sit on the dark cells, adjectives included: the target adjective, which
# comes after its noun, reads the source adjective, which came before it. At the full
# budget the strongest cross-attention falls on the aligned source word for 0.92 of the
# target words of 100 test sentences; for the untrained model, 0.00. Nothing told the
# model the alignment: it learnt it from translating.

# %% tags=["checks"]
budget.stated("aligned share, trained", share, "0.92")
budget.stated("aligned share, untrained", untrained, "0.00")
assert share > untrained

# %% [markdown]
# ## 6. Greedy and beam search, on the KV caches
# Greedy decoding takes the most likely token at every step. Beam search keeps the
# `beam_size` best prefixes by total log-probability and ranks finished ones by
# $\log P / ((5 + n)/6)^{\alpha}$ (GNMT's length penalty, $\alpha = 0.6$, as in the
# paper). Both encode the source once; every step feeds the newest token only, reading
# the earlier tokens' keys and values from the self-attention cache and the encoder
# memory's keys and values, projected once, from the cross-attention cache. The cached
# path gives the same outputs as re-running the decoder over the whole prefix.

# %%
n_cmp = budget.pick(full=200, quick=20)
beam_out, same_cached = [], True
for e in test[:n_cmp]:
    s = np.array(tok.encode(e["input"]))
    b = beam_search(translator, s, start_id=start, eos_id=eos, beam_size=4)
    same_cached &= b == beam_search(translator, s, start_id=start, eos_id=eos, beam_size=4, cache=False)
    beam_out.append(t2t.answer_text(tok, b))
refs = [e["target"] for e in test[:n_cmp]]
beam_em = t2t.score("translate", beam_out, refs)
greedy_em_n = t2t.score("translate", greedy_out[:n_cmp], refs)
differ = sum(a != b for a, b in zip(beam_out, greedy_out[:n_cmp]))
print(f"exact match on {n_cmp} test sentences: greedy {greedy_em_n:.3f}, beam 4 {beam_em:.3f}; "
      f"the two differ on {differ}")

# %% [markdown]
# At the full budget greedy and beam search agree on all 200 test sentences (both 1.000
# exact match): the translator is so sure of every next word that the best continuation
# is always the greedy one.

# %% tags=["checks"]
budget.stated("greedy exact match (first 200)", greedy_em_n, "1.000")
budget.stated("beam exact match", beam_em, "1.000")
budget.stated("sentences where they differ", differ, "0")
assert same_cached

# %% [markdown]
# ## 7. A less certain model: where beam search helps
# A well-trained translator is nearly certain at every step, and then greedy and beam
# agree. Beam search earns its cost when the model hesitates. The same model trained for
# 3/8 of the steps; besides exact match we ask the model itself which output it prefers:
# its length-normalised log-probability of each (the score beam search maximises).

# %%
def normalised_log_prob(model, source, out, alpha=0.6):
    """log P(out </s> | source) / ((5 + n) / 6)^alpha, n counting </s>."""
    ends = [*out, eos]
    with eval_mode(model):
        _, logits = model(source[None], np.array([[start, *ends[:-1]]]))
    z = logits[0] - logits[0].max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))                # (T, V)
    return sum(logp[t, y] for t, y in enumerate(ends)) / ((5 + len(ends)) / 6) ** alpha


early = Transformer(cfg, rng=np.random.default_rng(0))
early_steps = steps * 3 // 8
train(early, get_batch, TrainConfig(steps=early_steps, lr=3e-3, min_lr=3e-4, warmup=min(30, early_steps // 10),
                                    eval_every=0, grad_clip=1.0, seed=0, progress=False))
g_ids, b_ids, better, worse = [], [], 0, 0
for e in test[:n_cmp]:
    s = np.array(tok.encode(e["input"]))
    g = greedy(early, s[None], start_id=start, eos_id=eos)[0]
    b = beam_search(early, s, start_id=start, eos_id=eos, beam_size=4)
    g_ids.append(t2t.answer_text(tok, g))
    b_ids.append(t2t.answer_text(tok, b))
    if b != g:
        gain = normalised_log_prob(early, s, b) - normalised_log_prob(early, s, g)
        better, worse = better + (gain > 1e-9), worse + (gain < -1e-9)
g_em, b_em = t2t.score("translate", g_ids, refs), t2t.score("translate", b_ids, refs)
n_differ = sum(a != b for a, b in zip(g_ids, b_ids))
print(f"after {early_steps} steps: exact match greedy {g_em:.3f}, beam 4 {b_em:.3f}; they differ on {n_differ} "
      f"of {n_cmp}; the model prefers beam's output in {better}, greedy's in {worse}")

# %% [markdown]
# At the full budget, after 300 steps, greedy gets 0.190 of the 200 sentences exactly
# right and beam search 0.190 too. The two differ on 9 sentences, and on every one of the 9
# the model gives beam's output the higher score: the search does what it is meant to,
# finding sequences the model prefers. Whether the model's preference is the right
# translation is the model's business: here the two get the same exact-match score
# (0.190).

# %% tags=["checks"]
budget.stated("early greedy exact match", g_em, "0.190")
budget.stated("early beam exact match", b_em, "0.190")
budget.stated("early outputs that differ", n_differ, "9")
budget.stated("beam preferred", better, "9")
budget.stated("greedy preferred", worse, "0")
assert better >= worse

# %% [markdown]
# ## Summary
# - The encoder-decoder adds cross-attention: decoder queries, encoder keys and values.
# - Teacher forcing trains every target position at once from the gold prefix; padding
#   never counts. Free-running decoding is measured separately, and is harder.
# - Greedy and beam search share one decoder step on the self- and cross-attention KV
#   caches; beam width 1 is greedy.

# %% [markdown]
# ## Exercises
# 1. Change the encoder state at a padded source position (the second example's last two)
#    of section 1's `memory`: does the cross-attention output change? What is $dM$ there?
# 2. Run `cross_attention_forward` on the first two decoder positions alone and compare
#    with the first two rows of the full output. Why does the decoder's self-attention
#    need a causal mask while cross-attention does not?
# 3. Decode the first 20 test sentences with the less certain model of section 7 under a
#    length penalty of 0 and of 2 instead of 0.6: how many outputs change, and are they
#    longer or shorter?

# %% [markdown]
# ## Solutions
# **1.** The padded scores are $-\infty$, so their weights are exactly 0: the output is
# bit-for-bit the same, and the gradient reaching those memory rows is exactly zero.

# %%
w = {n: arrays[n] for n in ("q", "bq", "kv", "bkv", "o", "bo")}
changed = arrays["memory"].copy()
changed[1, 3:] += 100.0
out_changed, _ = cross_attention_forward(arrays["y"], changed, real, w, H)
print("output changed by:", np.abs(out_changed - out).max(), "| dM at the padding:", np.abs(dmemory[1, 3:]).max())

# %% tags=["checks"]
assert np.array_equal(out_changed, out) and not dmemory[1, 3:].any()

# %% [markdown]
# **2.** Each query row reads the whole memory and nothing from the other queries, so the
# rows are independent; the encoder's output is complete before decoding starts, so no
# future information can leak through it. Self-attention over the target reads the other
# target positions, the future ones included, and needs the causal mask.

# %%
first_two, _ = cross_attention_forward(arrays["y"][:, :2], arrays["memory"], real, w, H)
print("largest difference from the full output's first two rows:", np.abs(first_two - out[:, :2]).max())

# %% tags=["checks"]
np.testing.assert_allclose(first_two, out[:, :2], rtol=1e-12, atol=1e-12)

# %% [markdown]
# **3.** A penalty of 0 ranks finished beams by total log-probability, which favours
# shorter outputs; a penalty of 2 divides by a steeply growing length term and favours
# longer ones.

# %%
lengths = {}
for alpha in (0.0, 0.6, 2.0):
    outs = [beam_search(early, np.array(tok.encode(e["input"])), start_id=start, eos_id=eos, beam_size=4,
                        length_penalty=alpha) for e in test[:20]]
    lengths[alpha] = outs
for alpha in (0.0, 2.0):
    n_changed = sum(a != b for a, b in zip(lengths[alpha], lengths[0.6]))
    longer = sum(len(a) > len(b) for a, b in zip(lengths[alpha], lengths[0.6]))
    print(f"length penalty {alpha}: {n_changed} of 20 outputs change, {longer} of them longer than at 0.6")
