# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 11 · Tasks posed as text: GPT-2 zero-shot, GPT-3 in context
#
# GPT-1 (lesson 10) pre-trains, then fine-tunes a head per task. GPT-2 (Radford et al.
# 2019) drops the second stage. A task is a conditional distribution
# $p(\text{output} \mid \text{input})$; a system that does many tasks models
# $p(\text{output} \mid \text{input}, \text{task})$, and with text the task can be given *as
# text*: `english sentence = french sentence`, `document Q: question A: answer`.

# %% [markdown]
# A language model trained on text in which such lines occur naturally has been trained
# on the task, so it can answer a prompt that ends where the answer should begin:
#
# $$\hat y = \arg\max_y \; p_\theta(y \mid \text{``}x\ \texttt{=}\text{''}), \qquad
#   p_\theta(y \mid c) = \prod_t p_\theta(y_t \mid c, y_{<t}),$$
#
# with $\theta$ the pre-trained weights and no gradient step: **zero-shot**.

# %% [markdown]
# GPT-3 (Brown et al. 2020) puts $K$ solved examples in front of the query,
#
# $$\hat y = \arg\max_y \; p_\theta(y \mid x_1 \Rightarrow y_1,\ \dots,\ x_K \Rightarrow y_K,\ x \Rightarrow),$$
#
# and calls it zero-, one- or few-shot for $K = 0$, $1$, $K > 1$. $\theta$ is still frozen:
# whatever is learned from the examples is learned in the forward pass (**in-context
# learning**), and it gets better with $K$ and with model size. GPT-3 is GPT-2 with
# layers alternating dense and locally banded sparse attention (`GPTConfig.gpt3`).

# %% [markdown]
# Both claims are measured here at toy scale, on word-level models of the toy language
# (`minipt.data.toy_prompts`). Every query sentence is held out of pre-training.
# Shapes: `N` prompts, `B` batch, `T` time, `V` vocabulary.

# %%
import matplotlib.pyplot as plt
import numpy as np

from minipt import lesson_budget as budget
from minipt.data import toy_prompts as P
from minipt.data.batching import TokenStream
from minipt.data.toy_text_tasks import translate
from minipt.experiments import ledger
from minipt.inference.scoring import greedy_answer, one_token_answers
from minipt.models.decoder.gpt import GPT, GPTConfig
from minipt.tasks.metrics import accuracy, word_accuracy
from minipt.tokenizers.special import ENDOFTEXT
from minipt.train import TrainConfig, train

SEED = 0
tok = P.prompt_tokenizer()
PAD, EOT, NL = (tok.token_to_id(t) for t in ("[PAD]", ENDOFTEXT, P.NEWLINE))

# %% [markdown]
# ## 1. A toy web with tasks inside it
# WebText was not built for any task, but some of its pages hold translations and
# question-answer pairs. The toy web has three kinds of documents: plain toy text;
# documents in which each sentence is followed by `= its translation` into the toy
# target language (`toy_text_tasks.translate`: word by word, adjectives after their
# noun, "bank" by the river and "bank" of money translated apart); and quiz documents in
# which each sentence is followed by `Q: question A: answer`, the question asking for
# the subject (`who sees ?`), the object (`sees what ?`) or the place (`sees where ?`),
# the answer one word. The sentences we test on are drawn first and excluded from the web.

# %%
test_sents = P.heldout_sentences(300, seed=SEED + 100)
held_out = P.exclusion(test_sents)
web = P.web_documents(2500, seed=SEED, exclude=held_out)
for kind, doc in zip(("plain", "translation", "quiz"), (next(d for d in web if P.NEWLINE not in d),
                                                       next(d for d in web if f" {P.EQUALS} " in d),
                                                       next(d for d in web if " Q : " in d))):
    print(f"-- {kind}\n{doc[:160]}")
web_val = P.web_documents(200, seed=SEED + 1, exclude=held_out)
web_stream = TokenStream(tok.encode_array(P.join_documents(web)), tok.encode_array(P.join_documents(web_val)),
                         block_size=64, batch_size=16)
