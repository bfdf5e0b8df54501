"""ERNIE (Tsinghua): a BERT whose upper layers fuse knowledge-graph entity embeddings
into the token states (Zhang, Han, Liu, Jiang, Sun & Liu 2019, "ERNIE: Enhanced Language
Representation with Informative Entities").

- T-Encoder: N ordinary BERT layers over the text (``BertEncoder``);
- K-Encoder: M aggregators (``aggregator.py``), each fusing the mentioned entities'
  embeddings into the tokens their mentions start at. The entity embeddings come from
  TransE trained on the graph (``transe.py``) and stay fixed, as in the paper: they are
  ``entity_table`` (E, K), data rather than a parameter;
- pre-training: MLM (the head tied to the token embedding) plus the denoising entity
  auto-encoder (dEA): each aligned token predicts its entity from its output state,
  p(e | w) = softmax(W_d w^o . E^T). The paper scores the entities of the same
  sequence; the toy graph is small, so here every entity of the graph competes, which
  is the harder task;
- fine-tuning: a classifier on the pooled [CLS] state (``n_classes`` > 0).

``knowledge=False`` switches the K-Encoder's entity inputs off (every alignment masked),
so the same class is the plain-BERT baseline with the same parameter count.

| parameter | shape | what |
|---|---|---|
| text.* | as BertEncoder (``models/encoder/bert.py``) | T-Encoder, N layers |
| knowledge.i.* | as Aggregator (``aggregator.py``) | K-Encoder layer i |
| mlm.* | as MLMHead, decoder tied to text.embeddings.word_embeddings | MLM |
| dea.weight, .bias | (K, C), (K,) | W_d of the entity prediction |
| pooler.dense.*, classifier.* | (C, C), (n_classes, C) | fine-tuning (n_classes > 0) |
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ...core.checks import check_positive_int
from ...core.module import Module
from ...nn.heads import MLMHead, Pooler
from ...nn.linear import Linear
from ...ops.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ..encoder.bert import BertConfig, BertEncoder
from ..protocol import IGNORE
from ..registry import ModelEntry, Preset, register
from .aggregator import Aggregator


@dataclass
class ErnieConfig:
    vocab_size: int = 64
    n_entities: int = 36
    max_position: int = 16
    d_model: int = 32
    d_entity: int = 16
    d_ff: int = 64
    d_fusion: int = 32
    n_head: int = 4
    n_entity_head: int = 2
    n_text_layer: int = 1          # N
    n_knowledge_layer: int = 1     # M
    n_classes: int = 0
    knowledge: bool = True
    dropout: float = 0.0
    eps: float = 1e-12

    def __post_init__(self) -> None:
        for name in ("vocab_size", "n_entities", "d_entity", "d_fusion", "n_entity_head", "n_text_layer",
                     "n_knowledge_layer"):
            check_positive_int(name, getattr(self, name))
        check_positive_int("n_classes", self.n_classes, minimum=0)

    def bert(self) -> BertConfig:
        return BertConfig(vocab_size=self.vocab_size, max_position=self.max_position, type_vocab_size=1,
                          n_layer=self.n_text_layer, n_head=self.n_head, d_model=self.d_model, d_ff=self.d_ff,
                          dropout=self.dropout, eps=self.eps, nsp=False)


class Ernie(Module):
    has_backward = True

    def __init__(self, config: ErnieConfig, *, rng: np.random.Generator, dtype=np.float32,
                 entity_table: np.ndarray | None = None):
        super().__init__()
        c = self.config = config
        self.text = BertEncoder(c.bert(), rng, dtype)
        self.knowledge = [Aggregator(c.d_model, c.d_entity, c.n_head, c.n_entity_head, c.d_fusion, rng=rng,
                                     eps=c.eps, dtype=dtype) for _ in range(c.n_knowledge_layer)]
        self.mlm = MLMHead(c.d_model, c.vocab_size, rng=rng, tied_to=self.text.embeddings.word_embeddings,
                           eps=c.eps, dtype=dtype)
        self.dea = Linear(c.d_model, c.d_entity, rng=rng, dtype=dtype)
        if c.n_classes:
            self.pooler = Pooler(c.d_model, rng=rng, dtype=dtype)
            self.classifier = Linear(c.d_model, c.n_classes, rng=rng, dtype=dtype)
        if entity_table is None:
            entity_table = rng.normal(0, 1 / np.sqrt(c.d_entity), (c.n_entities, c.d_entity))
        self.set_entity_table(entity_table)
        self._cache = None

    def set_entity_table(self, table: np.ndarray) -> None:
        """The fixed entity embeddings (E, K), e.g. ``TransE.params["entity"]``."""
        table = np.asarray(table)
        if table.shape != (self.config.n_entities, self.config.d_entity):
            raise ValueError(f"entity_table: expected ({self.config.n_entities}, {self.config.d_entity}), "
                             f"got {table.shape}")
        self.entity_table = table.astype(self.dtype, copy=True)            # (E, K)

    def state_dict(self) -> dict[str, np.ndarray]:
        """The parameters and the fixed entity table: a checkpoint restores both."""
        return {**super().state_dict(), "entity_table": self.entity_table.copy()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        state = dict(state)
        if "entity_table" not in state:
            raise KeyError("ERNIE's state needs 'entity_table' (E, K), the fixed entity embeddings")
        table = np.asarray(state.pop("entity_table"))
        if table.shape != self.entity_table.shape:
            raise ValueError(f"entity_table: model has {self.entity_table.shape}, state dict has {table.shape}")
        super().load_state_dict(state)
        self.set_entity_table(table)

    @property
    def block_size(self) -> int:
        return self.text.max_length

    def new_cache(self) -> None:
        return None

    def spec(self) -> dict:
        return {"model": "ernie", **asdict(self.config)}

    def encode(self, ids, token_mask, entities, positions, entity_mask) -> tuple[np.ndarray, np.ndarray]:
        """-> the K-Encoder's outputs: tokens (B, T, C), entities (B, M, K). With
        ``knowledge=False`` every alignment is off (the plain-BERT baseline)."""
        emask = np.asarray(entity_mask) if self.config.knowledge else np.zeros(np.shape(entities))
        w = self.text(ids, None, token_mask)                               # (B, T, C)
        e = self.entity_table[entities]                                    # (B, M, K)
        for layer in self.knowledge:
            w, e = layer(w, e, positions, emask, token_mask)               # (B, T, C), (B, M, K)
        return w, e

    def forward(self, ids, token_mask, entities, positions, entity_mask, mlm_labels=None, entity_labels=None,
                labels=None):
        """A ``KnowledgeBatch`` (``objectives/entity_autoencoder.py``) [+ labels (B,)] ->
        loss () = the sum of the parts with targets (MLM, dEA, classification), MLM logits (B, T, V)."""
        B, T = ids.shape
        entities = np.asarray(entities)
        if entities.shape != np.shape(positions) or entities.shape != np.shape(entity_mask) or len(entities) != B:
            raise ValueError(f"entities {entities.shape}, positions {np.shape(positions)} and entity_mask "
                             f"{np.shape(entity_mask)} must all be (B={B}, M)")
        if entities.size and (entities.min() < 0 or entities.max() >= self.config.n_entities):
            raise IndexError(f"entity ids must lie in [0, {self.config.n_entities}), got "
                             f"{entities.min()}..{entities.max()}")
        w, e = self.encode(ids, token_mask, entities, positions, entity_mask)
        logits = self.mlm(w)                                               # (B, T, V)
        parts, caches = [], {}
        if mlm_labels is not None and (np.asarray(mlm_labels) != IGNORE).any():
            loss, caches["mlm"] = cross_entropy_forward(logits, np.asarray(mlm_labels))
            parts.append(loss)
        if entity_labels is not None and (np.asarray(entity_labels) != IGNORE).any():
            scores = self.dea(w) @ self.entity_table.T                     # (B, T, K) -> (B, T, E)
            loss, caches["dea"] = cross_entropy_forward(scores, np.asarray(entity_labels))
            parts.append(loss)
        if labels is not None:
            if not self.config.n_classes:
                raise ValueError("labels were given but this ERNIE has no classifier (n_classes is 0)")
            labels = np.asarray(labels)
            if labels.shape != (B,) or labels.min() < 0 or labels.max() >= self.config.n_classes:
                raise ValueError(f"labels: expected (B={B},) class ids in [0, {self.config.n_classes}), got "
                                 f"shape {labels.shape} values {np.unique(labels).tolist()[:5]}")
            class_logits = self.classifier(self.pooler(w))                 # (B, n_classes)
            loss, caches["cls"] = cross_entropy_forward(class_logits, labels)
            parts.append(loss)
            self.last_class_logits = class_logits
        if not parts:
            raise ValueError("no targets in the batch: give mlm_labels, entity_labels or labels")
        self._cache = (caches, w.shape, e.shape, w.dtype)
        return sum(parts[1:], parts[0]), logits

    def backward(self, dloss: float = 1.0) -> None:
        caches, shape, e_shape, dtype = self._cache
        dw = np.zeros(shape, dtype)                                        # (B, T, C)
        if "mlm" in caches:
            dw += self.mlm.backward(cross_entropy_backward(dloss, caches["mlm"]))
        if "dea" in caches:
            dw += self.dea.backward(cross_entropy_backward(dloss, caches["dea"]) @ self.entity_table)   # (B, T, K)
        if "cls" in caches:
            dw += self.pooler.backward(self.classifier.backward(cross_entropy_backward(dloss, caches["cls"])))
        de = np.zeros(e_shape, dtype)                                      # (B, M, K): no loss reads e^o
        for layer in reversed(self.knowledge):
            dw, de = layer.backward(dw, de)
        self.text.backward(dw)                                             # the entity table is fixed


# -- registry entry -------------------------------------------------------------------
def build(*, rng: np.random.Generator, dtype=np.float32, **settings) -> Ernie:
    return Ernie(ErnieConfig(**settings), rng=rng, dtype=dtype)


def tiny() -> tuple[Ernie, tuple]:
    """Float64, two aggregators (so the entity outputs of the first reach the loss), a graph
    of 8 entities, two sentences with MLM, dEA and class targets."""
    from ...data.toy_kb import build_kb, corpus
    from ...objectives.entity_autoencoder import make_batch, vocabulary
    kb = build_kb(n_persons=4, n_cities=2, n_countries=2, n_knows=1, seed=0)
    rng = np.random.default_rng(0)
    model = Ernie(ErnieConfig(vocab_size=len(vocabulary(kb)), n_entities=kb.n_entities, max_position=8, d_model=8,
                              d_entity=4, d_ff=12, d_fusion=6, n_head=2, n_entity_head=2, n_knowledge_layer=2,
                              n_classes=2),
                  rng=rng, dtype=np.float64)
    for _, p in model.named_parameters():
        p[...] += rng.normal(0, 0.3, p.shape)
    batch = make_batch(corpus(kb, 2, seed=3, p_fact=0.5), kb, rng, mask_prob=0.3, dea=True)
    return model, (*batch, np.array([0, 1]))

register(ModelEntry(
    name="ernie", title="ERNIE (Tsinghua)", paper="Zhang et al. 2019, ERNIE: Enhanced Language Representation "
    "with Informative Entities", objective="MLM + denoising entity auto-encoder", build=build, tiny=tiny,
    lesson="25_knowledge", language_model=False, recipe="minipt.recipes.knowledge.recipe",
    presets={"toy": Preset(model=dict(d_model=32, d_entity=16, n_text_layer=1, n_knowledge_layer=2),
                           train=dict(steps=800, lr=3e-3, min_lr=3e-4, warmup=80, weight_decay=0.01, eval_every=0),
                           batch_size=32, data=dict(graph=dict(n_persons=64, n_cities=12, n_countries=4),
                                                    transe_epochs=400, sentences=8000, finetune_steps=300),
                           expected="masked-word accuracy 0.668, entity prediction (dEA) 0.962, country of held-out persons 0.600 (4 countries); 35 s (busy machine)")}))
