"""Named tensors on disk in the safetensors format, through its NumPy API (no torch).

A ``.safetensors`` file (Hugging Face, https://github.com/huggingface/safetensors) is
an 8-byte little-endian header length, a JSON header ``{name: {"dtype", "shape",
"data_offsets"}, "__metadata__": {str: str}}``, then the raw little-endian bytes of
every tensor. Reading it runs no code, unlike a pickle (``torch.save``,
``pytorch_model.bin``), which can execute anything when it is loaded: minipt reads and
writes only safetensors and refuses the pickled formats with an error saying why.

- ``tensor_index(folder)``: every tensor's dtype and shape, from the headers only
  (nothing is read yet), across ``model.safetensors`` or the shards listed by
  ``model.safetensors.index.json``;
- ``read_tensors(index, names)``: the tensors themselves as NumPy arrays;
- ``write_tensors(path, tensors)``: one file, with the ``{"format": "pt"}`` metadata that
  ``transformers`` checks before it loads a file.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save_file

WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
# formats that are pickles (or need a framework to read), by the names transformers gives them
PICKLED = ("pytorch_model.bin", "pytorch_model.bin.index.json", "model.pt", "model.pth", "model.ckpt")
NUMPY_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16}


class TensorInfo(NamedTuple):
    dtype: str                   # safetensors dtype: "F32", "F64", "BF16", ...
    shape: tuple[int, ...]
    path: Path                   # the file holding it
    key: str                     # its name inside that file


def _refuse_pickles(folder: Path) -> None:
    found = [p.name for p in sorted(folder.iterdir())
             if p.name in PICKLED or p.suffix in (".bin", ".pt", ".pth", ".ckpt", ".pkl")]
    if found:
        raise ValueError(
            f"{folder} holds {found[0]} but no {WEIGHTS}: that is a pickle, and loading a pickle can run "
            "arbitrary code, so minipt never unpickles. Convert it where torch and transformers are "
            "installed: `AutoModelForCausalLM.from_pretrained(folder).save_pretrained(folder, "
            "safe_serialization=True)` writes model.safetensors")


def weight_files(folder) -> list[Path]:
    """The safetensors file(s) of a transformers folder: ``model.safetensors``, or the
    shards named by ``model.safetensors.index.json`` (each a plain name in the folder)."""
    folder = Path(folder)
    if (folder / WEIGHTS).is_file():
        return [folder / WEIGHTS]
    if (folder / INDEX).is_file():
        try:
            weight_map = json.loads((folder / INDEX).read_text(encoding="utf-8"))["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ValueError(f"{folder / INDEX}: expected a JSON object with a 'weight_map' ({e})") from None
        shards = sorted(set(weight_map.values()))
        for name in shards:                       # no path tricks: shards live beside the index
            if not isinstance(name, str) or Path(name).name != name or not name.endswith(".safetensors"):
                raise ValueError(f"{folder / INDEX}: shard {name!r} is not a .safetensors file name in the folder")
            if not (folder / name).is_file():
                raise FileNotFoundError(f"{folder / INDEX} lists shard {name}, which is missing")
        return [folder / name for name in shards]
    if not folder.is_dir():
        raise FileNotFoundError(f"no folder {folder}")
    _refuse_pickles(folder)
    raise FileNotFoundError(f"{folder} holds no {WEIGHTS} (nor a sharded {INDEX})")


def _open(path: Path):
    try:
        return safe_open(str(path), framework="np")
    except (SafetensorError, OSError, ValueError) as e:
        raise ValueError(f"{path} is not a readable safetensors file ({e})") from None


def tensor_index(folder) -> dict[str, TensorInfo]:
    """name -> ``TensorInfo`` (dtype, shape, file, key), read from the headers only."""
    index: dict[str, TensorInfo] = {}
    for path in weight_files(folder):
        with _open(path) as f:
            for name in f.keys():
                if name in index:
                    raise ValueError(f"tensor {name} appears in both {index[name].path.name} and {path.name}")
                part = f.get_slice(name)
                index[name] = TensorInfo(part.get_dtype(), tuple(part.get_shape()), path, name)
    return index


def read_tensors(index: dict[str, TensorInfo], names) -> dict[str, np.ndarray]:
    """The arrays of ``names`` (keys of a ``tensor_index``), opening each file once."""
    by_file: dict[Path, list[str]] = {}
    for name in names:
        info = index[name]
        if info.dtype not in NUMPY_DTYPES:
            hint = " (NumPy has no bfloat16: convert the folder to float32 in transformers first)" \
                if info.dtype == "BF16" else ""
            raise ValueError(f"tensor {name} has dtype {info.dtype}; minipt reads {sorted(NUMPY_DTYPES)}{hint}")
        by_file.setdefault(info.path, []).append(name)
    out: dict[str, np.ndarray] = {}
    for path, file_names in by_file.items():
        with _open(path) as f:
            for name in file_names:
                out[name] = f.get_tensor(index[name].key)
    return out


def write_tensors(path, tensors: dict[str, np.ndarray], metadata: dict[str, str] | None = None) -> None:
    """Write named arrays (made contiguous) to one safetensors file. ``format: pt`` marks
    the layout transformers expects (its loader refuses files without it)."""
    arrays = {name: np.asarray(a, order="C") for name, a in tensors.items()}    # keeps 0-d arrays 0-d
    save_file(arrays, str(path), metadata={"format": "pt", **(metadata or {})})
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)                    # an ordinary file's mode, not 0600


def read_file(path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Every tensor of one safetensors file and its metadata (used for the test fixtures)."""
    with _open(Path(path)) as f:
        return {name: f.get_tensor(name) for name in f.keys()}, dict(f.metadata() or {})
