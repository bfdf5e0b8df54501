"""GPT-1 fine-tuning: a linear head on the extract token, with the auxiliary LM loss.

Radford et al. 2018, section 3.2: the final hidden state h_l^m of the last input token
(the extract token ``<e>``) goes through an added linear layer W_y,
P(y | x) = softmax(h_l^m W_y), and the fine-tuning objective keeps language modelling
as an auxiliary loss, L3 = L2 (task) + lambda * L1 (LM on the same inputs), lambda = 0.5.

Two heads, after the paper's transformations (``gpt1_inputs``):
- ``mode="classify"``: h (B, K, C) summed over the K sequences (K = 2 for similarity,
  1 otherwise) -> logits (B, n_classes);
- ``mode="choice"``: one score per sequence, W_y of shape (1, C) -> logits (B, K),
  softmaxed across the K answers.

Registry entry ``gpt1-finetune`` (a task model: no ``log_prob`` over a stream).

Parameters: those of the GPT-1 body under ``gpt.`` (``gpt.py``), and

| name | shape | note |
|---|---|---|
| head.weight | (n_classes, C) or (1, C) | W_y: class scores, or one score per answer |
| head.bias | (n_classes,) | classify mode only |
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...core.module import Module, eval_mode
from ...nn.linear import Linear
from ...ops.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ...ops.linear import linear_forward
from ..registry import GradcheckCase, ModelEntry, register
from .gpt import GPT, TINY, GPTConfig, perturbed

MODES = ("classify", "choice")


class _HeadCache(NamedTuple):
    h_shape: tuple                  # (BK, T, C)
    rows: np.ndarray                # (BK,) row index of each sequence
    extract: np.ndarray             # (BK,) position of its <e> token
    K: int                          # sequences per example
    task: tuple | None              # the task cross-entropy's cache
    lm: tuple | None                # (linear cache, cross-entropy cache) of the auxiliary LM loss


class GPT1Finetune(Module):
    has_backward = True

    def __init__(self, gpt: GPT, *, n_classes: int = 2, mode: str = "classify", lm_weight: float = 0.5,
                 rng: np.random.Generator):
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if lm_weight < 0:
            raise ValueError(f"lm_weight must be >= 0, got {lm_weight}")
        self.gpt, self.mode, self.lm_weight = gpt, mode, float(lm_weight)
        d = gpt.config.d_model
        # a bias on the choice score would add the same number to every answer: softmax
        # across answers ignores it (its gradient is exactly 0), so that head has none
        self.head = Linear(d, n_classes if mode == "classify" else 1, bias=mode == "classify", rng=rng,
                           std=0.02, dtype=gpt.wte.params["weight"].dtype)
        self._cache = None

    @property
    def block_size(self) -> int:
        return self.gpt.block_size

    def new_cache(self) -> None:
        return None

    def spec(self) -> dict:
        return {"model": "gpt1-finetune", "gpt": self.gpt.spec(), "n_classes": self.head.params["weight"].shape[0]
                if self.mode == "classify" else 2, "mode": self.mode, "lm_weight": self.lm_weight}

    def log_prob(self, idx, targets):
        raise NotImplementedError("GPT1Finetune is a task model: score text with its GPT body (model.gpt.log_prob)")

    def forward(self, idx: np.ndarray, extract: np.ndarray, lm_targets: np.ndarray | None = None,
                labels: np.ndarray | None = None):
        """idx (B, K, T), extract (B, K) [, lm_targets (B, K, T), labels (B,)] ->
        (L2 + lambda L1, or None without labels), task logits (B, n_classes) or (B, K)."""
        if idx.ndim != 3 or extract.shape != idx.shape[:2]:
            raise ValueError(f"expected idx (B, K, T) and extract (B, K), got {idx.shape} and {extract.shape}")
        B, K, T = idx.shape
        if extract.min() < 0 or extract.max() >= T:
            raise ValueError(f"extract positions must lie in [0, {T}), got {extract.min()}..{extract.max()}")
        h = self.gpt.hidden(idx.reshape(B * K, T))              # (BK, T, C)
        rows = np.arange(B * K)
        h_e = h[rows, extract.reshape(-1)]                      # (BK, C): the <e> states
        if self.mode == "classify":
            logits = self.head(h_e.reshape(B, K, -1).sum(1))     # (B, n_classes)
        else:
            logits = self.head(h_e).reshape(B, K)               # (B, K): one score per answer
        task = lm = None
        loss = None
        if labels is not None:
            loss, task = cross_entropy_forward(logits, labels)
        if labels is not None and lm_targets is not None and self.lm_weight > 0:
            w, _ = self.gpt.head_weight()
            lm_logits, lin = linear_forward(h, w, None)         # (BK, T, V)
            lm_loss, ce = cross_entropy_forward(lm_logits, lm_targets.reshape(B * K, T))
            loss = loss + self.lm_weight * lm_loss
            lm = (lin, ce)
        self._cache = _HeadCache(h.shape, rows, extract.reshape(-1), K, task, lm)
        return loss, logits

    def backward(self, dloss: float = 1.0) -> None:
        h_shape, rows, ext, K, task, lm = self._cache      # a _HeadCache
        if task is None:
            raise RuntimeError("backward needs a forward with labels")
        dlogits = cross_entropy_backward(dloss, task)           # (B, n) or (B, K)
        if self.mode == "classify":
            dz = self.head.backward(dlogits)                    # (B, C)
            dh_e = np.repeat(dz[:, None, :], K, axis=1).reshape(-1, h_shape[-1])   # (BK, C)
        else:
            dh_e = self.head.backward(dlogits.reshape(-1, 1))   # (BK, C)
        dh = np.zeros(h_shape, dtype=dh_e.dtype)                # (BK, T, C)
        dh[rows, ext] += dh_e
        if lm is not None:
            lin, ce = lm
            dh += self.gpt.backward_head(cross_entropy_backward(dloss * self.lm_weight, ce), lin)
        self.gpt.backward_hidden(dh)

    def predict(self, idx: np.ndarray, extract: np.ndarray) -> np.ndarray:
        """Predicted class (or answer index) per example, in eval mode."""
        with eval_mode(self):
            _, logits = self.forward(idx, extract)
        return logits.argmax(-1)


def split_correct(model: GPT1Finetune, batches, split: str = "test") -> np.ndarray:
    """1 where an example of ``split`` is classified right, else 0, in order (N,)
    (``batches``: a ``gpt1_inputs.TaskBatches``)."""
    right = [model.predict(b.idx, b.extract) == b.labels for b in batches.all_batches(split)]
    if not right or not sum(len(r) for r in right):
        raise ValueError(f"the {split} split is empty")
    return np.concatenate(right).astype(np.float64)


def split_accuracy(model: GPT1Finetune, batches, split: str = "test") -> float:
    """Fraction of ``split`` classified right."""
    return float(split_correct(model, batches, split).mean())


def _build(*, rng, dtype=np.float32, gpt: dict, n_classes: int = 2, mode: str = "classify", lm_weight: float = 0.5):
    from ..registry import build
    body = build(gpt, rng=rng, dtype=dtype)
    return GPT1Finetune(body, n_classes=n_classes, mode=mode, lm_weight=lm_weight, rng=rng)


def _tiny(kind: str = "entailment", mode: str = "classify"):
    """A float64 GPT-1 with a head and one batch of toy ``kind`` examples."""
    from ...data import toy_tasks
    from ...data.toy_words import word_tokenizer
    from ...tasks.gpt1_inputs import make_batch
    tok = word_tokenizer()
    make = {"entailment": toy_tasks.entailment, "multiple_choice": toy_tasks.multiple_choice}[kind]
    batch = make_batch(kind, make((2, 0, 0), seed=0).train, tok, block_size=40)
    spec = {"model": "gpt1", **GPTConfig.gpt1(**{**TINY, "vocab_size": tok.vocab_size, "block_size": 40}).to_dict()}
    model = _build(rng=np.random.default_rng(1), dtype=np.float64, gpt=spec, mode=mode)
    return perturbed(model), batch.as_tuple()


def _check_choice():
    from ...core.gradcheck import check_module
    model, batch = _tiny("multiple_choice", "choice")
    return check_module(model, *batch, select=lambda out: out[0], max_checks=8)


register(ModelEntry(
    name="gpt1-finetune", title="GPT-1 fine-tuning heads", paper="Radford et al. 2018, section 3.2",
    objective="task loss + 0.5 LM", build=_build, tiny=_tiny, lesson="10_gpt_finetune", language_model=False,
    no_preset="task heads on a pre-trained GPT-1: lesson 10 fine-tunes them on the toy tasks",
    gradchecks=(GradcheckCase("GPT-1 choice head", "4 answers softmaxed, aux LM 0.5", _check_choice),)))