print(f"\n{len(web_stream.splits['train']):,} training tokens; vocabulary {tok.vocab_size}")

# %% [markdown]
# ## 2. Pre-train a word-level GPT-2 on it
# Two layers, d 64, the plain language-model loss on every token, 1000 steps at the full
# budget (`MINIPT_LESSON_BUDGET`, see `lessons/README.md`), 600 at the quick one; the
# numbers quoted below are the full run's. Nothing tells the model which lines are tasks.

# %%
gpt2_cfg = GPTConfig.gpt2(vocab_size=tok.vocab_size, block_size=64, n_layer=2, n_head=4, d_model=64)
gpt2 = GPT(gpt2_cfg, rng=np.random.default_rng(SEED))
run = train(gpt2, web_stream.get_batch, TrainConfig(steps=(n := budget.pick(full=1000, quick=600)), lr=6e-3,
                                                   min_lr=6e-4, warmup=n // 10, eval_every=n // 4,
                                                   eval_batches=5, seed=SEED, progress=False))
print(f"validation loss {run.val_loss:.3f} nats/token ({run.seconds:.0f} s)")

plt.figure(figsize=(5, 3))
plt.plot([h["step"] for h in run.history], [h["loss"] for h in run.history], lw=0.7, label="train")
plt.plot(*zip(*[(h["step"], h["val_loss"]) for h in run.history if h.get("val_loss") is not None]), "o-",
         label="validation")
plt.xlabel("step"); plt.ylabel("nats / token"); plt.title("GPT-2 pre-training on the toy web"); plt.legend()
plt.show()

# %% [markdown]
# ## 3. Zero-shot translation: the prompt is the sentence and `=`
# Greedy decoding until the newline. We count exact translations and the share of
# words in the right place. Two controls: the same architecture before pre-training, and
# the trained model prompted with `=>`, a marker the web never used.

# %%
def translate_zero_shot(model, marker: str, sents) -> tuple[float, float, list[str]]:
    outs = [tok.decode(greedy_answer(model, tok.encode(P.translation_prompt(w, marker)), {NL, EOT}, 16)).split()
            for w, _ in sents]
    refs = [translate(w, s) for w, s in sents]
    return accuracy([" ".join(o) for o in outs], [" ".join(r) for r in refs]), \
        float(np.mean([word_accuracy(o, r) for o, r in zip(outs, refs)])), [" ".join(o) for o in outs]


mt_sents = test_sents[:100]
untrained = GPT(gpt2_cfg, rng=np.random.default_rng(SEED + 1))
zero_shot = {"trained, `=`": translate_zero_shot(gpt2, P.EQUALS, mt_sents),
             "untrained, `=`": translate_zero_shot(untrained, P.EQUALS, mt_sents),
             "trained, `=>` (never seen)": translate_zero_shot(gpt2, "=>", mt_sents)}
for name, (exact, words, outs) in zero_shot.items():
    print(f"{name:<28} exact {exact:.2f}  words in place {words:.2f}   e.g. {outs[0]!r}")
w, s = mt_sents[0]
print(f"\nsource {P.text(w)!r}\nright  {' '.join(translate(w, s))!r}")

# %% [markdown]
# ## 4. Zero-shot questions: `sentence Q: question A:`
# 40 held-out sentences per question type; the answer is one word. A model that ignored
# the question and always named the subject would score 1/3 on this balanced set.

# %%
qa = P.qa_queries(test_sents[100:], n_per_type=40)
qa_out = {wh: [] for wh in P.QUESTION_TYPES}
for wh, prompt, answer, _ in qa:
    said = tok.decode(greedy_answer(gpt2, tok.encode(prompt), {NL, EOT}, 4))
    qa_out[wh].append(said == answer)
qa_acc = float(np.mean(sum(qa_out.values(), [])))
blind = accuracy([subj for *_, subj in qa], [answer for _, _, answer, _ in qa])
untrained_qa = accuracy([tok.decode(greedy_answer(untrained, tok.encode(p), {NL, EOT}, 4)) for _, p, _, _ in qa],
                        [a for _, _, a, _ in qa])
