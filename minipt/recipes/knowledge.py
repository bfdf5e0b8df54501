"""Recipes behind ``minipt train ernie``, ``minipt train visualbert`` and ``minipt train
vilbert``: pre-training on generated data with known truth (nothing downloaded), then a
report measured against that truth.

- ``ernie``: TransE on the toy knowledge graph (``data/toy_kb.py``), then ERNIE
  pre-trained (MLM + dEA) on sentences that mention the graph's entities; reported: the
  masked-word and entity-prediction accuracy on held-out sentences, then the country of
  held-out persons after a short fine-tuning (``experiments/knowledge.py``).
- ``visualbert`` / ``vilbert``: pre-training on caption-scene pairs (MLM, MRC + MRFR,
  ITM; ``data/toy_scenes.py``); reported: image-text matching accuracy, masked-region
  category accuracy and masked-word accuracy on held-out pairs.

The run folder holds ``run.json`` (preset, steps, seed: a ``--resume`` takes them from
here, and refuses others), ``checkpoint.npz``, ``metrics.jsonl``, ``loss.png`` and
``report.json``. On Ctrl-C the checkpoint is saved and the report says how to continue;
the held-out evaluation runs only on a finished run. ``--corpus`` does not apply (the
data must come with its truth).
"""
from __future__ import annotations

import numpy as np

from ..core.module import eval_mode
from ..objectives.common import IGNORE
from ..train import TrainConfig, train
from .run_folder import train_generated


def _accuracy(logits: np.ndarray, targets: np.ndarray) -> float:
    keep = targets != IGNORE
    return float((logits.argmax(-1)[keep] == targets[keep]).mean()) if keep.any() else float("nan")


def _ernie(entry, p, seed):
    from ..data.toy_kb import build_kb, corpus, country_task
    from ..experiments.knowledge import _batches, accuracy
    from ..models.knowledge.transe import TransE
    from ..objectives.entity_autoencoder import make_batch, vocabulary
    kb = build_kb(**p.data["graph"], seed=seed)
    rng = np.random.default_rng(seed)
    transe = TransE(kb.n_entities, len(kb.relations), dim=p.model["d_entity"], rng=rng)
    transe.fit(kb.triples, epochs=p.data["transe_epochs"], rng=rng)
    model = entry.build(rng=np.random.default_rng(seed), vocab_size=len(vocabulary(kb)), n_entities=kb.n_entities,
                        n_classes=len(kb.ids("country")), **p.model)
    model.set_entity_table(transe.params["entity"])
    sentences = corpus(kb, p.data["sentences"], seed=seed)

    def evaluate(model) -> tuple[list[str], dict]:
        held = make_batch(corpus(kb, 500, seed=seed + 1000), kb, np.random.default_rng(seed + 1), dea=True)
        with eval_mode(model):
            _, logits = model(*held)
            w_scores = model.dea(model.encode(*held[:5])[0]) @ model.entity_table.T
        task = country_task(kb, n_per_person=8, seed=seed)
        fine = TrainConfig(steps=p.data["finetune_steps"], lr=1e-3, min_lr=1e-4, warmup=p.data["finetune_steps"] // 10,
                           weight_decay=0.01, eval_every=0, seed=seed, progress=False)
        labels = np.array([y for _, y in task["train"]])
        train(model, _batches([s for s, _ in task["train"]], kb, "none", False, 32, labels), fine)
        found = {"masked-word accuracy": _accuracy(logits, held.mlm_labels),
                 "entity-prediction accuracy (dEA)": _accuracy(w_scores, held.entity_labels),
                 "country of held-out persons": accuracy(model, task["test"], kb)}
        return [f"{k} {v:.3f}" for k, v in found.items()], found

    return model, _batches(sentences, kb, "token", True, p.batch_size), evaluate, \
        f"toy graph of {kb.n_entities} entities (TransE hits@1 {np.mean(transe.rank_tails(kb.triples[kb.triples[:, 1] < 2]) == 1):.2f})"


def _vision_language(entry, p, seed):
    from ..data import toy_scenes as ts
    from ..objectives.vision_language import make_batch, vocabulary
    model = entry.build(rng=np.random.default_rng(seed), vocab_size=len(vocabulary()), **p.model)
    pairs = ts.matching_pairs(p.data["pairs"], seed=seed)

    def get(split, rng):
        return make_batch([pairs[i] for i in rng.integers(0, len(pairs), p.batch_size)], rng, dtype=np.float32)

    def evaluate(model) -> tuple[list[str], dict]:
        held = make_batch(ts.matching_pairs(1000, seed=seed + 1000), np.random.default_rng(seed + 1),
                          dtype=np.float32)
        with eval_mode(model):
            _, logits = model(*held)
            h_text, h_regions = model.encode(*held[:5])
            region_logits = model.heads.mrc(h_regions)
        found = {"image-text matching accuracy": float((model.heads.scores["itm"].argmax(1) == held.itm_labels).mean()),
                 "masked-region category accuracy": _accuracy(region_logits, held.region_labels),
                 "masked-word accuracy": _accuracy(logits, held.mlm_labels)}
        return [f"{k} {v:.3f}" for k, v in found.items()], found

    return model, get, evaluate, f"{p.data['pairs']} generated caption-scene pairs (half mismatched)"


def recipe(entry, preset: str | None = None, **options) -> dict:
    make = _ernie if entry.name == "ernie" else _vision_language
    return train_generated(entry, lambda e, p, seed, steps: make(e, p, seed), preset,
                           why_no_corpus="trains on generated data with known truth", **options)
