"""Checkpoints: one ``.npz`` of named arrays plus a JSON document, never a pickle.

Layout inside the archive (a zip of ``.npy`` files, NumPy's own format):

    param/<dotted name>          every parameter, in its dtype (float32 stays float32)
    optim/<slot>/<dotted name>   optimiser state (Adam's m and v, SGD's velocity)
    __meta__                     uint8 bytes of a UTF-8 JSON document: format tag, config,
                                 optimiser scalars (step count, lr, type) and ``extra``
                                 (step, ``Generator.bit_generator.state`` dicts, ...)

Pickle can run arbitrary code when loaded, so minipt neither writes nor reads it: every
array is loaded with ``allow_pickle=False`` and pickle files (``torch.save`` output, a
``pytorch_model.bin``) are refused with an error saying so.

Saving is atomic: the archive is written to a temporary file in the same folder, flushed
to disk, then moved over the target with ``os.replace`` (atomic on POSIX and Windows).
An interrupted or failed save leaves the previous checkpoint untouched and removes the
temporary file. (The same write-then-rename pattern databases and editors use.)
"""
from __future__ import annotations

import json
import os
import stat
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .module import Module

FORMAT = "minipt-checkpoint-1"
META = "__meta__"
_NOT_OURS = "minipt reads only .npz checkpoints written by minipt.core.checkpoint.save_checkpoint"


@dataclass
class Checkpoint:
    params: dict[str, np.ndarray]
    config: dict
    optimizer: dict | None = None              # {"scalars": {...}, "arrays": {"slot/name": array}}
    extra: dict = field(default_factory=dict)

    def restore(self, model: Module, optimizer=None) -> None:
        """Copy the parameters (and the optimiser state) into ``model`` / ``optimizer`` in
        place. A missing, extra or differently shaped parameter raises an error naming it,
        and then nothing is changed: the model is put back if the optimiser state fails."""
        if optimizer is not None and self.optimizer is None:
            raise ValueError("the checkpoint holds no optimiser state (it was saved without optimizer=)")
        before = model.state_dict() if optimizer is not None else None
        model.load_state_dict(self.params)       # checks every name and shape before copying
        if optimizer is not None:
            try:
                optimizer.load_state_dict(self.optimizer)
            except BaseException:
                model.load_state_dict(before)
                raise


def _json_default(value):
    if isinstance(value, np.generic):            # np.int64 step counters, np.float32 losses
        return value.item()
    raise TypeError(f"checkpoint config/extra must be JSON-able (dict, list, str, int, float, bool, None); "
                    f"got {type(value).__name__}: {value!r:.60}")


def save_checkpoint(path, model: Module, *, config: dict, optimizer=None, extra: dict | None = None) -> Path:
    """Write ``model``'s parameters, ``optimizer``'s state, ``config`` and ``extra`` to
    ``path`` (must end in ``.npz``) atomically; returns the path."""
    path = Path(path)
    if path.suffix != ".npz":
        raise ValueError(f"checkpoint path must end in .npz, got {path.name}")
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict, got {type(config).__name__}")
    arrays = {f"param/{name}": p for name, p in model.state_dict().items()}
    meta = {"format": FORMAT, "config": config, "extra": extra or {}, "optimizer": None}
    if optimizer is not None:
        state = optimizer.state_dict()
        meta["optimizer"] = state["scalars"]
        arrays.update({f"optim/{key}": a for key, a in state["arrays"].items()})
    text = json.dumps(meta, default=_json_default)   # fails before any file is touched
    arrays[META] = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)

    path.parent.mkdir(parents=True, exist_ok=True)
    mode = stat.S_IMODE(os.stat(path).st_mode) if path.exists() else 0o644   # keep an old file's mode
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)                        # mkstemp makes 0600
        os.replace(tmp, path)
    except BaseException:                          # KeyboardInterrupt included
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    _fsync_folder(path.parent)
    return path


def _fsync_folder(folder: Path) -> None:
    """Make a rename inside ``folder`` durable (POSIX); a no-op where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _refuse_foreign(path: Path) -> None:
    """Raise a clear error unless ``path`` is a zip archive that is not a pickle in disguise."""
    with open(path, "rb") as f:
        head = f.read(4)
    if head[:1] == b"\x80":                        # pickle protocol >= 2 (torch.save before 1.6)
        raise ValueError(f"{path} is a pickle file; pickles can run code when loaded, so minipt never "
                         f"unpickles. {_NOT_OURS}")
    if head[:2] != b"PK":
        raise ValueError(f"{path} is not an .npz archive (it does not start like a zip file); {_NOT_OURS}")
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
    except Exception as e:                         # BadZipFile, and struct/seek errors of a mangled directory
        raise ValueError(f"{path} is a damaged or incomplete zip archive ({e}); {_NOT_OURS}") from None
    if any(n.endswith(".pkl") for n in names):     # torch.save since 1.6: a zip around data.pkl
        raise ValueError(f"{path} is a PyTorch (torch.save) archive holding a pickle; minipt never "
                         f"unpickles. {_NOT_OURS}")


def load_checkpoint(path) -> Checkpoint:
    """Read a checkpoint written by ``save_checkpoint`` (never unpickling anything).

    A damaged, truncated or foreign file is a ValueError naming it: every member's CRC-32
    is checked first, so one flipped byte anywhere in the stored data is found here, not
    later as a wrong number or an exception from deep inside zipfile or NumPy."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; pass the checkpoint file inside it "
                                f"(training writes {path / 'checkpoint.npz'})")
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    _refuse_foreign(path)
    try:
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()                      # reads every member, checks its CRC-32
        if bad is not None:
            raise ValueError(f"member {bad} fails its CRC-32 check")
        meta, params, optim_arrays = _read_members(path)
    except _NotMinipt as e:
        raise ValueError(f"{path} {e}; {_NOT_OURS}") from None
    except Exception as e:                         # zipfile, zlib, NumPy's header parser, ...
        raise ValueError(f"{path} is damaged or incomplete ({type(e).__name__}: {e}); "
                         "it cannot be read as a minipt checkpoint") from None
    optimizer = None if meta["optimizer"] is None else {"scalars": meta["optimizer"], "arrays": optim_arrays}
    return Checkpoint(params, meta["config"], optimizer, meta["extra"])


class _NotMinipt(Exception):
    """A readable archive that is not a minipt checkpoint (message completes "PATH ...")."""


def _read_members(path: Path) -> tuple[dict, dict, dict]:
    """(meta, params, optimiser arrays) of a checkpoint whose zip structure is sound."""
    with np.load(path, allow_pickle=False) as z:
        if META not in z.files:
            raise _NotMinipt(f"is an .npz file but not a minipt checkpoint (no {META} entry)")
        try:
            meta = json.loads(z[META].tobytes().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise _NotMinipt(f"has a damaged {META} JSON document ({e})") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            got = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
            raise _NotMinipt(f"has the unknown checkpoint format {got!r}, expected {FORMAT!r}")
        for key, kinds in (("config", dict), ("extra", dict), ("optimizer", (dict, type(None)))):
            if not isinstance(meta.get(key), kinds):
                raise _NotMinipt(f"has no valid {key!r} in its {META} document")
        try:
            params = {k[len("param/"):]: z[k] for k in z.files if k.startswith("param/")}
            optim_arrays = {k[len("optim/"):]: z[k] for k in z.files if k.startswith("optim/")}
        except ValueError as e:                    # an object array needs pickle: refused
            raise _NotMinipt(f"holds an array that cannot be read without pickle ({e})") from None
    return meta, params, optim_arrays
