"""What every optimiser shares: the (name, parameter, gradient) triples of a module,
tied parameters once, a learning rate that schedules set, and a state dict of arrays
keyed by dotted parameter name (saved with checkpoints)."""
from __future__ import annotations

import numpy as np

from ..core.module import Module
from ..kernels import threads


class Optimizer:
    def __init__(self, module: Module, lr: float):
        if not lr > 0:                 # also refuses NaN
            raise ValueError(f"learning rate must be > 0, got {lr}")
        self.module, self.lr, self.t = module, float(lr), 0
        grads = dict(module.named_grads())
        self.entries = [(name, p, grads[name]) for name, p in module.named_parameters()]
        self.state: dict[str, dict[str, np.ndarray]] = {}   # slot -> name -> array
        holders = {}                                         # id(parameter) -> (a params dict, key)
        for _, mod in module.named_modules():
            for key, p in mod.params.items():
                holders.setdefault(id(p), (mod.params, key))
        self._holders = [holders[id(p)] for _, p, _ in self.entries]
        self._grad_halves = threads.halves([g for _, _, g in self.entries], lambda g: g.size)
        self._grad_size = sum(g.size for _, _, g in self.entries)

    def _slot(self, slot: str) -> dict[str, np.ndarray]:
        if slot not in self.state:
            self.state[slot] = {name: np.zeros_like(p) for name, p, _ in self.entries}
        return self.state[slot]

    def zero_grad(self) -> None:
        """Zero the gradients this optimiser updates, a tied one once: one flat loop over its
        entries, where ``Module.zero_grad`` walks the tree (at toy sizes the walk costs about
        as much as the fills); the two halves of them on two threads when there are enough
        elements (``threads.each_half``: 1.5 ms a BERT L step on one)."""
        self._check_current()
        threads.each_half(_fill_zero, self._grad_halves, self._grad_size)

    def step(self) -> None:
        self._check_current()
        self.t += 1
        self._update()

    def _check_current(self) -> None:
        """Raise if the module's arrays were replaced after this optimiser was built
        (``Module.to``, a new tie): it would zero and update arrays the model no longer uses."""
        for (store, key), (name, p, _) in zip(self._holders, self.entries):
            if store[key] is not p:
                raise RuntimeError(f"parameter {name}: the module's arrays were replaced after the optimiser "
                                   "was built (Module.to or a tie?); build the optimiser again")

    def _update(self) -> None:
        raise NotImplementedError

    def state_dict(self) -> dict:
        """{"scalars": JSON-able dict, "arrays": {"slot/name": array}}."""
        arrays = {f"{slot}/{name}": a.copy() for slot, d in self.state.items() for name, a in d.items()}
        return {"scalars": {"t": self.t, "lr": self.lr, "type": type(self).__name__}, "arrays": arrays}

    def load_state_dict(self, state: dict) -> None:
        scalars = state["scalars"]
        if scalars.get("type") != type(self).__name__:
            raise ValueError(f"optimiser state is for {scalars.get('type')}, not {type(self).__name__}")
        shapes = {name: p.shape for name, p, _ in self.entries}
        dtypes = {name: p.dtype for name, p, _ in self.entries}
        new: dict[str, dict[str, np.ndarray]] = {}
        for key, arr in state["arrays"].items():
            slot, name = key.split("/", 1)
            if name not in shapes:
                raise KeyError(f"optimiser state has parameter {name} that the model does not have")
            if arr.shape != shapes[name]:
                raise ValueError(f"optimiser state {key}: expected shape {shapes[name]}, got {arr.shape}")
            new.setdefault(slot, {})[name] = np.array(arr, dtype=dtypes[name])
        for slot, arrays in new.items():
            missing = [name for name in shapes if name not in arrays]
            if missing:
                raise KeyError(f"optimiser state slot {slot!r} lacks parameter {missing[0]}")
        self.state, self.t, self.lr = new, int(scalars["t"]), float(scalars["lr"])


def _fill_zero(arrays: list[np.ndarray]) -> None:
    for a in arrays:
        a.fill(0)                      # NumPy lets go of Python's lock for a large fill
