"""Checkpoints: one ``.npz`` of named arrays plus a JSON document, never a pickle.

Layout inside the archive: ``param/<dotted name>`` for every parameter,
``optim/<slot>/<dotted name>`` for optimiser state, and ``__meta__``: a JSON document
(config, optimiser scalars, anything in ``extra`` such as the step and the RNG states)
stored as uint8 bytes. Files are written to a temporary file in the same folder and
moved into place with ``os.replace``, so an interrupted save leaves the previous
checkpoint intact. Loading uses ``allow_pickle=False``.
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .module import Module

FORMAT = "minipt-checkpoint-1"


@dataclass
class Checkpoint:
    params: dict[str, np.ndarray]
    config: dict
    optimizer: dict | None = None
    extra: dict = field(default_factory=dict)

    def restore(self, model: Module, optimizer=None) -> None:
        """Copy parameters (and optimiser state) in place; a mismatch names the parameter."""
        model.load_state_dict(self.params)
        if optimizer is not None:
            if self.optimizer is None:
                raise ValueError("the checkpoint holds no optimiser state")
            optimizer.load_state_dict(self.optimizer)


def save_checkpoint(path, model: Module, *, config: dict, optimizer=None, extra: dict | None = None) -> Path:
    path = Path(path)
    if path.suffix != ".npz":
        raise ValueError(f"checkpoint path must end in .npz, got {path.name}")
    arrays = {f"param/{k}": v for k, v in model.named_parameters()}
    meta = {"format": FORMAT, "config": config, "extra": extra or {}, "optimizer": None}
    if optimizer is not None:
        state = optimizer.state_dict()
        meta["optimizer"] = state["scalars"]
        arrays.update({f"optim/{k}": v for k, v in state["arrays"].items()})
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


def load_checkpoint(path) -> Checkpoint:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    with open(path, "rb") as f:
        head = f.read(2)
    if head[:1] == b"\x80":
        raise ValueError(f"{path} is a pickle file; minipt never unpickles (it can run code). "
                         "It reads only .npz checkpoints written by minipt's save_checkpoint")
    if head != b"PK":
        raise ValueError(f"{path} is not an .npz archive (a minipt checkpoint is a zip of arrays)")
    with np.load(path, allow_pickle=False) as z:
        if "__meta__" not in z.files:
            raise ValueError(f"{path} is an .npz file but not a minipt checkpoint (no __meta__ entry)")
        meta = json.loads(z["__meta__"].tobytes().decode("utf-8"))
        if meta.get("format") != FORMAT:
            raise ValueError(f"{path}: unknown checkpoint format {meta.get('format')!r}, expected {FORMAT!r}")
        params = {k[len("param/"):]: z[k] for k in z.files if k.startswith("param/")}
        optim_arrays = {k[len("optim/"):]: z[k] for k in z.files if k.startswith("optim/")}
    optimizer = None if meta["optimizer"] is None else {"scalars": meta["optimizer"], "arrays": optim_arrays}
    return Checkpoint(params, meta["config"], optimizer, meta["extra"])
