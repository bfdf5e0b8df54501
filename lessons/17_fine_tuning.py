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
# # 17 · Fine-tuning BERT: four heads, frozen or not, and what to mask
#
# A pre-trained BERT (lesson 15) is a function from `[CLS] A [SEP] B [SEP]` to one vector
# per token. Devlin et al. (2019, section 4 and figure 4) put **one small layer** on it
# per kind of task and train everything together:
#
# | task | input | head | loss |
# |---|---|---|---|
# | one sentence (SST-2) | `[CLS] A [SEP]` | dense on the pooled `[CLS]` | CE over K classes |
# | sentence pair (MNLI) | `[CLS] A [SEP] B [SEP]` | the same | CE over K classes |
# | tagging (CoNLL NER) | `[CLS] A [SEP]` | dense on every token | CE per word (its first piece) |
# | span QA (SQuAD) | `[CLS] question [SEP] context [SEP]` | start vector S, end vector E | (CE(start) + CE(end)) / 2 |
#
# The alternative is **feature-based** transfer (ELMo's recipe, BERT section 5.3): freeze
# the encoder and train only the head on its features. This lesson builds the four heads
# (`minipt/nn/task_heads.py`, `minipt/models/encoder/finetune.py`), checks their
# gradients, then measures on toy tasks (i) fine-tuned against frozen against no
# pre-training at all, and (ii) four ways of choosing what BERT masks during pre-training.
# Shapes: `B` batch, `T` tokens, `C` channels, `K` classes.

# %%
import matplotlib.pyplot as plt
import numpy as np

from minipt import lesson_budget as budget
from minipt.data import toy_tasks
from minipt.data.encoder_corpus import encoder_corpus
from minipt.experiments import fine_tuning, masking
from minipt.models import registry
from minipt.models.encoder.bert import TINY
from minipt.models.encoder.finetune import tiny_task_batch
from minipt.tasks.bert_inputs import encode_example
from minipt.train import TrainConfig, train

# %% [markdown]
# ## 1. The toy tasks in BERT's format
# The tasks come from the toy language with known answers (`minipt/data/toy_tasks.py`):
# sentiment (the polarity of the adjectives), entailment (the hypothesis drops the
# premise's modifiers, or also swaps a content word), tagging (each word's class from the
# generator's own state) and span QA ("who sees his round ball ?" over a short story;
# the answer is a subject noun phrase). `tasks/bert_inputs.py` writes them as BERT reads
# them, with the WordPiece vocabulary that pre-training uses (`data/encoder_corpus.py`).
# A tag sits on the **first piece** of its word; an answer runs from the first piece of
# its first word to the last piece of its last word. The stories never ask anything, so
# the vocabulary has no "?" (it becomes `[UNK]`) and spells "who" in pieces: the
# questions are new to the pre-trained model.

# %%
corpus = encoder_corpus(n_docs=1000, seed=0, mode="nsp", max_length=fine_tuning.MAX_LENGTH, batch_size=32,
                        n_instances={"train": 200, "val": 50})
tok = corpus.tok
examples = {"sentiment": toy_tasks.sentiment((1, 0, 0), seed=2).train[0],
            "entailment": toy_tasks.entailment((1, 0, 0), seed=1).train[0],
            "tagging": toy_tasks.tagging((1, 0, 0), seed=0).train[0],
            "span_qa": toy_tasks.span_qa((1, 0, 0), seed=0, n_sentences=(2, 2)).train[0]}
for kind, ex in examples.items():
    x = encode_example(kind, ex, tok, 64)
    pieces = [tok.id_to_token(i) for i in x["ids"]]
    print(f"{kind:>10}: {' '.join(pieces)}")
    print(f"{'segments':>10}: {''.join(map(str, x['segments']))}")
    if kind == "tagging":
        print(f"{'tags':>10}: " + " ".join(f"{p}/{toy_tasks.TAG_SET[t]}" for p, t in zip(pieces, x["tags"]) if t >= 0))
    if kind == "span_qa":
        answer = " ".join(pieces[x["start"]:x["end"] + 1])
        print(f"{'answer':>10}: {answer!r} at tokens {x['start']}..{x['end']}")
        assert answer.replace(" ##", "") == ex["answer"]
    print()

