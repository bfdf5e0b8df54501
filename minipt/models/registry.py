"""The model registry: what the CLI, the gradcheck suite, the contract tests and the
``minipt models`` index know about each model, and all they know.

Each model file ends with one ``register(ModelEntry(...))``. Adding a model is that file
and that entry: ``minipt train <name>`` offers its presets, ``minipt gradcheck`` checks
its gradients, ``tests/models/test_protocol.py`` holds it to the protocol
(``protocol.py``), ``minipt models`` lists it, and none of them has an ``if`` per model.
Entries are found by importing every module under ``minipt.models`` once.

What a trained model is for is its entry's ``verbs``, the inference commands that serve
it (``VERBS``): ``sample`` continues a prompt (causal LMs: the default of every entry with
``language_model=True``), ``generate`` answers a text-to-text prompt (encoder-decoders),
``fill`` and ``embed`` (masked LMs) predict masked tokens and pool sentence vectors. A
command asked of a model whose entry lacks it is refused, naming the ones that serve it.
An entry without presets says why in ``no_preset`` (``minipt models`` prints it).
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


@dataclass(frozen=True)
class Preset:
    """Settings of one named training run: ``model`` goes to the entry's ``build``,
    ``train`` to ``TrainConfig``, ``data`` to the recipe; ``expected`` is the measured
    result quoted in the README (what ``minipt models`` prints)."""
    model: dict
    train: dict
    batch_size: int = 16
    data: dict = field(default_factory=dict)
    expected: str = ""


VERBS = {"sample": "continue a prompt", "generate": "answer a text-to-text prompt",
         "fill": "predict the [MASK] tokens of a text", "embed": "sentence embeddings"}


@dataclass(frozen=True)
class GradcheckCase:
    name: str                              # what is checked, e.g. "model GPT-2"
    shapes: str                            # e.g. "pre-LN, tied, V7 T5 d8"
    run: Callable[[], Any]                 # -> GradcheckResult, in float64


@dataclass(frozen=True)
class ModelEntry:
    name: str                              # the CLI word: ``minipt train <name>``
    title: str                             # "GPT-2"
    paper: str                             # "Radford et al. 2019, Language Models are Unsupervised ..."
    objective: str                         # "causal LM", "MLM + NSP", ...
    build: Callable[..., Any]              # build(*, rng, dtype=float32, **settings) -> model
    tiny: Callable[[], tuple[Any, tuple]]  # a small float64 model and one batch (contract test, gradcheck)
    lesson: str | None = None              # "09_gpt"
    presets: dict[str, Preset] = field(default_factory=dict)
    recipe: Callable[..., dict] | None = None   # recipe(entry, preset_name, **options) -> report
    gradchecks: tuple[GradcheckCase, ...] = ()  # cases beyond the whole-model check of ``tiny``
    language_model: bool = True            # False for task heads (no log_prob over a stream)
    has_backward: bool = True              # False where parameters are counted (the n-gram)
    invariant: tuple[str, ...] = ()        # parameters the loss cannot see (true gradient exactly 0)
    verbs: tuple[str, ...] | None = None   # inference commands (``VERBS``); None: ("sample",) for a language model
    no_preset: str = ""                    # why ``minipt train`` offers no preset (an entry without presets)
    module: str = ""                       # filled in by ``register``: the file that holds it

    def __post_init__(self) -> None:
        if self.verbs is None:
            object.__setattr__(self, "verbs", ("sample",) if self.language_model else ())
        unknown = [v for v in self.verbs if v not in VERBS]
        if unknown:
            raise ValueError(f"model {self.name!r}: unknown verbs {unknown}; the verbs are {', '.join(VERBS)}")

    @property
    def file(self) -> str:
        return self.module.replace(".", "/") + ".py"

    def all_gradchecks(self) -> list[GradcheckCase]:
        """The whole-model check (loss to every parameter, tied weights included) on
        ``tiny``, then the entry's own cases. None for a model without backward."""
        cases = []
        if self.has_backward:
            from ..core.gradcheck import check_module

            def whole():
                m, b = self.tiny()
                result = check_module(m, *b, select=lambda out: out[0], max_checks=12)
                if self.invariant:     # e.g. a softmax over positions ignores a shift shared by all
                    m.zero_grad()
                    m(*b)
                    m.backward()
                    grads = m.gradients()
                    zero = {a.name for a in result.arrays if a.name in self.invariant
                            and np.abs(grads[a.name]).max() < 1e-12 and abs(a.numeric) < 1e-8}
                    result.arrays = [a for a in result.arrays if a.name not in zero]
                return result
            cases.append(GradcheckCase(f"model {self.title}", f"{self.objective}", whole))
        return cases + list(self.gradchecks)


_REGISTRY: dict[str, ModelEntry] = {}
_DISCOVERED = False


def register(entry: ModelEntry, *, module: str | None = None) -> ModelEntry:
    """Add ``entry`` (called at the bottom of the model's file). Names are unique."""
    import inspect
    if module is None:
        module = inspect.stack()[1].frame.f_globals.get("__name__", "")
    entry = ModelEntry(**{**entry.__dict__, "module": module})
    old = _REGISTRY.get(entry.name)
    if old is not None and old.module != entry.module:
        raise ValueError(f"model name {entry.name!r} is registered twice: {old.module} and {entry.module}")
    _REGISTRY[entry.name] = entry
    return entry


def _discover() -> None:
    global _DISCOVERED
    if _DISCOVERED:
        return
    from .. import models
    for info in pkgutil.walk_packages(models.__path__, prefix="minipt.models."):
        importlib.import_module(info.name)
    _DISCOVERED = True


def entries() -> list[ModelEntry]:
    """Every registered model, in the order of the book (lesson number, then name)."""
    _discover()
    return sorted(_REGISTRY.values(), key=lambda e: (e.lesson or "99", e.name))


def get(name: str) -> ModelEntry:
    _discover()
    if name not in _REGISTRY:
        raise ValueError(f"unknown model {name!r}; registered: {', '.join(e.name for e in entries())}")
    return _REGISTRY[name]


def trainable() -> list[ModelEntry]:
    """The entries ``minipt train`` offers: those with a recipe and at least one preset."""
    return [e for e in entries() if e.recipe is not None and e.presets]


def check_verb(name: str, verb: str, where) -> ModelEntry:
    """The entry of model ``name`` (as a checkpoint's spec names it) if ``verb`` serves it;
    else a ValueError naming the commands that do (or saying that none does)."""
    entry = get(name)
    if verb in entry.verbs:
        return entry
    what = f"{where} holds a {entry.title} model ({entry.name}, {entry.objective})"
    if not entry.verbs:
        raise ValueError(f"{what}; no minipt command runs it" + (f" (lesson {entry.lesson} shows it at work)"
                                                                 if entry.lesson else ""))
    serve = " or ".join(f"`minipt {v}` ({VERBS[v]})" for v in entry.verbs)
    raise ValueError(f"{what}, which `minipt {verb}` does not serve; use {serve}")


def build(spec: dict, *, rng: np.random.Generator | None = None, dtype=np.float32):
    """Rebuild a model from ``model.spec()`` (parameters freshly initialised)."""
    spec = dict(spec)
    if "model" not in spec:
        raise ValueError(f"a model spec needs a 'model' key naming the registry entry, got keys {sorted(spec)}")
    entry = get(spec.pop("model"))
    return entry.build(rng=rng if rng is not None else np.random.default_rng(0), dtype=dtype, **spec)
