"""The BERT family's claims at toy scale: RoBERTa's ablations, ALBERT's NSP against SOP,
ELECTRA against BERT at equal compute.

On the stories of ``data/encoder_corpus.py`` (a protagonist and a journey, so NSP and SOP
have something to learn), WordPiece, one encoder size for all:

1. **static vs dynamic masking** (RoBERTa, Liu et al. 2019, table 1): the same MLM-only
   model on packed full sentences, with masks drawn once (``dup_factor`` copies, chosen
   so that each mask is seen about 4 times, as BERT's 10 copies over 40 epochs) or drawn
   afresh for every batch. Measured: MLM loss on the same held-out batches.
2. **with vs without NSP** (RoBERTa, table 2): segment pairs with MLM + NSP against full
   sentences with MLM only. Measured: sentiment accuracy after fine-tuning on the pooled
   [CLS] (``models/encoder/finetune.py``; 48 labelled sentences, the mean of 3
   fine-tunings), beside a model fine-tuned from scratch.
3. **NSP vs SOP** (ALBERT, Lan et al. 2020, table 5): two ALBERTs, one pre-trained with
   MLM + NSP, one with MLM + SOP; each one's 2-way head is scored on NSP and on SOP
   held-out pairs. The paper: the NSP model is at chance on SOP (52 %), the SOP model
   does reasonably on NSP (78.9 %).
4. **ELECTRA vs BERT at equal compute** (Clark et al. 2020, table 1): ELECTRA's
   discriminator is BERT's size; it gets the number of steps whose training FLOPs equal
   BERT's (``train_flops``: 6 x matmul weights per token plus the attention scores, per
   model part, generator included). Both read the same packed batches; the real tokens
   each one trained on are counted, and ``"pre-training FLOPs"`` = tokens x FLOPs per
   token states the equality as measured. Measured: sentiment accuracy after the same
   fine-tuning; and, on held-out batches, the discriminator's replaced-token AUC and
   loss against the base-rate entropy (``recipes/electra.py``), for ELECTRA and for the
   **uniform-generator control** (replacements uniform over the vocabulary, same steps),
   which shows whether a discriminator at the base rate failed to learn or faced
   replacements too plausible to spot.

Every figure is reported as it came out (``rows``); the lesson ``16_bert_variants``
quotes them.
"""
from __future__ import annotations

import numpy as np

from ..core.module import eval_mode
from ..data import toy_tasks
from ..data.encoder_corpus import (
    EncoderCorpus,
    encode_documents,
    story_documents,
    wordpiece_tokenizer,
)
from ..models.encoder.albert import AlbertConfig, AlbertForPreTraining
from ..models.encoder.bert import BertConfig, BertForPreTraining
from ..models.encoder.electra import Electra, ElectraConfig
from ..models.encoder.finetune import BertForSequenceClassification
from ..recipes.electra import detection_metrics, electra_batches
from ..tasks.bert_inputs import BertTaskBatches, score
from ..train import TrainConfig, evaluate, train

ENCODER = dict(n_layer=2, n_head=4, d_model=32, d_ff=64, dropout=0.1)
GENERATOR = dict(generator_d_model=16, generator_n_head=2, generator_d_ff=32)   # 1/2 of D's width
MAX_LENGTH, BATCH = 32, 32
FINETUNE_RUNS = 3                      # fine-tunings averaged per encoder (48 labelled sentences are few)
BUDGETS = {"tiny": dict(steps=6, finetune=4, docs=40, instances=160, sentiment=(48, 16, 32), eval_batches=1),
           "quick": dict(steps=400, finetune=120, docs=400, instances=1600, sentiment=(48, 100, 400),
                         eval_batches=8),
           "full": dict(steps=1500, finetune=200, docs=1000, instances=4000, sentiment=(48, 100, 1000),
                        eval_batches=16)}


def train_flops(model, T: int = MAX_LENGTH) -> float:
    """Training FLOPs per token: 6 x (weights of every matmul the token passes through,
    the tied MLM decoder included) + 6 x (L T C) for attention scores and mixing, for each
    encoder of ``model``. Embedding look-ups and norms are not counted."""
    total = 0.0
    for name, p in model.named_parameters():
        if p.ndim == 2 and "embeddings" not in name:
            total += 6.0 * p.size
    tied = [m for _, m in model.named_modules() if type(m).__name__ == "MLMHead"]
    total += sum(6.0 * m.decoder.params["weight"].size for m in tied)     # the decoder reuses (V, E)
    for _, enc in model.named_modules():
        if type(enc).__name__ == "BertEncoder":
            c = enc.config
            total += 6.0 * c.n_layer * T * c.d_model
    return total


