"""The BERT family's claims at toy scale: RoBERTa's ablations, ALBERT's SOP and sharing,
ELECTRA against BERT at equal compute.

On the stories of ``data/encoder_corpus.py`` (a protagonist and a journey along the fixed
path of places, ``journey="path"``, so NSP and SOP have something to learn), WordPiece,
one encoder size unless said:

1. **dynamic vs static masking** (RoBERTa, Liu et al. 2019, table 1): the same MLM-only
   BERT on packed full sentences, with masks drawn once (``dup_factor`` copies, chosen so
   that each mask is seen about 4 times, as BERT's 10 copies over 40 epochs) or afresh for
   every batch. Measured: MLM loss per masked token on the same held-out masks; floor: the
   training split's unigram distribution on the same tokens.
2. **no NSP vs NSP** (RoBERTa, table 2): segment pairs with MLM + NSP against full
   sentences with MLM only. Measured: sentiment accuracy after fine-tuning on the pooled
   [CLS] (48 labelled sentences, the mean of 3 fine-tunings, each on a fresh schedule),
   beside a model fine-tuned from scratch; floor: the majority class.
3. **SOP vs NSP** (ALBERT, Lan et al. 2020, table 5): two encoders of the shape
   ``scripts/investigate_sop.py`` found able to learn SOP (2 layers, H 64, no dropout;
   ALBERT's factorisation and sharing are the subject of 4., not of this claim), one
   pre-trained with MLM + NSP, one with MLM + SOP, each 2-way head scored on held-out NSP
   pairs and SOP pairs. The paper: the NSP
   model is at chance on SOP (52 %) while the SOP model does well on NSP (78.9 %), so the
   claim is read on the mean accuracy over both tasks (chance 0.5). On the toy stories
   the MLM gradient drowns SOP's (``scripts/investigate_sop.py``: 6-112 times larger at
   initialisation; SOP is learnt alone, never beside MLM), so both arms weight their
   sentence loss by ``PAIR_GAIN`` (``Weighted``): MLM + 20 x NSP against MLM + 20 x SOP.
4. **shared vs unshared** (ALBERT, section 3.1): an ALBERT of ``SHARED_LAYERS`` layers
   sharing one layer's weights against an unshared ALBERT of one layer: the same
   parameters (asserted), the same steps; measured: held-out MLM accuracy; floor: always
   the most frequent token.
5. **ELECTRA vs BERT at equal compute** (Clark et al. 2020, table 1): ELECTRA's
   discriminator is BERT's size; it gets the steps whose **training FLOPs, generator
   included**, equal BERT's (``train_flops``: 6 x matmul weights per token plus the
   attention scores). Both read the same packed batches; ``"pre-training FLOPs"`` =
   counted real tokens x FLOPs per token states the equality as measured. Measured:
   sentiment accuracy after the same fine-tuning; and the discriminator's replaced-token
   AUC and loss against the base-rate entropy for ELECTRA and the **uniform-generator
   control** (replacements uniform over the vocabulary, same steps).

``run`` returns ``rows`` (the table), ``arms``, ``floors`` and per-item ``items`` for the
claims ledger (``claims.py``); ``parts`` runs a subset of the comparisons (``PARTS``), each
with the same figures as in a whole run, so one seed can be spread over processes.
"""
from __future__ import annotations

import numpy as np

from ..core.module import Module, eval_mode
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
from ..objectives.common import IGNORE
from ..recipes.electra import detection_metrics, electra_batches
from ..tasks.bert_inputs import BertTaskBatches, score_items
from ..train import TrainConfig, train

ENCODER = dict(n_layer=2, n_head=4, d_model=32, d_ff=64, dropout=0.1)
GENERATOR = dict(generator_d_model=16, generator_n_head=2, generator_d_ff=32)   # 1/2 of D's width
PAIR_ENCODER = dict(n_layer=2, n_head=4, d_model=64, d_ff=256, dropout=0.0)    # the encoders of SOP vs NSP
PAIR_GAIN = 20.0                       # the sentence loss's weight beside MLM (module docstring, 3.)
SHARED_LAYERS = 2                      # the shared ALBERT's depth; the unshared one has 1 layer
MAX_LENGTH, BATCH = 32, 32
FINETUNE_RUNS = 3                      # fine-tunings averaged per encoder (48 labelled sentences are few)
BUDGETS = {"tiny": dict(steps=6, pair_steps=6, finetune=4, docs=40, instances=160, sentiment=(48, 16, 32)),
           "full": dict(steps=600, pair_steps=800, finetune=100, docs=1000, instances=4000,
                        sentiment=(48, 100, 1000))}