print(qa[1][1].replace(P.NEWLINE, "/"), "->", tok.decode(greedy_answer(gpt2, tok.encode(qa[1][1]), {NL, EOT}, 4)))
print(f"accuracy {qa_acc:.2f} (" + ", ".join(f"{wh} {np.mean(v):.2f}" for wh, v in qa_out.items())
      + f"); always the subject {blind:.2f}; untrained {untrained_qa:.2f}")

# %% [markdown]
# The trained model translates held-out sentences it has never seen translated, and
# answers questions by their type, from the format alone. The controls say where this
# comes from: the untrained network does nothing of the kind, and a marker absent from
# the web does not trigger translation. The web taught the task; the prompt selects it.
# The question types are not learned equally fast: *who* is answered almost always,
# *where* least reliably, and *where* is the type that moves most from seed to seed. At
# the full budget: translation 0.95 of the words in place and 0.82 exact (untrained
# 0.00, unseen marker 0.02); questions 0.97 (who 1.00, where 0.90; always the subject 0.33).
# At the quick budget translation has begun and the questions may not have: it asserts
# translation at smaller margins, and the questions only at the full budget.

# %% tags=["checks"]
margin = budget.pick(full=1.0, quick=0.5)             # the quick run asserts the same order, at half the margins
assert zero_shot["trained, `=`"][1] > 0.6 * margin
assert zero_shot["trained, `=`"][1] > zero_shot["untrained, `=`"][1] + 0.5 * margin
assert zero_shot["trained, `=`"][1] > zero_shot["trained, `=>` (never seen)"][1] + 0.4 * margin
if budget.is_full():                                   # questions come later than translation (see above)
    assert qa_acc > blind + 0.25 and qa_acc > untrained_qa + 0.5
who, where = np.mean(qa_out["who"]), np.mean(qa_out["where"])
for what, value, claim in (("words in place", zero_shot["trained, `=`"][1], "0.95"),
                           ("exact translations", zero_shot["trained, `=`"][0], "0.82"),
                           ("untrained, words in place", zero_shot["untrained, `=`"][1], "0.00"),
                           ("unseen marker, words in place", zero_shot["trained, `=>` (never seen)"][1], "0.02"),
                           ("question accuracy", qa_acc, "0.97"), ("who", who, "1.00"), ("where", where, "0.90"),
                           ("always the subject", blind, "0.33")):
    budget.stated(what, value, claim)
if budget.is_full():
    assert who > 0.9 and where == min(np.mean(v) for v in qa_out.values())

# %% [markdown]
# ## 5. GPT-3: a family of tasks, never named
# Now the pre-training mixture holds lists of solved examples, `sentence => answer`, one
# per line, all of one task drawn from a family of four: the **subject** noun, the
# **verb**, the **last** word, or the subject's **kind** (animal, person, royal). The task
# is never named: a reader has to infer it from the examples. Some examples fit two
# tasks: in `the cat sleeps . => sleeps` the last word is the verb. Test queries are
# held-out sentences on which the four tasks disagree (`telling`), so the right answer
# needs the right task.

# %%
icl_queries = P.heldout_sentences(100, seed=SEED + 200, max_words=7, keep=P.telling)
icl_held_out = P.exclusion(icl_queries)
icl_docs = P.icl_documents(4000, seed=SEED + 2, exclude=icl_held_out)
icl_stream = TokenStream(tok.encode_array(P.join_documents(icl_docs)),
                         tok.encode_array(P.join_documents(P.icl_documents(200, seed=SEED + 3, exclude=icl_held_out))),
                         block_size=84, batch_size=8)
print(icl_docs[0])
prompts, answers = P.few_shot_prompts("last", icl_queries[:1], k=2, seed=0, exclude=icl_held_out, max_words=6)
print(f"a two-shot prompt:\n{prompts[0]}   (answer: {answers[0]})")
longest = max(len(tok.encode(p)) for task in P.TASKS
              for p in P.few_shot_prompts(task, icl_queries, 8, seed=0, exclude=icl_held_out, max_words=6)[0])
