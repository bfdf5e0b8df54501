"""The Module base class: parameters, gradients, children and dotted names.

A module owns ``params`` and ``grads``, two dicts with identical keys. ``forward``
keeps what ``backward`` needs; ``backward(dy)`` *accumulates* into ``grads`` (``+=``)
and returns the gradient of its input. ``zero_grad()`` is called once per step.
Children are found by attribute (a Module, or a list/tuple of Modules), so
``named_parameters()`` yields dotted names such as ``blocks.0.attn.c_attn.weight``.

Weight tying (GPT's output layer reusing the token embedding, Press & Wolf 2017) is a
shared array: both modules hold the *same* parameter array and the *same* gradient
array, so both uses add into one gradient. Names are deduplicated by identity.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import numpy as np

from .checks import FLOAT_DTYPES


class Module:
    def __init__(self) -> None:
        self.params: dict[str, np.ndarray] = {}
        self.grads: dict[str, np.ndarray] = {}
        self.training = True

    # -- parameters -------------------------------------------------------------
    def add_param(self, name: str, value: np.ndarray) -> np.ndarray:
        """Register a parameter and a zero gradient of the same shape and dtype."""
        if value.dtype not in FLOAT_DTYPES:
            raise TypeError(f"parameter {name}: dtype must be float32 or float64, got {value.dtype}")
        self.params[name] = np.ascontiguousarray(value)
        self.grads[name] = np.zeros_like(self.params[name])
        return self.params[name]

    def tie(self, name: str, source: "Module", source_name: str) -> None:
        """Make ``self.params[name]`` the very array ``source.params[source_name]`` (and
        likewise the gradient), so the two uses accumulate into one gradient."""
        if name in self.params and self.params[name].shape != source.params[source_name].shape:
            raise ValueError(f"cannot tie {name} {self.params[name].shape} to "
                             f"{source_name} {source.params[source_name].shape}")
        self.params[name] = source.params[source_name]
        self.grads[name] = source.grads[source_name]

    # -- tree walking -----------------------------------------------------------
    def children(self) -> Iterator[tuple[str, "Module"]]:
        for key, value in vars(self).items():
            if isinstance(value, Module):
                yield key, value
            elif isinstance(value, (list, tuple)) and value and all(isinstance(v, Module) for v in value):
                for i, child in enumerate(value):
                    yield f"{key}.{i}", child

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, "Module"]]:
        yield prefix, self
        for key, child in self.children():
            yield from child.named_modules(f"{prefix}.{key}" if prefix else key)

    def _named(self, which: str) -> Iterator[tuple[str, np.ndarray]]:
        seen: set[int] = set()
        for mod_name, mod in self.named_modules():
            # tied parameters are reported once, under the first name met
            for key in mod.params:
                arr = getattr(mod, which)[key]
                if id(mod.params[key]) in seen:
                    continue
                seen.add(id(mod.params[key]))
                yield (f"{mod_name}.{key}" if mod_name else key), arr

    def named_parameters(self) -> Iterator[tuple[str, np.ndarray]]:
        return self._named("params")

    def named_grads(self) -> Iterator[tuple[str, np.ndarray]]:
        return self._named("grads")

    def parameters(self) -> dict[str, np.ndarray]:
        return dict(self.named_parameters())

    def gradients(self) -> dict[str, np.ndarray]:
        return dict(self.named_grads())

    def num_parameters(self) -> int:
        return sum(p.size for _, p in self.named_parameters())

    def generators(self) -> Iterator[tuple[str, np.random.Generator]]:
        """Every ``np.random.Generator`` held by a module (dropout, masking), by name."""
        for mod_name, mod in self.named_modules():
            for key, value in vars(mod).items():
                if isinstance(value, np.random.Generator):
                    yield (f"{mod_name}.{key}" if mod_name else key), value

    # -- training state -----------------------------------------------------------
    def zero_grad(self) -> None:
        for _, mod in self.named_modules():               # no name per parameter, as named_grads builds
            for g in mod.grads.values():
                g.fill(0)                                 # a tied gradient twice: still zero

    def train(self, mode: bool = True) -> "Module":
        for _, mod in self.named_modules():
            mod.training = mode
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def to(self, dtype) -> "Module":
        """Cast every parameter and gradient to ``dtype`` in place, keeping ties."""
        dtype = np.dtype(dtype)
        memo: dict[int, np.ndarray] = {}
        for _, mod in self.named_modules():
            for store in (mod.params, mod.grads):
                for key, arr in store.items():
                    if id(arr) not in memo:
                        memo[id(arr)] = arr.astype(dtype)
                    store[key] = memo[id(arr)]
        return self

    @property
    def dtype(self) -> np.dtype | None:
        for _, p in self.named_parameters():
            return p.dtype
        return None

    # -- saving -------------------------------------------------------------------
    def state_dict(self) -> dict[str, np.ndarray]:
        return {name: p.copy() for name, p in self.named_parameters()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Copy ``state`` into the parameters in place; the first name or shape that
        does not match raises, and nothing is changed unless all match."""
        own = self.parameters()
        for name, p in own.items():
            if name not in state:
                raise KeyError(f"parameter {name} {p.shape} is missing from the state dict")
            if tuple(state[name].shape) != p.shape:
                raise ValueError(f"parameter {name}: model has shape {p.shape}, "
                                 f"state dict has {tuple(state[name].shape)}")
        extra = [k for k in state if k not in own]
        if extra:
            raise KeyError(f"state dict has parameter {extra[0]} that the model does not have")
        for name, p in own.items():
            p[...] = state[name]

    # -- calling --------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError

    def backward(self, *args, **kwargs):
        raise NotImplementedError

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.num_parameters():,} parameters)"


@contextmanager
def eval_mode(model: "Module"):
    """``with eval_mode(model):`` runs the block with dropout (and every other
    training-only behaviour) off, then restores the mode the model was in."""
    was = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was)