BUDGETS["quick"] = BUDGETS["full"]     # at 300 steps (400 for the pairs) dynamic masking and SOP are not yet
#                                        ahead (seed 0: MLM loss 3.272 vs 3.263, SOP 0.508), so CI's direction
#                                        check of the reproduced claims runs the full budget (about 2.5 min)


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


class Weighted(Module):
    """A head (or the pooler under it) whose loss counts ``gain`` times: its backward passes
    ``gain`` x the upstream gradient, so every parameter below gets the gradient of
    MLM + gain x (its loss)."""

    def __init__(self, head: Module, gain: float):
        super().__init__()
        self.inner, self.gain = head, gain

    def forward(self, x: np.ndarray) -> np.ndarray:
        return self.inner(x)

    def backward(self, dy: np.ndarray) -> np.ndarray:
        return self.inner.backward(self.gain * dy)


def _pretrain(model, get_batch, steps: int, seed: int, progress: bool, lr: float = 2e-3):
    config = TrainConfig(steps=steps, lr=lr, min_lr=lr / 10, warmup=max(steps // 10, 1), weight_decay=0.01,
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


def mlm_items(model, corpus: EncoderCorpus, seed: int = 11) -> dict[str, np.ndarray]:
    """Every held-out instance once, masked by ``seed`` (the same masks for every model):
    per masked token the loss (nats), whether the top guess is right, and the target."""
    losses, hits, targets = [], [], []
    with eval_mode(model):
        for batch in corpus.in_order("val", np.random.default_rng(seed)):
            logits = model.outputs(*batch[:3]).logits.astype(np.float64)            # (B, T, V)
            chosen = (batch[3] != IGNORE) & (batch[2] == 1)                           # (B, T)
            z, y = logits[chosen], batch[3][chosen]                                   # (n, V), (n,)
            logp = z - z.max(1, keepdims=True)
            logp -= np.log(np.exp(logp).sum(1, keepdims=True))
            losses.append(-logp[np.arange(len(y)), y])
            hits.append((z.argmax(1) == y).astype(np.float64))
            targets.append(y)
    return {"loss": np.concatenate(losses), "hit": np.concatenate(hits), "target": np.concatenate(targets)}


def unigram_loss(corpus: EncoderCorpus, targets: np.ndarray) -> float:
    """Mean -log q(target) under the training instances' token frequencies (add-one over
    the ordinary tokens): the MLM loss of a model that ignores the context."""
    ids = np.concatenate([x[0] for x in corpus.instances["train"]])
    counts = np.bincount(ids, minlength=corpus.vocab_size).astype(np.float64) + 1.0
    counts[list(corpus.special_ids)] = 0.0
    return float(-np.log(counts[targets] / counts.sum()).mean())


def pair_items(model, corpus: EncoderCorpus) -> np.ndarray:
    """1/0 per held-out pair (clean inputs, in order): does the 2-way head get the label?"""
    out, n = [], len(corpus.instances["val"])
    with eval_mode(model):
        for start in range(0, n, BATCH):
            ids, seg, mask, labels = corpus._clean("val", np.arange(start, min(start + BATCH, n)))
            out.append((model.outputs(ids, seg, mask).nsp_logits.argmax(1) == labels).astype(np.float64))
    return np.concatenate(out)


def finetune_items(encoder, config: BertConfig, task: BertTaskBatches, steps: int, seed: int,
                   progress: bool, runs: int = FINETUNE_RUNS) -> np.ndarray:
    """Copy ``encoder`` (None: from scratch) into a sentiment classifier, fine-tune on a
    fresh schedule, score each test sentence; the mean over ``runs`` fine-tunings (head
    initialisation and batch order differ)."""
    config = BertConfig(**{**config.to_dict(), "nsp": False, "embedding_size": None})
    found = []
    for run in range(runs):
        model = BertForSequenceClassification(config, rng=np.random.default_rng(500 + 10 * seed + run), n_classes=2)
        if encoder is not None:
            model.encoder.load_state_dict(encoder.state_dict())
        fine = TrainConfig(steps=steps, lr=1e-3, min_lr=1e-4, warmup=max(steps // 10, 1), weight_decay=0.01,
                           betas=(0.9, 0.999), eval_every=0, seed=10 * seed + run, progress=progress)
        train(model, task.get_batch, fine)
        found.append(score_items(model, task, "test"))
    return np.mean(found, axis=0)


def _corpora(b: dict, seed: int):
    rng = np.random.default_rng(seed)
    train_docs = story_documents(b["docs"], rng, journey="path")
    val_docs = story_documents(max(b["docs"] // 10, 4), rng, journey="path")
    tok = wordpiece_tokenizer(train_docs)
    docs = {"train": encode_documents(train_docs, tok), "val": encode_documents(val_docs, tok)}
    n = {"train": b["instances"], "val": max(b["instances"] // 8, BATCH)}
    dup = max(1, round(b["steps"] * BATCH / n["train"] / 4))     # each static mask seen ~4 times, as BERT's
    make = lambda mode, masking="dynamic": EncoderCorpus(docs, tok, mode=mode, max_length=MAX_LENGTH,
                                                         batch_size=BATCH, n_instances=n, masking=masking,
                                                         dup_factor=dup, seed=seed)
    return tok, dup, {"packed": make("packed"), "static": make("packed", "static"), "NSP": make("nsp"),
                      "SOP": make("sop")}


PARTS = ("masking", "nsp", "NSP head", "SOP head", "sharing", "ELECTRA", "uniform generator")   # 1.-5., in order


def run(budget: str = "quick", *, seed: int = 0, progress: bool = True, parts=PARTS) -> dict:
    """-> {"rows", "arms", "floors", "items", "flops per token", "pre-training FLOPs", ...}.
    ``parts``: a subset of ``PARTS`` (each part's figures do not depend on the others: a
    model two parts need is trained alike, from the same seed, in each)."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    if not parts or set(parts) - set(PARTS):
        raise ValueError(f"parts must be a non-empty subset of {PARTS}, got {parts!r}")
    b = BUDGETS[budget]
    tok, dup, data = _corpora(b, seed)
    packed, V, steps = data["packed"], tok.vocab_size, b["steps"]
    bert_config = BertConfig(vocab_size=V, max_position=MAX_LENGTH, nsp=False, **ENCODER)
    build = lambda cls, config: cls(config, rng=np.random.default_rng(100 + seed))
    pre = lambda model, get, n=steps, lr=2e-3: _pretrain(model, get, n, seed, progress, lr)
    arms, items, tokens, floors, out = {}, {}, {}, {}, {"static dup_factor": dup}

    def add(arm: str, metric: str, per_item: np.ndarray):
        arms.setdefault(arm, {})[metric] = float(np.mean(per_item))
        items.setdefault(arm, {})[metric] = [float(x) for x in per_item]

    def mlm_floors(targets: np.ndarray):
        floors.update(unigram=unigram_loss(packed, targets),
                      baseline=float(np.mean(targets == packed.most_frequent_token("train"))))

    dynamic = None
    if {"masking", "nsp"} & set(parts):      # BERT, MLM only on packed full sentences, dynamic masks
        dynamic = build(BertForPreTraining, bert_config)
        pre(dynamic, counting_tokens(packed.get_batch, tokens, "BERT"))
    task = BertTaskBatches("sentiment", toy_tasks.sentiment(b["sentiment"], seed=seed), tok, MAX_LENGTH, BATCH)
    fine = lambda enc: finetune_items(enc, bert_config, task, b["finetune"], seed, progress)
    if {"nsp", "ELECTRA"} & set(parts):     # majority class: the floor of both sentiment claims
        labels = np.array([e["label"] for e in task.data.test])
        floors["majority class"] = float(max(labels.mean(), 1 - labels.mean()))
    if "nsp" in parts:          # BERT's sentiment accuracy: the "no NSP" arm of 2., the "BERT" arm of 5.
        add("no NSP", "accuracy", fine(dynamic.encoder))
        add("BERT", "accuracy", np.array(items["no NSP"]["accuracy"]))

    if "masking" in parts:      # 1. dynamic vs static masking: per-token loss on the same held-out masks
        static = build(BertForPreTraining, bert_config)
        pre(static, data["static"].get_batch)
        for arm, model in (("static", static), ("dynamic", dynamic)):
            m = mlm_items(model, packed)
            add(arm, "MLM loss", m["loss"])
            add(arm, "MLM accuracy", m["hit"])
        mlm_floors(m["target"])

    if "nsp" in parts:          # 2. no NSP vs NSP: downstream sentiment
        pairs = build(BertForPreTraining, BertConfig(**{**bert_config.to_dict(), "nsp": True}))
        pre(pairs, data["NSP"].get_batch)
        for arm, enc in (("no pre-training", None), ("NSP", pairs.encoder)):
            add(arm, "accuracy", fine(enc))

    objectives = [o for o in ("NSP", "SOP") if f"{o} head" in parts]
    if objectives:              # 3. SOP vs NSP: each encoder's 2-way head on held-out NSP and SOP pairs
        pair_config = BertConfig(vocab_size=V, max_position=MAX_LENGTH, nsp=True, **PAIR_ENCODER)
        for objective in objectives:
            model = build(BertForPreTraining, pair_config)
            model.nsp = Weighted(model.nsp, PAIR_GAIN)
            pre(model, data[objective].get_batch, b["pair_steps"], 1e-3)
            found = {task_name: pair_items(model, data[task_name]) for task_name in ("NSP", "SOP")}
            for task_name, hits in found.items():
                add(f"MLM + {objective}", f"{task_name} accuracy", hits)
            add(f"MLM + {objective}", "NSP and SOP accuracy", np.concatenate([found["NSP"], found["SOP"]]))
        floors["chance"] = 0.5

    if "sharing" in parts:      # 4. shared vs unshared at equal parameters: held-out MLM accuracy
        albert = lambda layers, share: build(AlbertForPreTraining, AlbertConfig(
            vocab_size=V, max_position=MAX_LENGTH, embedding_size=16, share=share,
            **{**ENCODER, "n_layer": layers, "dropout": 0.0}))
        shared, unshared = albert(SHARED_LAYERS, "all"), albert(1, None)
        if shared.num_parameters() != unshared.num_parameters():
            raise AssertionError("the shared and unshared ALBERTs must have equal parameter counts")
        for arm, model in (("shared", shared), ("unshared", unshared)):
            pre(model, packed.get_batch)
            m = mlm_items(model, packed)
            add(arm, "MLM accuracy", m["hit"])
            add(arm, "MLM loss", m["loss"])
        mlm_floors(m["target"])

    if {"ELECTRA", "uniform generator"} & set(parts):   # 5. ELECTRA vs BERT at equal training FLOPs
        electra_config = ElectraConfig(vocab_size=V, max_position=MAX_LENGTH, **ENCODER, **GENERATOR)
        flops = {"BERT": train_flops(build(BertForPreTraining, bert_config)),      # generator included
                 "ELECTRA": train_flops(build(Electra, electra_config))}
        electra_steps = max(1, round(steps * flops["BERT"] / flops["ELECTRA"]))
        models = {"ELECTRA": electra_config, "ELECTRA, uniform generator": ElectraConfig(
            **{**electra_config.to_dict(), "generator_sampling": "uniform"})}
        for arm, config in models.items():
            if ("ELECTRA" if arm == "ELECTRA" else "uniform generator") not in parts:
                continue
            model = build(Electra, config)
            pre(model, counting_tokens(electra_batches(packed), tokens, arm), electra_steps)
            found = detection_metrics(model, electra_batches(packed), 16, np.random.default_rng(13))
            arms.setdefault(arm, {}).update({"replaced-token AUC": found["rtd_auc"], "discriminator loss":
                                             found["disc_loss"], "base-rate entropy": found["base_rate_entropy"]})
            if arm == "ELECTRA":
                add("ELECTRA", "accuracy", fine(model.discriminator))
        per_token = {**flops, "ELECTRA, uniform generator": flops["ELECTRA"]}
        out.update({"electra steps": electra_steps, "flops per token": flops, "pre-training tokens": tokens,
                    "pre-training FLOPs": {k: per_token[k] * n for k, n in tokens.items()}})
    rows = [{"arm": arm, **values} for arm, values in arms.items()]
    return {"rows": rows, "arms": arms, "floors": floors, "items": items, "budget": budget, "steps": steps,
            "vocab": V, **out}