print(f"the longest eight-shot prompt of one draw: {longest} tokens")

# %% tags=["checks"]
assert longest <= 81 <= 84

# %% [markdown]
# ## 6. Three sizes of GPT-3
# `GPTConfig.gpt3`: layer 0 attends densely, layer 1 only to a causal band of the last
# `block_size // 8` = 10 tokens (84 // 8), as GPT-3 alternates dense and locally banded sparse
# layers. The band covers the query line; the examples further back are reached through
# the dense layer. The longest prompt (eight examples of at most 6 words, a query of at
# most 7) is at most 81 tokens, within the context of 84. Widths d 16, 48 and 96, the
# same data and 1000 steps each (600 at the quick budget).

# %%
models, histories = {}, {}
for d in (16, 48, 96):
    cfg = GPTConfig.gpt3(vocab_size=tok.vocab_size, block_size=84, n_layer=2, n_head=4, d_model=d)
    models[d] = GPT(cfg, rng=np.random.default_rng(SEED + d))
    r = train(models[d], icl_stream.get_batch, TrainConfig(steps=(n := budget.pick(full=1000, quick=600)), lr=6e-3,
                                                         min_lr=6e-4, warmup=n // 10, eval_every=n, eval_batches=5,
                                                         seed=SEED, progress=False))
    histories[d] = r.history
    print(f"d {d}: {models[d].num_parameters():,} parameters, sparse window {cfg.sparse_window}, "
          f"validation loss {r.val_loss:.3f} ({r.seconds:.0f} s)")

plt.figure(figsize=(5, 3))
for d, hist in histories.items():
    line, = plt.plot([h["step"] for h in hist], [h["loss"] for h in hist], lw=0.7, label=f"d {d}, train")
    plt.plot(*zip(*[(h["step"], h["val_loss"]) for h in hist if h.get("val_loss") is not None]), "o",
             color=line.get_color(), label=f"d {d}, validation")
plt.xlabel("step"); plt.ylabel("nats / token"); plt.title("GPT-3 pre-training on lists of examples")
plt.legend(fontsize=8); plt.show()

# %% [markdown]
# ## 7. Accuracy against K, with no gradient step
# For K = 0, 1, 2, 4, 8 and each task, 100 prompts: K examples on fresh sentences, then a
# held-out query. Every answer is one token, so one forward per batch of prompts gives
# both scores (`minipt.inference.scoring`): **greedy**, the argmax over the whole vocabulary
# (exact match), and **choice**, the argmax over the answers some task of the family
# could give (the query's words and the three kinds), as GPT-3 scores multiple-choice
# tasks. Choice measures whether the model inferred the task; greedy also needs it to
# copy the right word out of the query.

# %%
KS = (0, 1, 2, 4, 8)
cands = [P.candidates(w) for w, _ in icl_queries]
results = {}                            # (d, K) -> {"greedy" | "choice": {task: accuracy}}
for k in KS:
    for t, task in enumerate(P.TASKS):
        prompts, answers = P.few_shot_prompts(task, icl_queries, k, seed=SEED * 100 + 10 * t + k,
                                              exclude=icl_held_out, max_words=6)
        for d, model in models.items():
            greedy, chosen = one_token_answers(model, tok, prompts, cands, PAD)
            res = results.setdefault((d, k), {"greedy": {}, "choice": {}})
            res["greedy"][task], res["choice"][task] = accuracy(greedy, answers), accuracy(chosen, answers)
mean = {key: {m: float(np.mean(list(v[m].values()))) for m in v} for key, v in results.items()}

print(f"{'':>6}" + "".join(f"{'K=' + str(k):>12}" for k in KS) + "    (choice / greedy)")
for d in models:
    print(f"d {d:<3} " + "".join(f"{mean[d, k]['choice']:>6.2f}/{mean[d, k]['greedy']:.2f}" for k in KS))