# %% [markdown]
# ## 2. The heads, and their gradients through the whole model
# Every head is registered (`bert-classify`, `bert-tag`, `bert-qa`), so `minipt gradcheck`
# and the protocol test check them like every other model: float64, a random upstream
# gradient, fourth-order central differences, every parameter of encoder and head.
#
# One detail of span QA: the softmax runs over **positions**, so anything that adds the
# same amount to every position's score cannot change the loss. The bias of the start/end
# layer does exactly that, and so does the bias of the encoder's last LayerNorm (it adds
# one vector to every h_t, hence S · β to every start score). Their true gradient is 0;
# the backward gives 0 to round-off, and the check confirms it instead of dividing noise
# by noise (`ModelEntry.invariant`).

# %%
for name in ("bert-classify", "bert-tag", "bert-qa"):
    entry = registry.get(name)
    (case,) = entry.all_gradchecks()
    result = case.run()
    print(f"{name:>13}: worst relative error {result.max_error():.1e} over {len(result.arrays)} arrays "
          f"({entry.objective})")
    assert result.passed

m, batch = registry.get("bert-qa").tiny()
m.zero_grad()
m(*batch)
m.backward()
for n in registry.get("bert-qa").invariant:
    print(f"   {n}: |grad| max {np.abs(m.gradients()[n]).max():.0e}")
    assert np.abs(m.gradients()[n]).max() < 1e-14

# %% [markdown]
# ## 3. Freezing
# `freeze_encoder=True` stops the backward at the head, runs the encoder without dropout
# (fixed features) and keeps its weights out of AdamW's decay, so a zero gradient gives a
# zero step: the encoder leaves training **bit for bit** as it came in.

# %%
frozen = registry.get("bert-classify").build(rng=np.random.default_rng(0), freeze_encoder=True, n_classes=3, **TINY)
before = frozen.state_dict()
batch = tiny_task_batch("bert-classify")
train(frozen, lambda split, rng: batch, TrainConfig(steps=20, lr=1e-2, warmup=0, weight_decay=0.1, eval_every=0,
                                                     progress=False))
after = frozen.state_dict()
moved = [k for k in before if not np.array_equal(before[k], after[k])]
n_head = sum(v.size for k, v in before.items() if k.startswith("head."))
print(f"parameters that moved: {moved}")
print(f"trainable: {n_head} of {sum(v.size for v in before.values())} (the head)")
assert moved and all(k.startswith("head.") for k in moved)

# %% [markdown]
# ## 4. Fine-tuned, frozen, or not pre-trained at all
# `minipt experiment fine-tuning` pre-trains one BERT (2 layers, C = 64, MLM + NSP on the
# toy stories), then trains each task for the same steps with the same learning rate in
# four settings: pre-trained and fine-tuned, pre-trained and frozen, and the same two
# from a random start (the last is a head on random features: what the head alone can
# do). Each task has only a small labelled training set. Scores are test accuracy (exact
# match of the span for QA).

# %%
ft = fine_tuning.run(budget.pick(full="quick", quick="tiny"), progress=False)
tasks = list(fine_tuning.TASKS)
print(f"{'setting':<30}" + "".join(f"{t:>12}" for t in tasks))
for row in ft["rows"]:
    print(f"{row['setting']:<30}" + "".join(f"{row[t]:>12.3f}" for t in tasks))
print(f"{'majority class':<30}" + "".join(f"{ft['majority'][t]:>12.3f}" for t in tasks))
print(f"\npre-training: {ft['pretrain steps']} steps, MLM accuracy on held-out stories {ft['mlm accuracy']:.2f}")
acc = {r["setting"]: r for r in ft["rows"]}

# the recipe saved its loss plot through the Agg backend: back to figures in the notebook
# %matplotlib inline
fig, ax = plt.subplots(figsize=(8, 3.4))
w = 0.2
for i, row in enumerate(ft["rows"]):
    ax.bar(np.arange(len(tasks)) + i * w, [row[t] for t in tasks], w, label=row["setting"])
