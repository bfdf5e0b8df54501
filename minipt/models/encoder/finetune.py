"""Fine-tuning BERT (Devlin et al. 2019, section 4 and figure 4; feature-based transfer,
section 5.3): the pre-trained encoder (``bert.BertEncoder``) with one task head
(``nn/task_heads.py``), trained end to end, or with the encoder frozen.

- ``bert-classify`` (``BertForSequenceClassification``): ``[CLS] A [SEP]`` or
  ``[CLS] A [SEP] B [SEP]`` -> one of K classes from the pooled [CLS];
  L = mean over the batch of -log p(label).
- ``bert-tag`` (``BertForTokenClassification``): a tag per token (the first piece of
  each word, IGNORE elsewhere); L = mean over labelled tokens of -log p(tag).
- ``bert-qa`` (``BertForQuestionAnswering``): ``[CLS] question [SEP] context [SEP]``
  -> start and end logits over the context; L = (CE(start) + CE(end)) / 2.

``freeze_encoder=True`` is feature-based transfer: the encoder runs in eval mode (no
dropout: the features are fixed), the backward stops at the head, and the encoder's
parameters are kept out of weight decay, so AdamW leaves them exactly as they are (a
zero gradient gives a zero Adam step). Only the head learns (for classification the
pooler belongs to the head). ``load_pretrained`` copies a ``BertForPreTraining``'s
encoder (and its NSP-trained pooler, for classification).

Parameters (``encoder.*`` as in ``bert.py``; C d_model, K classes):

| name | shape | model |
|---|---|---|
| head.pooler.dense.weight, .bias | (C, C), (C,) | classify |
| head.classifier.weight, .bias | (K, C), (K,) | classify, tag |
| head.qa_outputs.weight, .bias | (2, C), (2,) | qa |

Bad input is refused by name: a label outside [0, K), a tag on padding, a batch with no
labelled token, an answer position outside the sequence, in padding or outside the
context, an end before its start; sequences longer than the encoder's maximum
(``BertEncoder.check_inputs``; ``tasks/bert_inputs.py`` states the truncation rule).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...core.module import Module
from ...nn.task_heads import SequenceClassifier, SpanClassifier, TokenClassifier
from ...ops.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ..protocol import IGNORE
from ..registry import ModelEntry, register
from .bert import (
    TINY,
    BertConfig,
    BertEncoder,
    BertForPreTraining,
    perturbed,
    tiny_batch,
)


def _integer_array(name: str, x) -> np.ndarray:
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.integer):
        raise TypeError(f"{name}: expected integers, got dtype {x.dtype}")
    return x


def _check_classes(name: str, labels: np.ndarray, n_classes: int, ignore: bool = False) -> None:
    counted = labels[labels != IGNORE] if ignore else labels
    bad = counted[(counted < 0) | (counted >= n_classes)]
    if bad.size:
        raise ValueError(f"{name}: class {int(bad[0])} is outside the {n_classes} classes [0, {n_classes})"
                         + (f" (IGNORE = {IGNORE} marks a position without a label)" if ignore else ""))


class BertFineTuned(Module):
    """What the three task models share: the encoder, freezing, the spec and loading."""
    has_backward = True
    head_settings: tuple[str, ...] = ()

    def __init__(self, config: BertConfig, *, rng: np.random.Generator, dtype=np.float32,
                 freeze_encoder: bool = False, name: str):
        super().__init__()
        self.name, self.config, self.freeze_encoder = name, config, bool(freeze_encoder)
        self.encoder = BertEncoder(config, rng, dtype)
        if self.freeze_encoder:
            for _, mod in self.encoder.named_modules():
                mod.no_weight_decay = True          # optim/adam.py: AdamW must not shrink frozen weights
            self.encoder.eval()
        self._cache = None

    # -- the model protocol ------------------------------------------------------------
    @property
    def block_size(self) -> int:
        return self.encoder.max_length

    def new_cache(self) -> None:
        return None

    def spec(self) -> dict:
        head = {k: getattr(self, k) for k in self.head_settings}
        return {"model": self.name, **head, "freeze_encoder": self.freeze_encoder, **self.config.to_dict()}

    def train(self, mode: bool = True) -> "BertFineTuned":
        super().train(mode)
        if self.freeze_encoder:
            self.encoder.eval()                     # frozen features: no dropout in the encoder
        return self

    # -- shared steps --------------------------------------------------------------------
    def encode(self, input_ids, token_type_ids=None, attention_mask=None) -> np.ndarray:
        return self.encoder(input_ids, token_type_ids, attention_mask)           # (B, T, C)

    def backward_encoder(self, dh: np.ndarray) -> None:
        if not self.freeze_encoder:
            self.encoder.backward(dh)

    def load_pretrained(self, pretrained: BertForPreTraining) -> "BertFineTuned":
        """Copy the pre-trained encoder (and pooler, where both have one) into this model."""
        if pretrained.config.to_dict() != self.config.to_dict():
            diff = {k: (v, self.config.to_dict()[k]) for k, v in pretrained.config.to_dict().items()
                    if self.config.to_dict()[k] != v}
            raise ValueError(f"load_pretrained: the encoders differ in {diff} (pre-trained, this model)")
        self.encoder.load_state_dict(pretrained.encoder.state_dict())
        own_pooler = getattr(getattr(self, "head", None), "pooler", None)
        if own_pooler is not None and pretrained.pooler is not None:
            own_pooler.load_state_dict(pretrained.pooler.state_dict())
        return self

    def _check_cache(self) -> None:
        if self._cache is None:
            raise RuntimeError("backward needs a forward with labels first")


class BertForSequenceClassification(BertFineTuned):
    """``loss, logits = model(input_ids, token_type_ids, attention_mask, labels)``; logits (B, K)."""
    head_settings = ("n_classes",)

    def __init__(self, config: BertConfig, *, rng: np.random.Generator, dtype=np.float32, n_classes: int = 2,
                 freeze_encoder: bool = False, name: str = "bert-classify"):
        super().__init__(config, rng=rng, dtype=dtype, freeze_encoder=freeze_encoder, name=name)
        if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes < 2:
            raise ValueError(f"n_classes must be an integer >= 2, got {n_classes!r}")
        self.n_classes = int(n_classes)
        self.head = SequenceClassifier(config.d_model, self.n_classes, rng=rng, dropout=config.dropout, dtype=dtype)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, labels=None):
        h = self.encode(input_ids, token_type_ids, attention_mask)               # (B, T, C)
        logits = self.head(h)                                                     # (B, K)
        loss = self._cache = None
        if labels is not None:
            labels = _integer_array("labels", labels)
            if labels.shape != (input_ids.shape[0],):
                raise ValueError(f"labels: expected shape ({input_ids.shape[0]},) (one class per sequence), "
                                 f"got {labels.shape}")
            _check_classes("labels", labels, self.n_classes)
            loss, self._cache = cross_entropy_forward(logits, labels)            # ()
        return loss, logits

    def backward(self, dloss: float = 1.0) -> None:
        self._check_cache()
        self.backward_encoder(self.head.backward(cross_entropy_backward(dloss, self._cache)))


class BertForTokenClassification(BertFineTuned):
    """``loss, logits = model(input_ids, token_type_ids, attention_mask, labels)``; labels
    (B, T) with IGNORE where no tag is predicted; logits (B, T, K)."""
    head_settings = ("n_classes",)

    def __init__(self, config: BertConfig, *, rng: np.random.Generator, dtype=np.float32, n_classes: int = 2,
                 freeze_encoder: bool = False, name: str = "bert-tag"):
        super().__init__(config, rng=rng, dtype=dtype, freeze_encoder=freeze_encoder, name=name)
        if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes < 2:
            raise ValueError(f"n_classes must be an integer >= 2, got {n_classes!r}")
        self.n_classes = int(n_classes)
        self.head = TokenClassifier(config.d_model, self.n_classes, rng=rng, dropout=config.dropout, dtype=dtype)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, labels=None):
        h = self.encode(input_ids, token_type_ids, attention_mask)               # (B, T, C)
        logits = self.head(h)                                                     # (B, T, K)
        loss = self._cache = None
        if labels is not None:
            labels = _integer_array("labels", labels)
            if labels.shape != input_ids.shape:
                raise ValueError(f"labels: expected shape {input_ids.shape} (a tag or IGNORE per token), "
                                 f"got {labels.shape}")
            _check_classes("labels", labels, self.n_classes, ignore=True)
            if attention_mask is not None:
                on_pad = np.argwhere((labels != IGNORE) & ~np.asarray(attention_mask).astype(bool))
                if len(on_pad):
                    raise ValueError(f"labels: position {tuple(int(i) for i in on_pad[0])} is padding "
                                     f"(attention_mask 0) but has tag {int(labels[tuple(on_pad[0])])}")
            if not np.any(labels != IGNORE):
                raise ValueError("labels: no tagged position in the batch (every label is IGNORE), "
                                 "so the loss is undefined")
            loss, self._cache = cross_entropy_forward(logits, labels)            # ()
        return loss, logits

    def backward(self, dloss: float = 1.0) -> None:
        self._check_cache()
        self.backward_encoder(self.head.backward(cross_entropy_backward(dloss, self._cache)))


class SpanOutput(NamedTuple):
    loss: np.ndarray | None      # () (CE(start) + CE(end)) / 2
    start_logits: np.ndarray     # (B, T), OUTSIDE off the context
    end_logits: np.ndarray       # (B, T)


class BertForQuestionAnswering(BertFineTuned):
    """``loss, logits = model(input_ids, token_type_ids, attention_mask, context_mask,
    start_positions, end_positions)``: logits (B, 2, T) = [start; end]. ``context_mask``
    (B, T) marks the tokens an answer may cover (default: every real token)."""

    def __init__(self, config: BertConfig, *, rng: np.random.Generator, dtype=np.float32,
                 freeze_encoder: bool = False, name: str = "bert-qa"):
        super().__init__(config, rng=rng, dtype=dtype, freeze_encoder=freeze_encoder, name=name)
        self.head = SpanClassifier(config.d_model, rng=rng, dtype=dtype)

    def outputs(self, input_ids, token_type_ids=None, attention_mask=None, context_mask=None,
                start_positions=None, end_positions=None) -> SpanOutput:
        h = self.encode(input_ids, token_type_ids, attention_mask)               # (B, T, C)
        real = np.ones(input_ids.shape, bool) if attention_mask is None else np.asarray(attention_mask).astype(bool)
        if context_mask is None:
            context = real
        else:
            context = np.asarray(context_mask)
            if context.shape != input_ids.shape or not np.isin(context, (0, 1)).all():
                raise ValueError(f"context_mask: expected 0/1 of shape {input_ids.shape}, got shape {context.shape}")
            context = context.astype(bool)
            if (context & ~real).any():
                raise ValueError(f"context_mask: position {tuple(int(i) for i in np.argwhere(context & ~real)[0])} "
                                 "is marked context but is padding")
            if not context.any(axis=1).all():
                raise ValueError(f"context_mask: rows {np.flatnonzero(~context.any(axis=1)).tolist()} have no context")
        start, end = self.head(h, context)                                        # (B, T) each
        loss = self._cache = None
        if (start_positions is None) != (end_positions is None):
            raise ValueError("give both start_positions and end_positions, or neither")
        if start_positions is not None:
            s = self._check_positions("start_positions", start_positions, context, real)
            e = self._check_positions("end_positions", end_positions, context, real)
            before = np.flatnonzero(e < s)
            if before.size:
                b = int(before[0])
                raise ValueError(f"end_positions: row {b} ends at {int(e[b])}, before its start {int(s[b])}")
            ls, cs = cross_entropy_forward(start, s)                              # ()
            le, ce = cross_entropy_forward(end, e)                                # ()
            loss = (ls + le) / 2
            self._cache = (cs, ce)
        return SpanOutput(loss, start, end)

    @staticmethod
    def _check_positions(name: str, pos, context: np.ndarray, real: np.ndarray) -> np.ndarray:
        pos = _integer_array(name, pos)
        B, T = context.shape
        if pos.shape != (B,):
            raise ValueError(f"{name}: expected shape ({B},) (one position per sequence), got {pos.shape}")
        for b, p in enumerate(pos.tolist()):
            if not 0 <= p < T:
                raise ValueError(f"{name}: row {b} points at {p}, outside the sequence of {T} tokens")
            if not real[b, p]:
                raise ValueError(f"{name}: row {b} points at {p}, which is padding")
            if not context[b, p]:
                raise ValueError(f"{name}: row {b} points at {p}, outside the context (the question or a "
                                 "special token)")
        return pos

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, context_mask=None,
                start_positions=None, end_positions=None):
        out = self.outputs(input_ids, token_type_ids, attention_mask, context_mask, start_positions, end_positions)
        return out.loss, np.stack([out.start_logits, out.end_logits], axis=1)    # (B, 2, T)

    def backward(self, dloss: float = 1.0) -> None:
        self._check_cache()
        cs, ce = self._cache
        half = float(dloss) / 2
        dh = self.head.backward(cross_entropy_backward(half, cs), cross_entropy_backward(half, ce))   # (B, T, C)
        self.backward_encoder(dh)


def best_spans(start_logits: np.ndarray, end_logits: np.ndarray, max_answer: int = 30) -> np.ndarray:
    """The (start, end) per row maximising start_i + end_j with i <= j < i + max_answer
    (BERT, section 4.2) -> (B, 2) token positions."""
    B, T = start_logits.shape
    score = start_logits[:, :, None] + end_logits[:, None, :]                    # (B, T, T) [i, j]
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    allowed = (j >= i) & (j < i + max_answer)                                     # (T, T)
    flat = np.where(allowed, score, -np.inf).reshape(B, -1).argmax(axis=1)       # (B,)
    return np.stack([flat // T, flat % T], axis=1)                               # (B, 2)


# -- registry entries ------------------------------------------------------------------------
MODELS = {"bert-classify": BertForSequenceClassification, "bert-tag": BertForTokenClassification,
          "bert-qa": BertForQuestionAnswering}


def _builder(name: str):
    cls = MODELS[name]

    def build(*, rng: np.random.Generator, dtype=np.float32, freeze_encoder: bool = False, **settings):
        head = {k: settings.pop(k) for k in cls.head_settings if k in settings}
        return cls(BertConfig(**settings), rng=rng, dtype=dtype, freeze_encoder=freeze_encoder, name=name, **head)
    return build


def tiny_task_batch(name: str) -> tuple:
    """The pairs of ``bert.tiny_batch`` with labels for each task."""
    ids, segments, mask, _, _ = tiny_batch()
    if name == "bert-classify":
        return ids, segments, mask, np.array([2, 0])
    if name == "bert-tag":
        tags = np.array([[IGNORE, 0, 1, IGNORE, 2, 1, IGNORE], [IGNORE, 2, IGNORE, 0, IGNORE, IGNORE, IGNORE]])
        return ids, segments, mask, tags
    context = (segments == 1) & (mask == 1) & (ids != 2)                         # segment B without [SEP]
    return ids, segments, mask, context.astype(np.int64), np.array([4, 3]), np.array([5, 3])


def _tiny(name: str):
    def tiny():
        extra = {"n_classes": 3} if name != "bert-qa" else {}
        model = _builder(name)(rng=np.random.default_rng(0), dtype=np.float64, **TINY, **extra)
        return perturbed(model), tiny_task_batch(name)
    return tiny


_TITLES = {"bert-classify": ("BERT classifier", "sequence classification on [CLS] (single or pair)"),
           "bert-tag": ("BERT tagger", "per-token classification"),
           "bert-qa": ("BERT span QA", "start/end cross-entropy over the context")}
# A softmax over positions ignores what shifts every position's score alike: the last
# LayerNorm's bias (added to every h_t) and the span head's bias. Their true gradient is 0.
_INVARIANT = {"bert-qa": (f"encoder.stack.blocks.{TINY['n_layer'] - 1}.ln_2.bias", "head.qa_outputs.bias")}
for _name, (_title, _objective) in _TITLES.items():
    register(ModelEntry(
        name=_name, title=_title, paper="Devlin et al. 2019, BERT: Pre-training of Deep Bidirectional "
        "Transformers for Language Understanding (section 4)", objective=_objective, build=_builder(_name),
        tiny=_tiny(_name), lesson="17_fine_tuning", language_model=False,
        no_preset="a head on a pre-trained BERT: lesson 17 and `minipt experiment fine-tuning` train it",
        invariant=_INVARIANT.get(_name, ())))
