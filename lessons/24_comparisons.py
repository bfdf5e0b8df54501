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
# # 24 · Comparisons: architectures, objectives, four-stage transfer
#
# Three studies the earlier lessons point to, each run over three seeds at toy scale and
# judged by the claims ledger (`minipt experiment claims`), one rule for every claim:
#
# 1. **Architectures** at equal compute (Raffel et al. 2020, T5, Sec. 3.2, Table 2):
#    encoder-decoder, the same with encoder and decoder parameters shared, decoder-only
#    LM, prefix LM; each pre-trained with its natural objective, then fine-tuned.
# 2. **Objectives** at equal compute with one encoder-decoder (T5, Sec. 3.3): none, prefix
#    LM, BERT-style denoising, i.i.d. corruption at 15 %, span corruption (mean span 3).
# 3. **Four-stage transfer** (Gururangan et al. 2020): general, domain- and task-adaptive
#    pre-training, then fine-tuning; and what adapting costs the general domain.

# %% [markdown]
# Nothing is trained here: the lesson reads the committed full-budget runs. Every arm
# that pre-trains gets the same pre-training steps and batch, and every arm the same
# fine-tuning steps on its own fresh schedule.

# %%
import matplotlib.pyplot as plt
import numpy as np

from minipt.experiments import ledger
from minipt.experiments.claims import NOT_RUN

ROWS = ledger.rows()
RECORDS = {name: ledger.load(name) for name in ("architectures", "objectives", "transfer")}


def per_seed(name, metric):
    """{arm: per-seed values (n_seeds,)} and {floor: per-seed values} of a committed run."""
    runs = RECORDS[name]["runs"]
    arms = {a: np.array([r["arms"][a][metric] for r in runs]) for a in runs[0]["arms"]}
    floors = {f: np.array([r["floors"][f] for r in runs]) for f in runs[0]["floors"]}
    return arms, floors


def bars(ax, values, floor, floor_name, ylabel, title):
    """Mean over seeds with the standard deviation as error bars, the floor as a dashed line."""
    names = list(values)
    means = [values[a].mean() for a in names]
    sds = [values[a].std(ddof=1) for a in names]
    ax.bar(range(len(names)), means, yerr=sds, capsize=4, color="tab:blue", alpha=0.8, label="mean ± sd, 3 seeds")
    for i, a in enumerate(names):
        ax.plot([i] * len(values[a]), values[a], "k.", ms=4)
    ax.axhline(floor.mean(), color="tab:red", ls="--", label=f"{floor_name} ({floor.mean():.3f})")
    ax.set_xticks(range(len(names)), names, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)


def task_means(name, tasks=("translate", "summarize", "sentiment", "similarity")):
    """Each arm's score on each task, the mean over seeds."""
    runs = RECORDS[name]["runs"]
    print("mean over seeds:")
    for a in runs[0]["arms"]:
        print(f"  {a:24s} " + "  ".join(f"{t} {np.mean([r['arms'][a][t] for r in runs]):.3f}" for t in tasks))


def verdicts(experiment):
    for r in ROWS:
        if r["experiment"] == experiment:
            print(f"{r['says']}\n  -> {r['verdict']}: {r['why']}\n")

# %% [markdown]
# ## 1. Architectures
# Each model reads the four toy text-to-text tasks (translate, summarize, sentiment,
# similarity) and is scored by exact match of its greedy answers on 200 held-out pairs
# per task; the metric is the mean over the tasks. The floor is the score of always
# giving each task's commonest training answer (0 on translation and summaries). The dots
# are the three seeds.

# %%
arch, arch_floor = per_seed("architectures", "score")
fig, ax = plt.subplots(figsize=(7, 3.4))
bars(ax, arch, arch_floor["commonest answer"], "commonest answer", "held-out score (mean of 4 tasks)",
     "architectures at equal compute")
plt.tight_layout()
task_means("architectures")

# %% [markdown]
# Read the per-task lines before the verdicts. At this budget (400 pre-training and 1000
# fine-tuning steps) the encoder-decoder translates and summarises most test sentences,
# while the decoder-only and prefix LMs, one stack for input and output, have not got
# there yet; sentiment is learnt by all. The ledger's verdicts on T5's architecture claims:

# %%
verdicts("architectures")

# %% [markdown]
# ## 2. Objectives
# One encoder-decoder (2 + 2 blocks), the same initialisation, the same pre-training steps
# for every objective, then the same fine-tuning; "no pre-training" gets only the
# fine-tuning. On the right, what each objective costs the decoder: the mean target
# length per pre-training example, `</s>` included, against reconstructing the whole
# 40-token piece.

