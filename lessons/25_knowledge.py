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
# # 25 · Knowledge: entity masking against entity fusion
#
# A language model learns facts only as far as its text states them, and a fact it must
# chain ("kamo lives in ritun", "ritun lies in veland", so kamo lives in veland) is
# stated nowhere. Seed 001 ends with two ways of bringing a knowledge graph into
# pre-training:
#
# - **ERNIE (Baidu; Sun et al. 2019)** changes only the masking: whole entity mentions
#   are masked as units, so the model must predict an entity from its context;
# - **ERNIE (Tsinghua; Zhang et al. 2019)** changes the model: entity embeddings learnt
#   from the graph by **TransE** (Bordes et al. 2013) are fused into the token states by
#   *aggregator* layers, and a denoising entity auto-encoder (dEA) trains the fusion.
#
# This lesson builds both on a generated graph with known facts and compares them with
# plain BERT on a task that needs a two-hop fact about people the fine-tuning never saw.
#
# Shapes: `B` batch, `T` tokens, `C` width, `M` entity slots, `K` entity width,
# `E` entities.

# %%
import matplotlib.pyplot as plt
import numpy as np

from minipt import lesson_budget as budget
from minipt.core.gradcheck import check_module
from minipt.data.toy_kb import build_kb, corpus, country_task
from minipt.experiments import knowledge
from minipt.models.knowledge.aggregator import Aggregator
from minipt.models.knowledge.ernie import tiny as tiny_ernie
from minipt.models.knowledge.transe import TransE, corrupt
from minipt.objectives.entity_autoencoder import make_batch, vocabulary

print("budget:", budget.current())

# %% [markdown]
# ## 1. A graph and the sentences that mention it
#
# Persons live in cities, cities lie in countries, and persons know each other. The
# sentences either state one fact or put a person (and maybe a city) into a frame of
# the toy language. Every mention comes with the entity it names.

# %%
kb = build_kb(n_persons=64, n_cities=12, n_countries=4, seed=0)
print(f"{kb.n_entities} entities, {len(kb.triples)} facts, relations {kb.relations}")
for s in corpus(kb, 6, seed=1):
    print(" ".join(s.words), "   mentions:", [(kb.names[e], kb.types[e]) for _, _, e in s.spans])
task = country_task(kb, n_per_person=8, seed=0)
person = task["test"][0][0].spans[0][2]
print("\ncountry task:", " ".join(task["test"][0][0].words), "->",
      kb.names[kb.ids("country")[task["test"][0][1]]],
      f"(via {kb.names[kb.tail(person, 'lives_in')]}: two hops, stated in no single sentence)")
held_out = {s.spans[0][2] for s, _ in task["test"]} & {s.spans[0][2] for s, _ in task["train"]}
assert not held_out, "test persons must never be seen in fine-tuning"

# %% [markdown]
# ## 2. TransE: a fact is a translation
#
# TransE wants e_head + l_relation ≈ e_tail. It minimises a margin ranking loss
# max(0, γ + d(h + r, t) − d(h' + r, t')) against a corrupted fact (head or tail
# replaced at random), and renormalises entity vectors to unit length before each step.
# The gradient is hand-written; here it is checked in float64 and then trained.

# %%
rng = np.random.default_rng(0)
small = TransE(9, 3, dim=4, margin=1.0, norm=1, rng=rng, dtype=np.float64)
pos = np.stack([rng.integers(0, 9, 10), rng.integers(0, 3, 10), rng.integers(0, 9, 10)], 1)
check = check_module(small, pos, corrupt(pos, 9, rng), select=lambda out: out[0])
print(f"TransE gradcheck: worst relative error {check.max_error():.1e}")
assert check.passed

transe = TransE(kb.n_entities, len(kb.relations), dim=16, margin=1.0, norm=1, rng=np.random.default_rng(0))
functional = kb.triples[kb.triples[:, 1] < 2]                     # lives_in, located_in
rank_before = transe.rank_tails(functional).mean()
history = transe.fit(kb.triples, epochs=400, rng=np.random.default_rng(0))
ranks = transe.rank_tails(functional)
print(f"mean rank of the true tail among {kb.n_entities} entities: {rank_before:.1f} before, "
      f"{ranks.mean():.2f} after; hits@1 {np.mean(ranks == 1):.2f}")
assert ranks.mean() < rank_before / 4
budget.stated("TransE hits@1", np.mean(ranks == 1), "0.96")

# %% [markdown]
# The trained vectors put each person next to its city minus the `lives_in` translation,
# so persons of one country cluster: the picture projects the persons' vectors on their
# first two principal components, coloured by country.

