"""Adam (Kingma & Ba 2015) and AdamW (Loshchilov & Hutter 2019).

Per parameter, with the gradient g at step t = 1, 2, ...:

    m = b1 m + (1 - b1) g              v = b2 v + (1 - b2) g^2
    mhat = m / (1 - b1^t)              vhat = v / (1 - b2^t)     (bias correction, Adam sec. 3)
    Adam:  g += wd p  first (L2 penalty through the gradient, so it is rescaled by 1/sqrt(vhat))
           p -= lr mhat / (sqrt(vhat) + eps)
    AdamW: p -= lr wd p                (decoupled decay, Loshchilov & Hutter algorithm 2, with
                                        their schedule multiplier folded into lr as is usual)
           p -= lr mhat / (sqrt(vhat) + eps)

Weight decay applies only to the names ``decay_names()`` returns. By default biases and
norm gains (ndim < 2) and embedding tables are left alone (as for GPT and BERT); pass
``no_decay(name, array) -> bool`` to choose otherwise. An embedding is a module whose
class is named ``Embedding`` or that sets ``no_weight_decay = True``; a parameter tied to
an embedding (GPT's output layer) is therefore not decayed either.

The moments m and v are kept in the parameter's dtype and every scalar is a Python
float, so float32 training stays float32 (NEP 50).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .. import kernels
from ..core.module import Module
from ..kernels import threads
from .base import Optimizer

NoDecay = Callable[[str, np.ndarray], bool]


def is_embedding(module: Module) -> bool:
    """True for an embedding table: class name ``Embedding`` or the ``no_weight_decay`` marker."""
    return type(module).__name__ == "Embedding" or bool(getattr(module, "no_weight_decay", False))


def default_no_decay(module: Module) -> set[str]:
    """Dotted names of biases, norm gains (ndim < 2) and embedding tables."""
    embedded: set[int] = set()
    for _, mod in module.named_modules():
        if is_embedding(mod):
            embedded |= {id(p) for p in mod.params.values()}
    return {name for name, p in module.named_parameters() if p.ndim < 2 or id(p) in embedded}


class Adam(Optimizer):
    decoupled = False

    def __init__(self, module: Module, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, no_decay: NoDecay | None = None):
        super().__init__(module, lr)
        b1, b2 = betas
        if not (0.0 <= b1 < 1.0 and 0.0 <= b2 < 1.0):
            raise ValueError(f"betas must be in [0, 1), got {tuple(betas)}")
        if not eps > 0.0:
            raise ValueError(f"eps must be > 0, got {eps}")
        if not weight_decay >= 0.0:
            raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
        self.b1, self.b2, self.eps, self.weight_decay = float(b1), float(b2), float(eps), float(weight_decay)
        if no_decay is None:
            skip = default_no_decay(module)
        else:
            skip = {name for name, p, _ in self.entries if no_decay(name, p)}
        self._decays = {name: name not in skip for name, _, _ in self.entries}

    def decay_names(self) -> list[str]:
        """Dotted names that weight decay touches, in parameter order ([] when it is 0)."""
        if not self.weight_decay:
            return []
        return [name for name, _, _ in self.entries if self._decays[name]]

    def _update(self) -> None:
        m_all, v_all = self._slot("m"), self._slot("v")
        lr, b1, b2, eps, t = float(self.lr), self.b1, self.b2, self.eps, self.t
        step = lr / (1.0 - b1 ** t)                # lr / (1 - b1^t): mhat's correction
        root_c2 = math.sqrt(1.0 - b2 ** t)         # sqrt(vhat) = sqrt(v) / root_c2
        fused, rest = self._fused(m_all, v_all)
        if fused is not None:                      # one Numba call for every parameter it can take
            update_all = kernels.get("adam_update_all")
            size, whole, halves = fused

            def update(piece):
                addresses, sizes, like, wd = piece
                decay, l2 = (lr * wd, 0.0 * wd) if self.decoupled else (0.0 * wd, wd)
                update_all(addresses, sizes, like, decay, l2, step, b1, b2, root_c2, eps)
            if threads.two_threads_for(size):      # each parameter on one thread: the same bits
                threads.run_together([lambda half=half: update(half) for half in halves])
            else:                                  # not ``threads.each_half``: one call for all
                update(whole)
        for name, p, g in rest:
            wd = self.weight_decay if self._decays[name] else 0.0
            decay, l2 = (lr * wd, 0.0) if self.decoupled else (0.0, wd)
            adam_update_numpy(p, g, m_all[name], v_all[name], step, b1, b2, root_c2, eps, decay, l2)

    def _fused(self, m_all, v_all):
        """((elements, the kernel's arguments for all, for each of two halves) or None, the
        entries left to NumPy) for the moments m_all, v_all; the arguments: addresses (n, 4)
        int64 of p, g, m, v, sizes (n,), a 0-size array of their dtype, weight decay (n,)
        float64. Made again when an array in them was replaced (a loaded state). The kernel
        takes each parameter whose four arrays are C-contiguous in the first one's dtype."""
        plan = getattr(self, "_plan", None)
        if plan is None or any(m_all[n] is not m or v_all[n] is not v for n, m, v in plan["moments"]):
            take, rest = [], []
            for name, p, g in self.entries:
                arrays = (p, g, m_all[name], v_all[name])
                ok = all(a.flags.c_contiguous and a.dtype == p.dtype for a in arrays)
                (take if ok and (not take or p.dtype == take[0][1][0].dtype) else rest).append((name, p, g, arrays))
            fused = None
            if take and kernels.get("adam_update_all"):
                def arguments(entries):
                    return (np.array([[a.ctypes.data for a in arrays] for *_, arrays in entries], dtype=np.int64).reshape(-1, 4),
                            np.array([p.size for _, p, _, _ in entries], dtype=np.int64),
                            np.empty(0, take[0][1].dtype),
                            np.array([self.weight_decay if self._decays[name] else 0.0 for name, *_ in entries]))
                fused = (sum(p.size for _, p, _, _ in take), arguments(take),
                         [arguments(half) for half in threads.halves(take, lambda entry: entry[1].size)])
            else:
                rest = take + rest
            # the plan holds every array it has the address of, so none is freed under it
            self._plan = plan = {"fused": fused, "rest": [e[:3] for e in rest], "held": [e[3] for e in take],
                                 "moments": [(n, m_all[n], v_all[n]) for n, *_ in self.entries]}
        return plan["fused"], plan["rest"]


def adam_update_numpy(p, g, m, v, step, b1, b2, root_c2, eps, decay, l2):
    """One Adam(W) update of p, m, v in place (the twin of ``minipt.kernels.adam``).
    decay: lr * wd for AdamW's decoupled decay (else 0); l2: wd for Adam's L2 (else 0)."""
    if l2:
        g = g + l2 * p                         # L2: the penalty's gradient
    m *= b1
    m += (1.0 - b1) * g
    v *= b2
    v += (1.0 - b2) * (g * g)
    if decay:
        p -= decay * p                         # decoupled decay uses the old p
    denom = np.sqrt(v)
    denom /= root_c2
    denom += eps                               # sqrt(vhat) + eps
    update = step * m
    update /= denom                            # lr mhat / (sqrt(vhat) + eps)
    p -= update                                # in place: others hold p


class AdamW(Adam):
    """Adam with decoupled weight decay; GPT-1 used weight_decay=0.01 (the default here)."""
    decoupled = True

    def __init__(self, module: Module, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.01, no_decay: NoDecay | None = None):
        super().__init__(module, lr, betas, eps, weight_decay, no_decay)