def _pretrain(model, get_batch, steps: int, seed: int, progress: bool):
    config = TrainConfig(steps=steps, lr=2e-3, min_lr=2e-4, warmup=max(steps // 10, 1), weight_decay=0.01,
                         betas=(0.9, 0.999), eval_every=0, seed=seed, progress=progress)
    return train(model, get_batch, config)


def counting_tokens(get_batch, tally: dict, key: str):
    """``get_batch`` that adds the real tokens (attention mask, index 2) of every training
    batch to ``tally[key]``: the tokens a pre-training run consumed, measured."""
    tally[key] = 0

    def get(split, rng):
        batch = get_batch(split, rng)
        if split == "train":
            tally[key] += int(np.asarray(batch[2]).sum())
        return batch
    return get


def head_accuracy(model, corpus: EncoderCorpus, n_batches: int, seed: int = 7) -> float:
    """Share of held-out pairs whose 2-way label (IsNext / in order) the head gets right."""
    rng, right, total = np.random.default_rng(seed), 0, 0
    with eval_mode(model):
        for _ in range(n_batches):
            ids, seg, mask, mlm, labels = corpus.get_batch("val", rng)
            out = model.outputs(ids, seg, mask, mlm, labels)
            right += int((out.nsp_logits.argmax(1) == labels).sum())
            total += len(labels)
    return right / total


def finetune_accuracy(encoder, config: BertConfig, task: BertTaskBatches, steps: int, seed: int,
                      progress: bool, runs: int = FINETUNE_RUNS) -> float:
    """Copy ``encoder`` (None: from scratch) into a sentiment classifier, fine-tune, score on
    test; the mean over ``runs`` fine-tunings (head initialisation and batch order differ)."""
    config = BertConfig(**{**config.to_dict(), "nsp": False, "embedding_size": None})
    found = []
    for run in range(runs):
        model = BertForSequenceClassification(config, rng=np.random.default_rng(500 + 10 * seed + run), n_classes=2)
        if encoder is not None:
            model.encoder.load_state_dict(encoder.state_dict())
        fine = TrainConfig(steps=steps, lr=1e-3, min_lr=1e-4, warmup=max(steps // 10, 1), weight_decay=0.01,
                           betas=(0.9, 0.999), eval_every=0, seed=10 * seed + run, progress=progress)
        train(model, task.get_batch, fine)
        found.append(score(model, task, "test"))
    return float(np.mean(found))


def run(budget: str = "quick", *, seed: int = 0, progress: bool = True) -> dict:
    """-> {"rows": [{"comparison", "model", "metric", "value"}], "flops", "steps", ...}."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    b = BUDGETS[budget]
    rng = np.random.default_rng(seed)
    train_docs, val_docs = story_documents(b["docs"], rng), story_documents(max(b["docs"] // 10, 4), rng)
    tok = wordpiece_tokenizer(train_docs)
    docs = {"train": encode_documents(train_docs, tok), "val": encode_documents(val_docs, tok)}
    n = {"train": b["instances"], "val": max(b["instances"] // 8, BATCH)}
    epochs = b["steps"] * BATCH / n["train"]
    dup = max(1, round(epochs / 4))                          # each static mask seen ~4 times, as BERT's
    corpus = lambda mode, masking="dynamic": EncoderCorpus(docs, tok, mode=mode, max_length=MAX_LENGTH,
                                                           batch_size=BATCH, n_instances=n, masking=masking,
                                                           dup_factor=dup, seed=seed)
    packed, packed_static, nsp, sop = corpus("packed"), corpus("packed", "static"), corpus("nsp"), corpus("sop")
    V = tok.vocab_size
    bert_config = BertConfig(vocab_size=V, max_position=MAX_LENGTH, nsp=False, **ENCODER)
    build = lambda cls, config: cls(config, rng=np.random.default_rng(100 + seed))
    steps, rows = b["steps"], []
    pre = lambda model, get: _pretrain(model, get, steps, seed, progress)

    # 1. static vs dynamic masking (MLM only, packed)
    dynamic, static = build(BertForPreTraining, bert_config), build(BertForPreTraining, bert_config)
    tokens: dict[str, int] = {}
    pre(dynamic, counting_tokens(packed.get_batch, tokens, "BERT"))
    pre(static, packed_static.get_batch)
    for name, model in (("static masking", static), ("dynamic masking", dynamic)):
        loss = evaluate(model, packed.get_batch, b["eval_batches"], np.random.default_rng(11))
        rows.append({"comparison": "masking", "model": name, "metric": "held-out MLM loss", "value": loss})

    # 2. with vs without NSP: downstream sentiment
    task = BertTaskBatches("sentiment", toy_tasks.sentiment(b["sentiment"], seed=seed), tok, MAX_LENGTH, BATCH)
    pairs = build(BertForPreTraining, BertConfig(**{**bert_config.to_dict(), "nsp": True}))
    pre(pairs, nsp.get_batch)
    fine = lambda enc: finetune_accuracy(enc, bert_config, task, b["finetune"], seed, progress)
    for name, enc in (("no pre-training", None), ("segment pairs, MLM + NSP", pairs.encoder),
                      ("full sentences, MLM only", dynamic.encoder)):
        rows.append({"comparison": "nsp", "model": name, "metric": "sentiment test accuracy", "value": fine(enc)})

    # 3. NSP vs SOP, each head scored on both tasks (ALBERT)
    albert_config = AlbertConfig(vocab_size=V, max_position=MAX_LENGTH, embedding_size=16, share="all",
                                 **{**ENCODER, "dropout": 0.0})
    for objective, data in (("NSP", nsp), ("SOP", sop)):
        model = build(AlbertForPreTraining, albert_config)
        pre(model, data.get_batch)
        for task_name, held_out in (("NSP", nsp), ("SOP", sop)):
            rows.append({"comparison": "nsp vs sop", "model": f"ALBERT trained on {objective}",
                         "metric": f"{task_name} accuracy", "value": head_accuracy(model, held_out,
                                                                                   b["eval_batches"])})

    # 4. ELECTRA vs BERT at equal training FLOPs: downstream sentiment; detection against its floors
    electra_config = ElectraConfig(vocab_size=V, max_position=MAX_LENGTH, **ENCODER, **GENERATOR)
    electra = build(Electra, electra_config)
    uniform = build(Electra, ElectraConfig(**{**electra_config.to_dict(), "generator_sampling": "uniform"}))
    flops = {"BERT": train_flops(dynamic), "ELECTRA": train_flops(electra)}
    electra_steps = max(1, round(steps * flops["BERT"] / flops["ELECTRA"]))
    _pretrain(electra, counting_tokens(electra_batches(packed), tokens, "ELECTRA"), electra_steps, seed, progress)
    _pretrain(uniform, counting_tokens(electra_batches(packed), tokens, "ELECTRA, uniform generator"), electra_steps,
              seed, progress)
    rows.append({"comparison": "electra", "model": f"BERT (MLM), {steps} steps", "metric": "sentiment test accuracy",
                 "value": next(r["value"] for r in rows if r["model"] == "full sentences, MLM only")})
    rows.append({"comparison": "electra", "model": f"ELECTRA, {electra_steps} steps", "metric": "sentiment test accuracy",
                 "value": fine(electra.discriminator)})
    rows.append({"comparison": "electra", "model": f"ELECTRA, uniform generator, {electra_steps} steps",
                 "metric": "sentiment test accuracy", "value": fine(uniform.discriminator)})
    for name, model in (("ELECTRA", electra), ("ELECTRA, uniform generator", uniform)):
        found = detection_metrics(model, electra_batches(packed), b["eval_batches"], np.random.default_rng(13))
        for metric, key in (("replaced-token AUC (chance 0.5)", "rtd_auc"), ("discriminator loss", "disc_loss"),
                            ("base-rate entropy", "base_rate_entropy")):
            rows.append({"comparison": "electra detection", "model": name, "metric": metric, "value": found[key]})
    per_token = {**flops, "ELECTRA, uniform generator": flops["ELECTRA"]}
    return {"rows": rows, "budget": budget, "steps": steps, "electra steps": electra_steps, "flops per token": flops,
            "pre-training tokens": tokens, "pre-training FLOPs": {k: per_token[k] * n for k, n in tokens.items()},
            "static dup_factor": dup, "vocab": V, "sentiment chance": max(p := float(np.mean([e["label"] for e in
                                                                                       task.data.test])), 1 - p)}