# %%
P = transe.params["entity"][kb.ids("person")]
P = P - P.mean(0)
xy = P @ np.linalg.svd(P, full_matrices=False)[2][:2].T
country = [kb.country_of(int(p)) - kb.ids("country")[0] for p in kb.ids("person")]
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
axes[0].plot(history)
axes[0].set(xlabel="epoch", ylabel="margin loss", title="TransE on the toy graph")
axes[1].scatter(xy[:, 0], xy[:, 1], c=country, cmap="tab10", s=25)
axes[1].set(title="persons' TransE vectors (2 principal components), by country")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 3. The aggregator: fusing entities into tokens
#
# An aggregator layer lets tokens attend to tokens and entities attend to entities, then
# mixes them where a token starts an entity's mention:
# h_j = GELU(W̃_t w̃_j + W̃_e ẽ_k + b̃), then w_j = LN(w̃_j + W_t h_j + b_t) and
# e_k = LN(ẽ_k + W_e h_j + b_e). A token with no entity uses the first term only.
# The backward (both streams, the scatter of h back to the entities) is checked in
# float64, and so is the whole ERNIE: BERT layers, two aggregators, the MLM head tied to
# the token embedding, the dEA head and a classifier.

# %%
rng = np.random.default_rng(1)
agg = Aggregator(8, 6, 2, 2, 10, rng=rng, dtype=np.float64)
w, e = rng.normal(size=(2, 5, 8)), rng.normal(size=(2, 3, 6))
positions, entity_mask = np.array([[0, 3, 0], [4, 0, 0]]), np.array([[1, 1, 0], [1, 0, 0]])
w_out, e_out = agg(w, e, positions, entity_mask)
print("tokens", w.shape, "->", w_out.shape, "; entities", e.shape, "->", e_out.shape)
model, batch = tiny_ernie()
whole = check_module(model, *batch, select=lambda out: out[0], max_checks=6)
print(f"whole ERNIE gradcheck: {len(whole.arrays)} parameter arrays, worst relative error {whole.max_error():.1e}")
assert whole.passed

# %% [markdown]
# ## 4. What each model sees in pre-training
#
# One batch, three ways. Token masking picks 15 % of tokens; entity masking picks whole
# entity mentions; dEA masks 15 % of the token-entity alignments (and swaps 5 % for a
# random entity) and asks every aligned token for its entity.

# %%
words = vocabulary(kb)
sents = corpus(kb, 4, seed=7)
for kind in ("token", "entity"):
    b = make_batch(sents, kb, np.random.default_rng(3), masking=kind, dea=False)
    print(f"{kind:>6} masking:", " | ".join(" ".join(words[t] for t in row if words[t] != "[PAD]")
                                          for row in b.ids[:2]))
b = make_batch(sents, kb, np.random.default_rng(3), masking="none", dea=True)
print("dEA targets:", [[kb.names[t] for t in row if t >= 0] for row in b.entity_labels])

# %% [markdown]
# ## 5. The comparison
#
# Three encoders of the same size (one BERT layer, then two more layers: aggregators for
# ERNIE, the same aggregators with their entity input switched off for the two BERTs)
# pre-train for the same number of steps on the same sentences, then fine-tune a [CLS]
# classifier on the country task and answer for the held-out persons.

# %%
result = knowledge.run(budget.pick(full="full", quick="tiny"), progress=False)
rows = {r["model"]: r for r in result["rows"]}
for name, r in rows.items():
    print(f"{name:>22}: test accuracy {r['test accuracy']:.3f} (train {r['train accuracy']:.3f}, "
          f"{r['runs']} runs)")
print(f"chance (the test split's largest country): {result['chance']:.3f}; "
      f"{result['test persons']} held-out persons")
fig, ax = plt.subplots(figsize=(6, 3))
ax.bar(list(rows), [r["test accuracy"] for r in rows.values()], color=["#999", "#69c", "#c63"])
ax.axhline(result["chance"], ls="--", c="k", lw=1, label="chance")
ax.set(ylabel="test accuracy", title="country of a person never seen in fine-tuning")
ax.legend()
plt.show()
assert set(rows) == {"bert", "bert + entity masking", "ernie"}
budget.stated("chance", result["chance"], "0.33", band=0.005)
budget.stated("BERT accuracy", rows["bert"]["test accuracy"], "0.24", band=0.005)
budget.stated("entity-masking accuracy", rows["bert + entity masking"]["test accuracy"], "0.33", band=0.005)
budget.stated("ERNIE accuracy", rows["ernie"]["test accuracy"], "0.33", band=0.005)
if budget.pick(full=True, quick=False):           # the tiny quick run is too short to fit
    assert min(r["train accuracy"] for r in rows.values()) > 0.9

# %% [markdown]
# At the full budget (three seeds) none of the three answers the held-out persons
# better than chance (0.33): ERNIE 0.33, entity masking 0.33, plain BERT 0.24. All three
# fit their training persons (train accuracy above 0.9), so each learns the country of
# each *name* it is fine-tuned on rather than a rule that carries over to new names.
# ERNIE could have read the answer off TransE's vectors, which do carry the chain
# (person ≈ city − lives_in ≈ country − located_in − lives_in; hits@1 0.96 above), but
# a name's own token embedding is the easier route for the classifier, and nothing in
# fine-tuning pushes it onto the entity path. Seed 001 says fused knowledge helps; this
# toy does not show it. What would be worth trying next: dropping the name tokens in
# fine-tuning (so only the entity input identifies the person), or more persons per
# country, so that memorising names stops paying.
