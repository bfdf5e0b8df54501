"""Does knowledge help? Entity masking (ERNIE, Baidu) against entity fusion (ERNIE,
Tsinghua) against plain BERT, on a toy task that needs the graph's facts.

Seed 001 closes with knowledge-enhanced pre-training. The experiment, on the toy graph
of ``data/toy_kb.py``:

1. TransE (``models/knowledge/transe.py``) learns entity embeddings from the graph;
2. three encoders of one size pre-train on the same sentences (facts and plain frames
   that mention entities) for the same number of steps:
   - ``bert``: MLM on single tokens, no entity input;
   - ``bert + entity masking``: MLM that masks whole entity mentions (Baidu's ERNIE);
   - ``ernie``: MLM plus the denoising entity auto-encoder, with the TransE embeddings
     fused into the upper layer (Tsinghua's ERNIE);
3. each is fine-tuned on the ``country`` task: a sentence that mentions one person and
   nothing of where they live, labelled with the country of that person's city. The test
   persons never occur in fine-tuning, so a model can only answer from what pre-training
   (or the graph) put into its view of that person.

Reported: test accuracy per encoder (the mean over ``seeds``), against chance (the
majority class of the test split).
"""
from __future__ import annotations

import numpy as np

from ..data.toy_kb import build_kb, corpus, country_task
from ..models.knowledge.ernie import Ernie, ErnieConfig
from ..models.knowledge.transe import TransE
from ..objectives.entity_autoencoder import make_batch, vocabulary
from ..train import TrainConfig, train

VARIANTS = {                       # name -> (entity input, MLM masking, dEA)
    "bert": (False, "token", False),
    "bert + entity masking": (False, "entity", False),
    "ernie": (True, "token", True),
}
BUDGETS = {"tiny": dict(pretrain=20, finetune=10, sentences=200, seeds=(0,)),         # seconds: for tests
           "quick": dict(pretrain=400, finetune=300, sentences=3000, seeds=(0,)),
           "full": dict(pretrain=1500, finetune=300, sentences=8000, seeds=(0, 1, 2))}


def _batches(sentences, kb, masking, dea, batch_size, labels=None):
    """get_batch(split, rng) for ``train``: random sentences (and labels) each call."""
    def get(split, rng):
        k = rng.integers(0, len(sentences), batch_size)
        batch = make_batch([sentences[i] for i in k], kb, rng, masking=masking, dea=dea)
        return batch if labels is None else (*batch, labels[k])
    return get


def accuracy(model: Ernie, rows, kb) -> float:
    """Share of (sentence, label) rows whose [CLS] classification is right (eval mode)."""
    from ..core.module import eval_mode
    batch = make_batch([s for s, _ in rows], kb, np.random.default_rng(0), masking="none", dea=False)
    labels = np.array([y for _, y in rows])
    with eval_mode(model):
        model(*batch, labels)
    return float((model.last_class_logits.argmax(1) == labels).mean())


def run(budget: str = "quick", *, seed: int = 0, progress: bool = True) -> dict:
    """-> {"rows": [{"model", "test accuracy", "train accuracy"}], "chance", "transe hits@1", ...}."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    b = BUDGETS[budget]
    kb = build_kb(n_persons=64, n_cities=12, n_countries=4, seed=seed)
    n_countries = len(kb.ids("country"))
    rng = np.random.default_rng(seed)
    transe = TransE(kb.n_entities, len(kb.relations), dim=16, margin=1.0, norm=1, rng=rng)
    transe.fit(kb.triples, epochs=400, rng=rng)
    functional = kb.triples[kb.triples[:, 1] < 2]
    hits1 = float((transe.rank_tails(functional) == 1).mean())
    sentences = corpus(kb, b["sentences"], seed=seed)
    task = country_task(kb, n_per_person=8, seed=seed)
    train_rows, test_rows = task["train"], task["test"]
    train_labels = np.array([y for _, y in train_rows])
    chance = float(np.bincount([y for _, y in test_rows], minlength=n_countries).max() / len(test_rows))
    results = {name: [] for name in VARIANTS}
    for s in b["seeds"]:
        for name, (knowledge, masking, dea) in VARIANTS.items():
            config = ErnieConfig(vocab_size=len(vocabulary(kb)), n_entities=kb.n_entities, n_classes=n_countries,
                                 n_text_layer=1, n_knowledge_layer=2, knowledge=knowledge)
            model = Ernie(config, rng=np.random.default_rng(100 + s), entity_table=transe.params["entity"])
            pre = TrainConfig(steps=b["pretrain"], lr=3e-3, min_lr=3e-4, warmup=b["pretrain"] // 10,
                              weight_decay=0.01, eval_every=0, seed=s, progress=progress)
            train(model, _batches(sentences, kb, masking, dea, 32), pre)
            fine = TrainConfig(steps=b["finetune"], lr=3e-3, min_lr=3e-4, warmup=b["finetune"] // 10,
                               weight_decay=0.01, eval_every=0, seed=s, progress=progress)
            train(model, _batches([r for r, _ in train_rows], kb, "none", False, 32, train_labels), fine)
            results[name].append((accuracy(model, test_rows, kb), accuracy(model, train_rows, kb)))
    rows = [{"model": name, "test accuracy": float(np.mean([a for a, _ in r])),
             "train accuracy": float(np.mean([t for _, t in r])), "runs": len(r)} for name, r in results.items()]
    return {"rows": rows, "chance": chance, "transe hits@1": hits1, "budget": budget,
            "test persons": len({s.spans[0][2] for s, _ in test_rows})}
