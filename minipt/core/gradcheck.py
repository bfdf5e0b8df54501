"""Gradient checking by central differences (the cs231n recipe, made strict).

For a function y = f(a_1, ..., a_k) and a *random* upstream gradient G, the scalar
L = sum(y * G) has dL/da = backward(G). Each checked element of each array is nudged
by +-h and +-2h and compared with the fourth-order central difference

    dL/da ~ (8 (L(a + h) - L(a - h)) - (L(a + 2h) - L(a - 2h))) / (12 h),

whose truncation error is O(h^4) instead of the two-point formula's O(h^2). That allows
h = 3e-4 (the optimum is near (float64 epsilon)^(1/5) ~ 7e-4 times the function's scale;
whole models with SwiGLU and large weights need the smaller step), where round-off
(about 1e-16 |L| / h) is hundreds of times smaller than with the two-point formula's
1e-6 step: a correct backward then shows errors near 1e-9, not 1e-7. An all-ones G would hide
bugs that add a constant per row (LayerNorm, softmax): G is drawn from N(0, 1).

The relative error of an element is |analytic - numeric| / max(|analytic|, |numeric|,
1e-3 * scale), where scale is the largest magnitude in either gradient of that array:
elements many orders below the array's scale are compared on the array's scale, so
round-off on a near-zero entry is not reported as a relative error of 1.
Run in float64: float32 round-off (1e-7) swamps any difference quotient.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .module import Module

TOLERANCE = 1e-6


@dataclass
class ArrayCheck:
    name: str
    kind: str                 # "input" or "param"
    shape: tuple[int, ...]
    max_rel_error: float
    where: tuple[int, ...]    # index of the worst element
    analytic: float
    numeric: float
    checked: int              # how many elements were nudged


@dataclass
class GradcheckResult:
    arrays: list[ArrayCheck] = field(default_factory=list)
    tol: float = TOLERANCE

    def max_error(self, kind: str | None = None) -> float:
        errs = [a.max_rel_error for a in self.arrays if kind is None or a.kind == kind]
        return max(errs, default=0.0)

    @property
    def worst(self) -> ArrayCheck | None:
        return max(self.arrays, key=lambda a: a.max_rel_error, default=None)

    @property
    def passed(self) -> bool:
        return self.max_error() < self.tol

    def __str__(self) -> str:
        lines = [f"{'array':<32} {'kind':<6} {'shape':<16} {'max rel err':>11}  where"]
        for a in self.arrays:
            lines.append(f"{a.name:<32} {a.kind:<6} {str(a.shape):<16} {a.max_rel_error:>11.2e}  {a.where}")
        return "\n".join(lines)


def relative_error(analytic: np.ndarray, numeric: np.ndarray) -> np.ndarray:
    """Element-wise relative error with a floor at 1e-3 of the array's scale."""
    a, n = np.abs(analytic), np.abs(numeric)
    scale = max(float(a.max(initial=0.0)), float(n.max(initial=0.0)))
    denom = np.maximum(np.maximum(a, n), max(1e-3 * scale, 1e-300))
    return np.abs(analytic - numeric) / denom


def gradcheck(run: Callable[[], tuple[object, Callable]], arrays: dict[str, np.ndarray],
              kinds: dict[str, str] | None = None, *, eps: float = 3e-4, seed: int = 0,
              max_checks: int | None = None, tol: float = TOLERANCE) -> GradcheckResult:
    """Check the gradients that ``run`` computes for ``arrays``.

    ``run()`` reads the arrays (which are nudged in place) and returns ``(y, backward)``
    where ``backward(G)`` returns ``{name: dL/d array}`` for ``L = sum(y * G)``.
    ``max_checks`` nudges at most that many (seeded, random) elements per array; ``eps``
    is the step h of the fourth-order central difference.
    """
    for name, a in arrays.items():
        if a.dtype != np.float64:
            raise TypeError(f"gradcheck: {name} is {a.dtype}; run gradchecks in float64")
    rng = np.random.default_rng(seed)
    y, backward = run()
    y = np.asarray(y, dtype=np.float64)
    upstream = rng.standard_normal(y.shape)
    analytic = backward(upstream if y.ndim else float(upstream))

    def loss() -> float:
        out, _ = run()
        return float(np.sum(np.asarray(out) * upstream))

    result = GradcheckResult(tol=tol)
    for name, a in arrays.items():
        flat = a.reshape(-1)  # a view: the arrays must be contiguous
        if not np.shares_memory(flat, a):
            raise ValueError(f"gradcheck: {name} must be C-contiguous")
        idx = np.arange(a.size)
        if max_checks is not None and a.size > max_checks:
            idx = np.sort(rng.choice(a.size, size=max_checks, replace=False))
        grad = np.asarray(analytic[name], dtype=np.float64)
        if grad.shape != a.shape:
            raise ValueError(f"gradcheck: gradient of {name} has shape {grad.shape}, array has {a.shape}")
        numeric = np.zeros(len(idx))
        for j, i in enumerate(idx):
            old = flat[i]
            at = []
            for step in (eps, -eps, 2 * eps, -2 * eps):
                flat[i] = old + step
                at.append(loss())
            flat[i] = old
            numeric[j] = (8.0 * (at[0] - at[1]) - (at[2] - at[3])) / (12.0 * eps)
        picked = grad.reshape(-1)[idx]
        err = relative_error(picked, numeric) if len(idx) else np.zeros(1)
        j = int(np.argmax(err))
        where = tuple(int(w) for w in np.unravel_index(idx[j], a.shape)) if len(idx) else ()
        result.arrays.append(ArrayCheck(
            name, (kinds or {}).get(name, "input"), a.shape, float(err[j]), where,
            float(picked[j]) if len(idx) else 0.0, float(numeric[j]) if len(idx) else 0.0, len(idx)))
    return result