ax.scatter(np.arange(len(tasks)) + 1.5 * w, [ft["majority"][t] for t in tasks], marker="_", s=400, color="k",
           label="majority class", zorder=3)
ax.set_xticks(np.arange(len(tasks)) + 1.5 * w, tasks)
ax.set_ylabel("test accuracy")
ax.legend(fontsize=7, loc="lower right")
plt.tight_layout()
plt.show()

# %% [markdown]
# What came out (one seed; 128 labelled training examples per task, 150 steps, 200 test
# examples):
#
# - **Span QA is where pre-training shows.** Fine-tuning the pre-trained BERT finds
#   the exact answer span 0.510 of the time, against 0.355 for the same model trained
#   from scratch. Frozen pre-trained features reach 0.395: better than training from
#   scratch, and well above a head on random features (0.285).
# - **Feature-based transfer works, but not as well.** Frozen pre-trained features
#   always beat frozen random ones (sentiment 0.660 against 0.535, tagging 0.846
#   against 0.741), yet they stay far below fine-tuning, which is near perfect on both
#   (sentiment 0.990, tagging 0.995). BERT's paper finds the two close on NER (table 7);
#   at this scale, with only the last layer and a linear head, the gap is wide.
# - **Sentiment and tagging are too easy to need pre-training.** A polarity word or a
#   word's identity decides them, and 128 examples teach that from scratch (1.000 and
#   0.986).
# - **Entailment is not learned by anyone** in 150 steps: every setting stays at or below
#   the majority class (0.545). Spotting one swapped word between premise and hypothesis
#   needs more data or steps than this budget gives.
#
# The pre-trained model itself restores 0.43 of held-out masked tokens (the
# most-frequent-token baseline gets 0.11); its NSP accuracy, 0.49, is chance: on these
# stories, in 1000 steps, NSP was not learned, so whatever transferred came from MLM.

# %% tags=["checks"]
PT, FR, SC, RF = "pre-trained, fine-tuned", "pre-trained, frozen", "no pre-training, fine-tuned", \
    "no pre-training, frozen"
budget.stated("span QA, pre-trained fine-tuned", acc[PT]["span_qa"], "0.510")
budget.stated("span QA, no pre-training", acc[SC]["span_qa"], "0.355")
budget.stated("span QA, pre-trained frozen", acc[FR]["span_qa"], "0.395")
budget.stated("span QA, random frozen", acc[RF]["span_qa"], "0.285")
budget.stated("sentiment, pre-trained frozen", acc[FR]["sentiment"], "0.660")
budget.stated("sentiment, random frozen", acc[RF]["sentiment"], "0.535")
budget.stated("tagging, pre-trained frozen", acc[FR]["tagging"], "0.846")
budget.stated("tagging, random frozen", acc[RF]["tagging"], "0.741")
budget.stated("sentiment, pre-trained fine-tuned", acc[PT]["sentiment"], "0.990")
budget.stated("tagging, pre-trained fine-tuned", acc[PT]["tagging"], "0.995")
budget.stated("sentiment, no pre-training", acc[SC]["sentiment"], "1.000")
budget.stated("tagging, no pre-training", acc[SC]["tagging"], "0.986")
budget.stated("entailment majority", ft["majority"]["entailment"], "0.545")
budget.stated("MLM accuracy", ft["mlm accuracy"], "0.43")
budget.stated("MLM baseline", ft["mlm baseline"], "0.11")
budget.stated("NSP accuracy", ft["nsp accuracy"], "0.49")
if budget.is_full():
    assert all(acc[s]["entailment"] <= ft["majority"]["entailment"] for s in acc)
    assert all(acc[FR][t] > acc[RF][t] for t in tasks if t != "entailment")
    assert all(acc[PT][t] > acc[FR][t] for t in tasks)

# %% [markdown]
# ## 5. What to mask: tokens, whole words, spans or phrases
# BERT masks single tokens; its later release masks **whole words**; SpanBERT (Joshi et
# al. 2020) masks contiguous **spans** of geometric length; Baidu's ERNIE (Sun et al.
# 2019) masks **phrases and entities**. The seeds claim that spans help span selection.
# `minipt experiment masking` pre-trains four BERTs that differ only in the units
# (`objectives/span_masking.py`): the same stories, steps and rate (15 % of the tokens of
# each batch, 80/10/10 per unit). Here is one batch row under each:

