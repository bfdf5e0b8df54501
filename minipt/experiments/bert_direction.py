"""Bidirectional against left-to-right pre-training of the same encoder at equal compute
(Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional Transformers for Language
Understanding", section 5.1 and table 5: "No NSP" against "LTR & No NSP").

One BERT shape (2 layers, d 64, 4 heads, no NSP head: neither arm has NSP) is built twice
from the same initialisation:

- **bidirectional**: every position attends to every position; pre-trained with the
  masked LM (15 % of the tokens, 80/10/10, dynamic);
- **left-to-right**: causal attention (``BertConfig.causal``) in pre-training and in
  fine-tuning alike, as the paper's LTR model; pre-trained to predict the next token
  through the same tied MLM head.

Both read the same packed windows of toy stories (``data/encoder_corpus.py``) for the same
steps, batch and tokens: equal pre-training compute. Each is then fine-tuned, with the
same steps and learning rate on its own fresh warm-up and decay schedule, on two toy
understanding tasks whose answers need the right-hand context (``data/toy_tasks.py``):

- ``span_qa``: [CLS] question [SEP] story [SEP]; the answer, the subject of the sentence
  whose predicate the question repeats, comes *before* that predicate;
- ``tagging``: a word class per word (the first piece of each word).

Floors: for span QA, always answering the first sentence's subject (its share of the test
split); for tagging, the test split's commonest tag; for their mean, the mean of the two.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..data import toy_tasks
from ..data.encoder_corpus import (
    EncoderCorpus,
    encode_documents,
    story_documents,
    wordpiece_tokenizer,
)
from ..models.encoder.bert import BertConfig, BertForPreTraining
from ..models.encoder.finetune import (
    BertForQuestionAnswering,
    BertForTokenClassification,
)
from ..objectives.common import IGNORE
from ..tasks.bert_inputs import BertTaskBatches, score
from ..train import TrainConfig, train

BUDGETS = {"tiny": dict(docs=60, pretrain=4, finetune=4, examples=(32, 0, 32)),
           "quick": dict(docs=1000, pretrain=200, finetune=100, examples=(1000, 0, 300)),
           "full": dict(docs=2000, pretrain=300, finetune=100, examples=(1000, 0, 400))}
ARMS = {"bidirectional": False, "left-to-right": True}          # arm -> causal attention
MAX_LENGTH, BATCH, LR = 48, 32, 1e-3


class Pretraining:
    """``get_batch(split, rng)`` for either objective over the same rows of the same windows:
    the masked LM (dynamic 80/10/10) or the next token at every real position."""

    def __init__(self, corpus: EncoderCorpus, causal: bool):
        self.corpus, self.causal = corpus, causal

    def get_batch(self, split: str, rng: np.random.Generator):
        if not self.causal:
            return self.corpus.get_batch(split, rng)          # (inputs, segments, attention mask, MLM labels)
        ids, segments, mask, _ = self.corpus.unmasked(split, rng)                # (B, T) each
        labels = np.full_like(ids, IGNORE)
        labels[:, :-1] = np.where(mask[:, 1:] == 1, ids[:, 1:], IGNORE)          # x_{t+1} at t
        return ids, segments, mask, labels


def fine_tune(kind: str, data, tok, pretrained: BertForPreTraining, steps: int, seed: int) -> float:
    """A copy of ``pretrained``'s encoder under ``kind``'s head, trained for ``steps`` on a
    fresh schedule -> test accuracy (exact match for span QA)."""
    make = BertForQuestionAnswering if kind == "span_qa" else BertForTokenClassification
    head = {} if kind == "span_qa" else {"n_classes": len(data.labels)}
    model = make(pretrained.config, rng=np.random.default_rng(seed + 1), **head).load_pretrained(pretrained)
    batches = BertTaskBatches(kind, data, tok, MAX_LENGTH, batch_size=BATCH)
    train(model, batches.get_batch, TrainConfig(steps=steps, lr=LR, min_lr=LR / 10, warmup=max(steps // 10, 1),
                                                weight_decay=0.01, eval_every=0, seed=seed, progress=False))
    return float(score(model, batches, "test"))


def floors(tasks: dict) -> dict[str, float]:
    """span QA: the first sentence's subject every time; tagging: the commonest tag."""
    qa = float(np.mean([e["start"] == 0 for e in tasks["span_qa"].test]))
    tags = [t for e in tasks["tagging"].test for t in e["tags"]]
    tagging = max(tags.count(t) for t in set(tags)) / len(tags)
    return {"span QA": qa, "tagging": tagging, "mean": (qa + tagging) / 2}


def run(budget: str = "quick", *, seed: int = 0, progress: bool = False) -> dict:
    """-> {"rows", "arms": {arm: {"span QA", "tagging", "mean", "pre-training loss"}}, "floors": {same keys}}."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    b = BUDGETS[budget]
    rng = np.random.default_rng(seed)
    docs = {"train": story_documents(b["docs"], rng), "val": story_documents(max(b["docs"] // 10, 10), rng)}
    tok = wordpiece_tokenizer(docs["train"])
    corpus = EncoderCorpus({k: encode_documents(v, tok) for k, v in docs.items()}, tok, mode="packed",
                           max_length=MAX_LENGTH, batch_size=BATCH, n_instances={"train": 8000, "val": 200}, seed=seed)
    tasks = {"span_qa": toy_tasks.span_qa(b["examples"], seed, n_sentences=(2, 2)),
             "tagging": toy_tasks.tagging(b["examples"], seed)}
    base = BertConfig(vocab_size=tok.vocab_size, max_position=MAX_LENGTH, n_layer=2, n_head=4, d_model=64,
                      d_ff=256, nsp=False)
    schedule = TrainConfig(steps=b["pretrain"], lr=3e-3, min_lr=3e-4, warmup=max(b["pretrain"] // 10, 1),
                           weight_decay=0.01, eval_every=0, seed=seed, progress=progress)
    arms = {}
    for name, causal in ARMS.items():
        model = BertForPreTraining(replace(base, causal=causal), rng=np.random.default_rng(seed + 100))
        result = train(model, Pretraining(corpus, causal).get_batch, schedule)
        qa = fine_tune("span_qa", tasks["span_qa"], tok, model, b["finetune"], seed)
        tagging = fine_tune("tagging", tasks["tagging"], tok, model, b["finetune"], seed)
        arms[name] = {"span QA": qa, "tagging": tagging, "mean": (qa + tagging) / 2,
                      "pre-training loss": float(result.train_loss)}
    rows = [{"arm": k, **v} for k, v in arms.items()]
    return {"rows": rows, "arms": arms, "floors": floors(tasks)}