# %%
obj, obj_floor = per_seed("objectives", "score")
length, length_floor = per_seed("objectives", "target length")
length = {a: v for a, v in length.items() if a != "no pre-training"}
fig, axes = plt.subplots(1, 2, figsize=(12, 3.6))
bars(axes[0], obj, obj_floor["commonest answer"], "commonest answer", "held-out score (mean of 4 tasks)",
     "objectives at equal compute")
bars(axes[1], length, length_floor["whole piece"], "whole piece + </s>", "target tokens per example",
     "the decoder's cost per pre-training example")
plt.tight_layout()

# %%
task_means("objectives")

# %% [markdown]
# Compare the per-task lines: sentiment is learnt by every arm, and the arms part on
# translation and summaries, the tasks whose answers are whole sentences. BERT-style
# pre-training, whose decoder writes the whole piece, is ahead of no pre-training there;
# span corruption, whose decoder writes only short sentinel targets, is behind it, most of
# all on one seed (the dots). The ledger's verdicts:

# %%
verdicts("objectives")

# %% [markdown]
# ## 3. Four-stage transfer
# A GPT-1 with 2 blocks; the court domain has its own topics and word frequencies. Left:
# test accuracy of a sentiment classifier fine-tuned on a few labelled court sentences
# (floor: the majority class). Right: the loss on the **general** domain after the
# pre-training stages (floor: a unigram model; lower is better).

# %%
acc, acc_floor = per_seed("transfer", "accuracy")
gen, gen_floor = per_seed("transfer", "general loss")
fig, axes = plt.subplots(1, 2, figsize=(12, 3.6))
bars(axes[0], acc, acc_floor["majority class"], "majority class", "test accuracy", "court-domain sentiment")
bars(axes[1], gen, gen_floor["unigram"], "unigram", "general-domain loss (nats/word)", "forgetting the general domain")
plt.tight_layout()

# %%
verdicts("transfer")

# %% [markdown]
# ## What to take away
# The ledger counts, for these three studies, each verdict; the list below is generated
# from its rows. "Not reproduced" means the difference lay within the seeds' noise (or
# the test items' own), "not testable at this scale" that an arm was not clear of its
# floor; the reasons are in the rows above.

# %%
mine = [r for r in ROWS if r["experiment"] in RECORDS]
for verdict in ("reproduced", "not reproduced", "reversed", "not testable at this scale"):
    says = [r["says"] for r in mine if r["verdict"] == verdict]
    print(f"{verdict} ({len(says)}):" + "".join(f"\n  - {s}" for s in says))

# %% tags=["checks"]
assert all(RECORDS[n]["budget"] == "full" and len(RECORDS[n]["runs"]) == 3 for n in RECORDS)
for name, metric, floor in (("architectures", "score", "commonest answer"), ("objectives", "score", "commonest answer")):
    values, floors = per_seed(name, metric)
    assert all(v.mean() > floors[floor].mean() for v in values.values()), f"{name}: an arm on its floor"
assert all(r["verdict"] != NOT_RUN for r in mine)
assert length["spans, mean 3"].mean() < length["i.i.d. 15 %"].mean() < length["BERT-style"].mean()

# %% [markdown]
# ## Exercises
# 1. From the committed objectives run, compute by hand the paired advantage of "spans,
#    mean 3" over "no pre-training" (per seed, then the mean and its standard error) and
#    compare it with the ledger's row.
# 2. The ledger never lets the standard error fall below the test items' own noise. For
#    a claim scored on 800 test pairs, how large is that noise if the two arms disagree on
#    10 % of the pairs?
# 3. Which arm of the architectures study is closest to its floor, and by how many
#    standard errors of its margin over the three seeds?

# %% [markdown]
# ## Solutions

# %%
# 1. Per-seed differences, their mean and standard error; the ledger's advantage agrees.
a, b = obj["spans, mean 3"], obj["no pre-training"]
d = a - b
row = next(r for r in ROWS if r["claim"] == "t5-pretraining")
print("per seed", np.round(d, 3), " mean", round(float(d.mean()), 4), " SE", round(float(d.std(ddof=1) / np.sqrt(3)), 4))
print("ledger: advantage", round(row["advantage"]["mean"], 4), " (its SE is never below the test items' noise)")

# %%
# 2. Differences are +-1 on 10 % of 800 pairs, 0 elsewhere: sd = sqrt(0.1) (mean near 0).
print("paired SE on one seed ~", round(float(np.sqrt(0.1) / np.sqrt(800)), 4),
      "; over 3 seeds ~", round(float(np.sqrt(0.1) / np.sqrt(800) / np.sqrt(3)), 4))

# %%
# 3. Margin over the floor per seed, and how many standard errors it is.
for a, v in arch.items():
    m = v - arch_floor["commonest answer"]
    print(f"{a:24s} margin {m.mean():+.3f}, {m.mean() / (m.std(ddof=1) / np.sqrt(3)):.1f} SE")