# %%
row_rng = 5
for scheme in masking.SCHEMES:
    ids, _, _, targets, _ = masking.SchemeBatches(corpus, scheme).get_batch("train", np.random.default_rng(row_rng))
    shown = [("_" * len(tok.id_to_token(i)) if t >= 0 else tok.id_to_token(i)) for i, t in zip(ids[0], targets[0])
             if tok.id_to_token(i) != "[PAD]"]
    print(f"{scheme:>10}: {' '.join(shown)}")

# %% [markdown]
# Then each is fine-tuned on span QA (whose answers are noun phrases: "the old king") and
# scored by exact match; the MLM accuracy is measured the same way for all four (token
# masking on held-out stories).

# %%
mk = masking.run(budget.pick(full="quick", quick="tiny"), progress=False)
for row in mk["rows"]:
    print(f"{row['masking']:>10}: span QA exact match {row['span QA exact match']:.3f}   "
          f"MLM accuracy {row['MLM accuracy']:.3f}")
em = {r["masking"]: r["span QA exact match"] for r in mk["rows"]}
mlm = {r["masking"]: r["MLM accuracy"] for r in mk["rows"]}
budget.stated("span QA, span masking", em["span"], "0.585")
budget.stated("span QA, token masking", em["token"], "0.515")
budget.stated("span QA, phrase masking", em["phrase"], "0.510")
budget.stated("span QA, whole-word masking", em["whole word"], "0.490")
budget.stated("MLM accuracy, token masking", mlm["token"], "0.403")
budget.stated("MLM accuracy, span masking", mlm["span"], "0.357")
if budget.is_full():
    assert max(em, key=em.get) == "span" and max(mlm, key=mlm.get) == "token"

# the recipe saved its loss plot through the Agg backend: back to figures in the notebook
# %matplotlib inline
fig, axes = plt.subplots(1, 2, figsize=(8, 3))
for ax, values, title in zip(axes, (em, mlm), ("span QA exact match", "MLM accuracy (token masking)")):
    ax.bar(list(values), list(values.values()), color=["gray", "tab:blue", "tab:orange", "tab:green"])
    ax.set_title(title, fontsize=10)
    ax.tick_params(axis="x", labelsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# What came out (one seed, 600 pre-training steps each, 150 fine-tuning steps, 400
# labelled QA examples, 200 test ones):
#
# - **On this seed, spans did best on span QA**: 0.585 exact match, against 0.515 for
#   token masking, 0.510 for phrases and 0.490 for whole words: the direction SpanBERT
#   reports. But with one seed and 200 test questions (a standard error near 0.035) this
#   is not settled, and it did not hold up: two more seeds, run separately with
#   `minipt experiment masking --seed 1` and `--seed 2`, put token masking first on one
#   and phrase masking first on the other, and averaged over the three seeds span and
#   token masking come out level, with whole words last. At this scale the claim that
#   spans help is **not reproduced**; the seed-to-seed spread is larger than the gaps
#   between schemes.
# - **Masked-token accuracy tells the opposite story**: token masking restores 0.403 of
#   held-out single masked tokens, spans 0.357. Predicting a token whose neighbours are
#   visible is the easier problem token masking trains for; what spans train (recovering
#   a phrase from its context) is what span selection uses.

# %% [markdown]
# ## What is left out
# - Learning-rate search: BERT picks the best of {5e-5, 3e-5, 2e-5} per task on the dev
#   set; here every setting gets the same rate, so the race is fair but untuned.
# - SQuAD's document stride (long contexts cut into overlapping windows) and "no answer"
#   (SQuAD 2.0 scores a null span at `[CLS]`): toy contexts fit in one window and always
#   hold the answer.
# - The feature-based variant of BERT's table 7 concatenates the last four layers and
#   feeds a BiLSTM; here the head reads the last layer directly.
# - One seed at toy scale: differences of a few points are within the noise of a rerun.
