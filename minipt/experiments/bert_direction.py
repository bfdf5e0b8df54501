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
same steps and learning rate on its own fresh warm-up and decay schedule, on toy span QA
(``data/toy_tasks.span_qa``, two sentences): [CLS] question [SEP] story [SEP], the answer
the subject of the sentence whose predicate the question repeats. The subject comes
*before* that predicate, so a left-to-right reader meets the answer before the words
that make it the answer. (Toy tagging is no test of direction: its word classes follow
from the left context, and both arms tag about perfectly.)

Floor: always answering the first sentence's subject (its share of the test split).
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
from ..models.encoder.finetune import BertForQuestionAnswering
from ..objectives.common import IGNORE
from ..tasks.bert_inputs import BertTaskBatches, score
from ..train import TrainConfig, train

BUDGETS = {"tiny": dict(docs=60, pretrain=4, finetune=4, examples=(32, 0, 32)),
           "quick": dict(docs=1000, pretrain=400, finetune=200, examples=(1000, 0, 400)),
           "full": dict(docs=2000, pretrain=800, finetune=400, examples=(1000, 0, 400))}
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


def fine_tune(data, tok, pretrained: BertForPreTraining, steps: int, seed: int) -> float:
    """A copy of ``pretrained``'s encoder under the span-QA head, trained for ``steps`` on a
    fresh schedule -> test exact match."""
    model = BertForQuestionAnswering(pretrained.config, rng=np.random.default_rng(seed + 1)).load_pretrained(pretrained)
    batches = BertTaskBatches("span_qa", data, tok, MAX_LENGTH, batch_size=BATCH)
    train(model, batches.get_batch, TrainConfig(steps=steps, lr=LR, min_lr=LR / 10, warmup=max(steps // 10, 1),
                                                weight_decay=0.01, eval_every=0, seed=seed, progress=False))
    return float(score(model, batches, "test"))


def first_subject(data) -> float:
    """Exact match of always answering the first sentence's subject."""
    return float(np.mean([e["start"] == 0 for e in data.test]))


def run(budget: str = "quick", *, seed: int = 0, progress: bool = False) -> dict:
    """-> {"rows", "arms": {arm: {"span QA", "pre-training loss"}}, "floors": {"first subject"}}."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    b = BUDGETS[budget]
    rng = np.random.default_rng(seed)
    docs = {"train": story_documents(b["docs"], rng), "val": story_documents(max(b["docs"] // 10, 10), rng)}
    tok = wordpiece_tokenizer(docs["train"])
    corpus = EncoderCorpus({k: encode_documents(v, tok) for k, v in docs.items()}, tok, mode="packed",
                           max_length=MAX_LENGTH, batch_size=BATCH, n_instances={"train": 8000, "val": 200}, seed=seed)
    qa = toy_tasks.span_qa(b["examples"], seed, n_sentences=(2, 2))
    base = BertConfig(vocab_size=tok.vocab_size, max_position=MAX_LENGTH, n_layer=2, n_head=4, d_model=64,
                      d_ff=256, nsp=False)
    schedule = TrainConfig(steps=b["pretrain"], lr=3e-3, min_lr=3e-4, warmup=max(b["pretrain"] // 10, 1),
                           weight_decay=0.01, eval_every=0, seed=seed, progress=progress)
    arms = {}
    for name, causal in ARMS.items():
        model = BertForPreTraining(replace(base, causal=causal), rng=np.random.default_rng(seed + 100))
        result = train(model, Pretraining(corpus, causal).get_batch, schedule)
        arms[name] = {"span QA": fine_tune(qa, tok, model, b["finetune"], seed),
                      "pre-training loss": float(result.train_loss)}
    rows = [{"arm": k, **v} for k, v in arms.items()]
    return {"rows": rows, "arms": arms, "floors": {"first subject": first_subject(qa)}}