def _replayer(generators: list[np.random.Generator]) -> Callable[[], None]:
    """Return a function that rewinds each generator to its state now, so dropout and
    masking draw the same numbers on every forward of the check."""
    states = [g.bit_generator.state for g in generators]

    def rewind() -> None:
        for g, s in zip(generators, states):
            g.bit_generator.state = s
    return rewind


def check_op(forward: Callable, backward: Callable, inputs: dict[str, np.ndarray],
             params: tuple[str, ...] = (), **kwargs) -> GradcheckResult:
    """Gradcheck a pure op pair ``y, cache = forward(*inputs, **kwargs)`` and
    ``grads = backward(dy, cache)``, where ``grads`` lines up with ``inputs``.
    Names in ``params`` are reported as parameters (weights), the rest as inputs.
    Generators among ``kwargs`` are rewound before every forward."""
    check_kwargs = {k: kwargs.pop(k) for k in ("eps", "seed", "max_checks", "tol") if k in kwargs}
    rewind = _replayer([v for v in kwargs.values() if isinstance(v, np.random.Generator)])
    names = list(inputs)

    def run():
        rewind()
        y, cache = forward(*inputs.values(), **kwargs)

        def back(dy):
            grads = backward(dy, cache)
            grads = grads if isinstance(grads, tuple) else (grads,)
            if len(grads) != len(names):
                raise ValueError(f"backward returned {len(grads)} gradients for inputs {names}")
            return dict(zip(names, grads))
        return y, back
    kinds = {k: "param" if k in params else "input" for k in inputs}
    return gradcheck(run, inputs, kinds, **check_kwargs)


def check_module(module: Module, *inputs, select: Callable | None = None, check_inputs: bool = True,
                 forward_kwargs: dict | None = None, **check_kwargs) -> GradcheckResult:
    """Gradcheck a module's parameters and its float inputs.

    ``module.forward(*inputs)`` gives the output (``select`` picks the checked part,
    e.g. the loss of ``(loss, logits)``; ``forward_kwargs`` are passed as keywords, such as a
    mask); ``module.backward(G)`` returns the gradient
    of the float inputs (one array, or a tuple for several) and accumulates into
    ``module.grads``. Integer inputs (token ids) are passed through unchecked.
    """
    if module.dtype not in (None, np.float64):   # None: a module without parameters
        raise TypeError(f"check_module: module parameters are {module.dtype}; call module.to(np.float64)")
    rewind = _replayer([g for _, g in module.generators()])
    params = module.parameters()
    float_inputs = {f"input{i}": x for i, x in enumerate(inputs)
                    if check_inputs and isinstance(x, np.ndarray) and x.dtype.kind == "f"}
    arrays = {**float_inputs, **params}
    kinds = {**{k: "input" for k in float_inputs}, **{k: "param" for k in params}}

    def run():
        rewind()
        out = module.forward(*inputs, **(forward_kwargs or {}))
        y = select(out) if select else out

        def back(dy):
            module.zero_grad()
            dxs = module.backward(dy)
            dxs = dxs if isinstance(dxs, tuple) else (dxs,)
            grads = dict(module.named_grads())
            if float_inputs:
                floats = [d for d in dxs if d is not None]
                if len(floats) < len(float_inputs):
                    raise ValueError(f"backward returned {len(floats)} input gradients "
                                     f"for {len(float_inputs)} float inputs")
                grads.update(zip(float_inputs, floats))
            return grads
        return y, back
    return gradcheck(run, arrays, kinds, **check_kwargs)
