"""The one contract every minipt language model meets, from a count-based n-gram to T5.

makemore's lesson (Karpathy): when every rung of the ladder answers the same calls, one
training loop, one evaluator and one sampler serve all of them, and the ideas that
differ stand out because nothing else does. A minipt model answers:

``loss, logits = model(*batch)``
    The forward pass. ``batch`` is whatever the model's objective makes (``idx, targets``
    for a causal LM; ids, segments and MLM targets for BERT; source and target for T5).
    ``loss`` is the mean cross-entropy over the predicted positions (a float array of
    shape ()), ``logits`` the scores (B, T, V). Targets equal to ``IGNORE`` (-100) are
    not predicted and do not count.
``model.backward(dloss=1.0)``
    Back-propagates ``dloss`` (the gradient of the final objective with respect to
    ``loss``) through the last forward and *adds* into every parameter's gradient. It
    returns None: gradients of extra inputs are never stored on attributes. A model
    without gradients (the n-gram, whose parameters are counts) sets
    ``has_backward = False`` and its ``backward`` raises ``NotImplementedError``.
``model.block_size``
    The longest sequence the model reads at once, or None where it is unbounded (an
    n-gram reads its last n-1 tokens of any stream; an LSTM carries its state).
``model.new_cache()``
    An empty incremental-decoding state (a ``KVCache`` for Transformers, a hidden state
    for an LSTM) that ``forward(..., cache=cache)`` extends, or None when the model has
    none: decoding then re-reads the window each step.
``model.log_prob(idx, targets)``
    The total log-probability in nats of ``targets`` given ``idx``, in eval mode:
    ``-loss * (number of targets not IGNORE)`` of the same batch. Perplexity and
    bits per token come from it (``minipt.inference.scoring.stream_loss``).
    Models that are not language models (word vectors, task heads; ``language_model=False``
    in their registry entry) answer every call but this one.
``model.spec()``
    A JSON-able dict from which the registry rebuilds the same architecture
    (``registry.build(spec)``): ``{"model": <registry name>, ...constructor
    settings}``. Checkpoints store it, so a run can be loaded without knowing its class.

Shared code (``train.py``, ``inference/``, the CLI, the gradcheck suite) asks the model
only these questions, never ``model.config.<field>``. ``check_protocol`` says, by name,
what a model is missing.
"""
from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

IGNORE = -100            # a target that is not predicted (padding, unmasked positions)


@runtime_checkable
class LanguageModel(Protocol):
    has_backward: bool
    block_size: int | None

    def __call__(self, *batch: Any, **kwargs: Any) -> tuple[np.ndarray | None, np.ndarray]: ...

    def backward(self, dloss: float = 1.0) -> None: ...

    def new_cache(self) -> Any: ...

    def log_prob(self, idx: np.ndarray, targets: np.ndarray) -> float: ...

    def spec(self) -> dict: ...


REQUIRED = ("has_backward", "block_size", "backward", "new_cache", "log_prob", "spec", "train", "eval")


def check_protocol(model: object, *, language_model: bool = True) -> None:
    """Raise TypeError naming every part of the protocol ``model`` lacks (``log_prob``
    only for language models)."""
    missing = [name for name in REQUIRED if not hasattr(model, name) and (language_model or name != "log_prob")]
    if not callable(model):
        missing.insert(0, "__call__")
    if missing:
        raise TypeError(f"{type(model).__name__} does not meet the model protocol "
                        f"(minipt/models/protocol.py): missing {', '.join(missing)}")


def log_prob_from_loss(model, idx: np.ndarray, targets: np.ndarray) -> float:
    """``model.log_prob`` for a model whose loss is the mean cross-entropy over the
    targets that are not IGNORE: -loss * their count, from an eval-mode forward."""
    from ..core.module import eval_mode
    with eval_mode(model):
        loss, _ = model.forward(idx, targets)
    return -float(loss) * int(np.sum(targets != IGNORE))


def no_backward(model: object) -> None:
    """The ``backward`` of a model whose parameters are not learnt by gradients."""
    raise NotImplementedError(f"{type(model).__name__} has no backward pass: its parameters are counted, "
                              "not learnt by gradient descent (has_backward is False)")