print("\nchoice by task, K = " + " ".join(map(str, KS)))
for d in models:
    print(f"d {d:<3} " + "; ".join(f"{task} " + " ".join(f"{results[d, k]['choice'][task]:.2f}" for k in KS)
                                  for task in P.TASKS))

fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), sharey=True)
for ax, metric in zip(axes, ("choice", "greedy")):
    for d in models:
        ax.plot(KS, [mean[d, k][metric] for k in KS], "o-", label=f"d {d} ({models[d].num_parameters() // 1000}k)")
    ax.axhline(1 / len(P.TASKS), color="grey", ls=":", lw=1)
    ax.set_xscale("symlog", linthresh=1); ax.set_xlim(-0.3, 9); ax.set_xticks(KS); ax.set_xticklabels(KS)
    ax.set_xlabel("examples in the prompt, K"); ax.set_title(f"{metric} (grey: chance)")
axes[0].set_ylabel("accuracy (held-out queries)"); axes[0].legend()
fig.suptitle("In-context accuracy against K and width (one seed)"); plt.tight_layout(); plt.show()

# %% [markdown]
# The shape of GPT-3's few-shot curves: near the chance of guessing the task with no
# example (the grey line is one task in four), a jump with the first example, then a
# slower rise as more examples rule out the tasks that also fit the first one. Look at
# **last** in the per-task rows: one example of a sentence that ends with its verb
# cannot tell it from **verb**, and it gains the most from more examples.

# %% [markdown]
# The rise after K = 1 is smaller for the wider models (0.06 and 0.07 at the full budget,
# against 0.20 for d 16, which needs the examples most; one model and seed, 100 queries
# per task). Width helps in both ways: the wider models infer the task more often
# (choice) and copy the answer out of the query far more often (greedy); d 16 never
# learns the **kind** task in this budget (it stays below 0.4, where one kind in three is
# chance). Only what held over four seeds, with margins, is asserted.

# %%
def over_k(d, metric, ks=KS[1:]):        # mean accuracy over K >= 1
    return float(np.mean([mean[d, k][metric] for k in ks]))


rise = {d: mean[d, 8]["choice"] - mean[d, 1]["choice"] for d in models}
rise_last = {d: results[d, 8]["choice"]["last"] - results[d, 1]["choice"]["last"] for d in models}
print("choice, K=8 minus K=1: " + ", ".join(f"d {d} {rise[d]:+.2f} (last {rise_last[d]:+.2f})" for d in models))
print("over K >= 1, choice / greedy: " + ", ".join(f"d {d} {over_k(d, 'choice'):.2f} / {over_k(d, 'greedy'):.2f}"
                                                   for d in models))

# %% tags=["checks"]
assert all(m.config.sparse_window == 10 for m in models.values())
for d in models:
    assert mean[d, 8]["choice"] > mean[d, 0]["choice"] + 0.4 * margin
assert np.mean(list(rise.values())) > 0.02 * margin and np.mean(list(rise_last.values())) > 0.1 * margin
assert over_k(96, "choice") > over_k(16, "choice") + 0.08 * margin
assert over_k(16, "greedy") + 0.03 * margin < over_k(48, "greedy")
assert over_k(48, "greedy") + 0.03 * margin < over_k(96, "greedy")
if budget.is_full():
    assert rise[16] > max(rise[48], rise[96])
    for d, claim in ((16, "0.20"), (48, "0.06"), (96, "0.07")):
        budget.stated(f"choice rise from K = 1 to 8, d {d}", rise[d], claim)
    assert max(results[16, k]["choice"]["kind"] for k in KS) < 0.4          # three kinds: chance is 1/3

# %% [markdown]
# ## 8. The same claims over three seeds: the claims ledger
# The claims ledger runs this experiment (choice accuracy, averaged over the four tasks)
# over three seeds. Its rows, in its own words, and each arm's mean with the spread over
# seeds:

# %%
rows = [r for r in ledger.rows() if r["experiment"] == "in-context"]
record = ledger.load("in-context")
for r in rows:
    print(f"{r['paper']}: {r['says']}\n   verdict: {r['verdict']}. {r['why']}")
