"""Does knowledge help? Entity masking (ERNIE, Baidu) against entity fusion (ERNIE,
Tsinghua) against plain BERT, on a toy task that needs the graph's facts.

The survey this book follows closes with knowledge-enhanced pre-training. On the toy graph
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

Reported per seed: test accuracy per encoder with its standard error (the test person
is the unit: a person's sentences share one fact), against chance (the majority class of
the test split). The graph holds hundreds of persons (a quarter of them tested), and no
name shares a syllable with a country's name, so a name never gives its answer away.
Persons know no one here: ``knows`` facts would only dilute the two facts the task chains.

Each phase (pre-training, fine-tuning) is one ``train`` call with its own ``TrainConfig``:
a fresh warm-up and decay schedule and fresh Adam moments, the same for every arm. In
fine-tuning the word embeddings stay as pre-training left them (``frozen``): otherwise
each arm rewrites its training persons' name vectors into labels (measured on seed 0:
train accuracy 0.99 to 1.00, held-out persons 0.26 to 0.45 against chance 0.35), and the
test would measure that memory rather than what pre-training put into a name.
"""
from __future__ import annotations

import numpy as np

from ..core.module import eval_mode
from ..data.toy_kb import build_kb, corpus, country_task
from ..models.knowledge.ernie import Ernie, ErnieConfig
from ..models.knowledge.transe import TransE
from ..objectives.entity_autoencoder import make_batch, vocabulary
from ..train import TrainConfig, train

VARIANTS = {                       # arm -> (entity input, MLM masking, dEA)
    "BERT": (False, "token", False),
    "entity masking": (False, "entity", False),
    "ERNIE": (True, "token", True),
}
BUDGETS = {"tiny": dict(persons=24, cities=6, pretrain=20, finetune=10, sentences=200),        # for tests
           "quick": dict(persons=400, cities=24, pretrain=1500, finetune=300, sentences=12000),
           "full": dict(persons=400, cities=24, pretrain=1500, finetune=300, sentences=12000)}
N_COUNTRIES, PER_PERSON = 4, 4


def _batches(sentences, kb, masking, dea, batch_size, labels=None):
    """get_batch(split, rng) for ``train``: random sentences (and labels) each call."""
    def get(split, rng):
        k = rng.integers(0, len(sentences), batch_size)
        batch = make_batch([sentences[i] for i in k], kb, rng, masking=masking, dea=dea)
        return batch if labels is None else (*batch, labels[k])
    return get


def predictions(model: Ernie, rows, kb) -> np.ndarray:
    """The [CLS] class of each (sentence, label) row (eval mode), (len(rows),)."""
    batch = make_batch([s for s, _ in rows], kb, np.random.default_rng(0), masking="none", dea=False)
    with eval_mode(model):
        model(*batch, np.array([y for _, y in rows]))
    return model.last_class_logits.argmax(1)


def accuracy(model: Ernie, rows, kb) -> float:
    """Share of (sentence, label) rows whose [CLS] classification is right."""
    return float((predictions(model, rows, kb) == np.array([y for _, y in rows])).mean())


def by_person(rows, right: np.ndarray) -> np.ndarray:
    """(persons,) each test person's share of right answers, persons in id order: the unit
    of the test (a person's sentences share one fact, so they are not independent draws);
    their mean is the accuracy, their sd / sqrt(n) its standard error."""
    persons = np.array([s.spans[0][2] for s, _ in rows])
    return np.array([right[persons == p].mean() for p in np.unique(persons)])


def frozen(array: np.ndarray):
    """A training callback that puts ``array`` back as it was after every step, so it stays
    as it is (the optimiser's update of it is undone)."""
    kept = array.copy()
    return lambda step, record: np.copyto(array, kept)


def run(budget: str = "quick", *, seed: int = 0, progress: bool = False, arms=tuple(VARIANTS)) -> dict:
    """-> {"rows": [{"model", "test accuracy", "test SE", "train accuracy"}], "arms": {arm:
    {"accuracy"}}, "items": {arm: {"accuracy": per-person shares}}, "floors": {"chance"},
    "transe hits@1", "test persons"}; ``arms`` runs only those arms (each is independent
    of the others given the seed, so arms may run as separate processes)."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    if not arms or not set(arms) <= set(VARIANTS):
        raise ValueError(f"arms must be some of {list(VARIANTS)}, got {arms!r}")
    chosen = arms
    b = BUDGETS[budget]
    kb = build_kb(n_persons=b["persons"], n_cities=b["cities"], n_countries=N_COUNTRIES, n_knows=0, seed=seed)
    rng = np.random.default_rng(seed)
    transe = TransE(kb.n_entities, len(kb.relations), dim=16, margin=1.0, norm=1, rng=rng)
    transe.fit(kb.triples, epochs=400, rng=rng)
    hits1 = float((transe.rank_tails(kb.triples) == 1).mean())
    sentences = corpus(kb, b["sentences"], seed=seed)
    task = country_task(kb, n_per_person=PER_PERSON, seed=seed)
    train_rows, test_rows = task["train"], task["test"]
    train_labels = np.array([y for _, y in train_rows])
    test_labels = np.array([y for _, y in test_rows])
    chance = float(np.bincount(test_labels, minlength=N_COUNTRIES).max() / len(test_rows))
    rows, arms, items = [], {}, {}
    for name in chosen:
        knowledge, masking, dea = VARIANTS[name]
        config = ErnieConfig(vocab_size=len(vocabulary(kb)), n_entities=kb.n_entities, n_classes=N_COUNTRIES,
                             n_text_layer=1, n_knowledge_layer=2, knowledge=knowledge)
        model = Ernie(config, rng=np.random.default_rng(100 + seed), entity_table=transe.params["entity"])
        phase = lambda steps: TrainConfig(steps=steps, lr=3e-3, min_lr=3e-4, warmup=steps // 10,
                                          weight_decay=0.01, eval_every=0, seed=seed, progress=progress)
        train(model, _batches(sentences, kb, masking, dea, 32), phase(b["pretrain"]))    # each phase on
        words = model.text.embeddings.word_embeddings.params["weight"]        # (V, C), as pre-training left them
        train(model, _batches([r for r, _ in train_rows], kb, "none", False, 32, train_labels),
              phase(b["finetune"]), callback=frozen(words))                   # a fresh schedule
        shares = by_person(test_rows, predictions(model, test_rows, kb) == test_labels)
        arms[name] = {"accuracy": float(shares.mean())}
        items[name] = {"accuracy": shares}
        rows.append({"model": name, "test accuracy": float(shares.mean()),
                     "test SE": float(shares.std(ddof=1) / np.sqrt(len(shares))),
                     "train accuracy": accuracy(model, train_rows, kb)})
    return {"rows": rows, "arms": arms, "items": items, "floors": {"chance": chance}, "chance": chance,
            "transe hits@1": hits1, "budget": budget, "test persons": len(shares)}
