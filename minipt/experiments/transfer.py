"""Four-stage transfer (seed 001; Gururangan et al. 2020, "Don't Stop Pretraining"):
general pre-training -> domain-adaptive pre-training -> task-adaptive pre-training ->
fine-tuning, each stage switched on or off, and what the later stages cost the first.

On the toy language (``general``) and its ``court`` domain (``data/toy_domains.py``:
royal topics, reversed word frequencies), one small GPT-1 (``models/decoder``) goes
through the stages it is given, all as causal language modelling:

- general: text of the toy language;
- domain: text of the court domain;
- task: the task's own sentences with their labels dropped (a pool of unlabelled
  court-domain sentiment sentences, as TAPT uses the task's unlabelled data);

then it is fine-tuned (GPT-1's classifier on the extract token, with the auxiliary LM
loss) on a *few* labelled court-domain sentiment examples, and tested on held-out
ones. Reported per variant: test accuracy, and the general-domain validation loss
(nats/word) after the pre-training stages: its rise over the ``general`` variant is
catastrophic forgetting.

Fairness: every stage is one ``train`` call with its own ``TrainConfig``, so each stage
runs on a fresh warm-up and cosine schedule with fresh Adam moments (the rule of
``protocol.py``, one phase per call), and every variant gets the same fine-tuning (steps,
schedule, head initialisation, labelled examples). Variants that share a prefix of
stages share its training (a copy of the network after "general" starts both "general +
domain" and "general + task"), which is the same computation done once. Floors: the
test split's majority class for accuracy, and a unigram model of the general training
text (add-one) for the general loss.
"""
from __future__ import annotations

import copy

import numpy as np

from ..data import toy_tasks
from ..data.batching import TokenStream
from ..data.toy_domains import domain_language
from ..data.toy_words import toy_word_stream, word_tokenizer, words_to_text
from ..models.decoder.gpt import GPT, GPTConfig
from ..models.decoder.gpt1_finetune import GPT1Finetune, split_accuracy
from ..tasks.gpt1_inputs import TaskBatches
from ..train import TrainConfig, evaluate, train

VARIANTS = {
    "fine-tuning only": (),
    "general": ("general",),
    "general + domain": ("general", "domain"),
    "general + task": ("general", "task"),
    "general + domain + task": ("general", "domain", "task"),
}
BUDGETS = {"tiny": dict(stage=20, finetune=10, labelled=16),            # for tests
           "quick": dict(stage=400, finetune=150, labelled=24),
           "full": dict(stage=1000, finetune=200, labelled=24)}
BLOCK, BATCH = 32, 16


def _lm(model: GPT, stream: TokenStream, steps: int, seed: int, progress: bool) -> None:
    config = TrainConfig(steps=steps, lr=3e-3, min_lr=3e-4, warmup=steps // 10, weight_decay=0.01,
                         eval_every=0, seed=seed, progress=progress)
    train(model, stream.get_batch, config)


def unigram_loss(train_ids: np.ndarray, val_ids: np.ndarray, vocab_size: int) -> float:
    """Nats per token of an add-one unigram model of ``train_ids`` on ``val_ids``."""
    counts = np.bincount(train_ids, minlength=vocab_size) + 1.0
    return float(-np.log(counts[val_ids] / counts.sum()).mean())


def run(budget: str = "quick", *, seed: int = 0, progress: bool = False) -> dict:
    """-> {"rows": [{"stages", "test accuracy", "general loss"}], "arms": {variant: {"accuracy",
    "general loss"}}, "floors": {"majority class", "unigram"}, "oracle general loss", ...}."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    b = BUDGETS[budget]
    tok = word_tokenizer()
    court = domain_language("court")
    n_words = max(20_000, 40 * b["stage"] * BATCH)
    streams = {"general": toy_word_stream(n_words, BLOCK, BATCH, seed)[0],
               "domain": toy_word_stream(n_words, BLOCK, BATCH, seed + 1, lang=court)[0]}
    general_val, oracle = toy_word_stream(20_000, BLOCK, BATCH, seed + 2)
    unlabelled = toy_tasks.sentiment((2000, 0, 0), seed=seed + 3, lang=court).train
    task_ids = tok.encode_array(" <|endoftext|> ".join(e["text"] for e in unlabelled))
    streams["task"] = TokenStream(task_ids[:-2000], task_ids[-2000:], BLOCK, BATCH)
    labelled = toy_tasks.sentiment((b["labelled"], 0, 400), seed=seed + 4, lang=court)
    task = TaskBatches("classification", labelled, tok, BLOCK, BATCH)
    config = GPTConfig.gpt1(vocab_size=tok.vocab_size, block_size=BLOCK, n_layer=2, n_head=4, d_model=64)
    bodies = {(): GPT(config, rng=np.random.default_rng(100 + seed))}     # stages done -> the network after them
    rows, arms = [], {}
    for name, stages in VARIANTS.items():
        for k in range(len(stages)):
            if stages[:k + 1] not in bodies:
                body = copy.deepcopy(bodies[stages[:k]])
                _lm(body, streams[stages[k]], b["stage"], seed=10 * seed + k, progress=progress)
                bodies[stages[:k + 1]] = body
        body = copy.deepcopy(bodies[stages])
        general_loss = evaluate(body, general_val.get_batch, 20, np.random.default_rng(seed))
        model = GPT1Finetune(body, n_classes=2, rng=np.random.default_rng(200 + seed))
        fine = TrainConfig(steps=b["finetune"], lr=1e-3, min_lr=1e-4, warmup=b["finetune"] // 10,
                           weight_decay=0.01, eval_every=0, seed=seed, progress=progress)
        train(model, task.get_batch, fine)
        acc = float(split_accuracy(model, task, "test"))
        arms[name] = {"accuracy": acc, "general loss": float(general_loss)}
        rows.append({"stages": name, "test accuracy": acc, "general loss": float(general_loss)})
    labels = np.array([e["label"] for e in labelled.test])
    floors = {"majority class": float(np.bincount(labels).max() / len(labels)),
              "unigram": unigram_loss(streams["general"].splits["train"], general_val.splits["val"], tok.vocab_size)}
    return {"rows": rows, "arms": arms, "floors": floors, "oracle general loss": oracle,
            "labelled examples": b["labelled"], "budget": budget,
            "text": words_to_text(court.sample_words(12, np.random.default_rng(seed)))}