seed_acc = lambda arm: np.array([run["arms"][arm]["accuracy"] for run in record["runs"]])

fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), sharey=True)
by_k = [seed_acc(f"K = {k}") for k in KS]
axes[0].errorbar(KS, [a.mean() for a in by_k], yerr=[a.std(ddof=1) for a in by_k], fmt="o-", capsize=4)
axes[0].set_xscale("symlog", linthresh=1); axes[0].set_xticks(KS); axes[0].set_xticklabels(KS)
axes[0].set_xlabel("examples in the prompt, K (widest model)"); axes[0].set_ylabel("choice accuracy")
widths = (16, 48, 96)
by_d = [seed_acc(f"d {d}, K = 8") for d in widths]
axes[1].errorbar(widths, [a.mean() for a in by_d], yerr=[a.std(ddof=1) for a in by_d], fmt="o-", capsize=4)
axes[1].set_xlabel("model width d (K = 8)")
for ax in axes:
    ax.axhline(0.25, color="grey", ls=":", label="chance")
    ax.legend(fontsize=8)
fig.suptitle(f"The ledger's in-context claims, {len(record['runs'])} seeds (mean ± sd)")
plt.tight_layout(); plt.show()

# %% tags=["checks"]
assert {r["claim"]: r["verdict"] for r in rows} == {"gpt3-k": "reproduced", "gpt3-width": "reproduced"}

# %% [markdown]
# **Summary.** Pose a task as text the model has seen, and the pre-trained model does it
# with no gradient step (GPT-2); put examples of a task in front of the query, and the
# model infers which task from them, better with more examples and with more width
# (GPT-3). Both abilities come from the pre-training text, whose documents happened to
# contain the tasks.
#

# %% [markdown]
# ## Exercises
# 1. How many tokens does a K-shot prompt take, for K up to 12? Which K no longer fits
#    the context of 84 tokens?
# 2. Give the widest model eight examples of one task and score its answers against the
#    answers of each of the four tasks. Does it follow the examples, or has it a favourite
#    task?

# %% [markdown]
# ## Solutions
# **1.** Each example line adds its sentence, `=>`, the answer and a newline; the longest
# prompt of one draw grows by about nine tokens per example.

# %%
for k in (1, 2, 4, 8, 10, 12):
    prompts, _ = P.few_shot_prompts("verb", icl_queries, k, seed=1, exclude=icl_held_out, max_words=6)
    n = max(len(tok.encode(p)) for p in prompts)
    print(f"K = {k:>2}: longest prompt {n:>3} tokens{'  (does not fit in 84)' if n > 84 else ''}")

# %% [markdown]
# **2.** Rows: the task the examples show; columns: the task whose answers we score
# against. The queries are the same held-out sentences, on which the four tasks disagree.

# %%
truth = {task: P.few_shot_prompts(task, icl_queries, 0, seed=0, exclude=icl_held_out, max_words=6)[1]
         for task in P.TASKS}
follow = np.zeros((len(P.TASKS), len(P.TASKS)))
for a, shown in enumerate(P.TASKS):
    prompts, _ = P.few_shot_prompts(shown, icl_queries, 8, seed=7, exclude=icl_held_out, max_words=6)
    _, chosen = one_token_answers(models[96], tok, prompts, cands, PAD)
    follow[a] = [accuracy(chosen, truth[task]) for task in P.TASKS]
fig, ax = plt.subplots(figsize=(4.6, 3.6))
im = ax.imshow(follow, cmap="Blues", vmin=0, vmax=1)
ax.set_xticks(range(4), P.TASKS); ax.set_yticks(range(4), P.TASKS)
ax.set_xlabel("task scored against"); ax.set_ylabel("task of the eight examples")
ax.set_title("d 96, K = 8: whose answers it gives")
fig.colorbar(im, ax=ax, label="share of answers")
plt.show()

# %% [markdown]
# The model follows the examples (the diagonal). Where it errs, on **last**, it mostly
# gives the verb: on many example sentences the two tasks agree.
