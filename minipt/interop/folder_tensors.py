"""A transformers folder's tensors, checked against a layout before they are read: the
dtype to load in, the tensor index under the layout's names, and the check that names
and shapes are exactly what the config implies (``pretrained.py``, ``electra_layout.py``
and ``sentence_embeddings.py`` share it)."""
from __future__ import annotations

import numpy as np

from .layout import their_shapes
from .safetensors_io import read_tensors, tensor_index

DTYPES = {"float32": np.float32, "float64": np.float64}


def pick_dtype(dtype, index: dict):
    """The requested dtype, or float64 when every stored tensor is float64, else float32."""
    if dtype is not None:
        if np.dtype(dtype).name not in DTYPES:
            raise ValueError(f"dtype must be float32 or float64, got {np.dtype(dtype).name}")
        return np.dtype(dtype).type
    return np.float64 if {info.dtype for info in index.values()} == {"F64"} else np.float32


# LayerNorm parameters under the names of Google's TensorFlow BERT, which files converted from it
# still use (bert-base-uncased's model.safetensors among them); transformers renames them alike
LEGACY_NAMES = {"LayerNorm.gamma": "LayerNorm.weight", "LayerNorm.beta": "LayerNorm.bias"}


def _modern_name(name: str) -> str:
    for old, new in LEGACY_NAMES.items():
        if name.endswith(old):
            return name[:-len(old)] + new
    return name


def layout_index(folder, layout) -> dict:
    """The folder's tensor index under the names of ``layout`` (a bare file's names get its
    prefix, ``LEGACY_NAMES`` their present names), buffers left out."""
    index = {}
    for name, info in tensor_index(folder).items():
        modern = _modern_name(name)
        if modern in index:
            both = " and ".join(sorted({index[modern].key, name}))
            raise ValueError(f"{folder}: tensor {modern} is stored twice, as {both}")
        index[modern] = info
    if not any(name.startswith(layout.PREFIX) for name in index):     # a bare GPT2Model / LlamaModel file
        index = {(n if n == "lm_head.weight" else layout.PREFIX + n): v for n, v in index.items()}
    return {n: v for n, v in index.items() if not layout.is_buffer(n)}


def read_checked(folder, index: dict, table, shapes: dict, copies: dict, architecture: str) -> dict:
    """The tensors ``table`` names, read after checking names and shapes against the model's
    parameter ``shapes``; ``copies`` (name -> the tensor it repeats, tied) may be stored too
    and must then equal what they copy."""
    want = their_shapes(table, shapes)
    spare = {n: source for n, source in copies.items() if n in index}   # some tied files still store them
    have = {n: v for n, v in index.items() if n not in spare}
    check_tensors(folder, want, have, architecture)
    stored = read_tensors(index, list(want) + list(spare))
    for name, source in spare.items():
        if not np.array_equal(stored[name], stored[source]):
            hint = "; set tie_word_embeddings to false to load an untied head" if name == "lm_head.weight" else ""
            raise ValueError(f"{folder}: tie_word_embeddings is true but {name} differs from {source}{hint}")
    return stored


def check_tensors(folder, want: dict, have: dict, architecture: str) -> None:
    """The file's tensors ``have`` (name -> info with ``.shape``) must be exactly ``want``
    (name -> shape): a missing, extra or mis-shaped tensor is a ValueError naming it."""
    missing = [n for n in want if n not in have]
    if missing:
        raise ValueError(f"{folder}: tensor {missing[0]} {want[missing[0]]} is missing from the safetensors file"
                         + (f" ({len(missing)} missing in all)" if len(missing) > 1 else ""))
    extra = sorted(n for n in have if n not in want)
    if extra:
        raise ValueError(f"{folder}: tensor {extra[0]} {have[extra[0]].shape} is not part of a {architecture} "
                         f"with this config.json" + (f" ({len(extra)} unexpected in all)" if len(extra) > 1 else ""))
    for name, shape in want.items():
        if have[name].shape != shape:
            raise ValueError(f"{folder}: tensor {name} has shape {have[name].shape}, but config.json implies {shape}")
