"""A checkpoint layout: the table that maps minipt's parameter names onto another library's.

One ``Entry`` per tensor of the other library says where its numbers live in minipt:

- ``copy``: the same array under another name (``transformer.wte.weight`` <- ``wte.weight``);
- ``transpose``: the same matrix stored the other way round. GPT-2's ``Conv1D`` keeps its
  weight as (C_in, C_out) and computes x W; minipt's ``Linear`` keeps (C_out, C_in) and
  computes x W^T, so the file holds W^T of minipt's W;
- ``rows``: one block of rows of a fused minipt matrix. minipt projects q, k and v with one
  ``c_attn`` (3C, C); LLaMA keeps ``q_proj``, ``k_proj``, ``v_proj`` (C, C) apart, which
  are rows 0:C, C:2C and 2C:3C of it (``part`` 0, 1, 2 of ``parts`` 3);
- ``flip``: the same rows in reverse order, for a 2-way classifier whose labels the other
  library numbers the other way round (BERT's NSP and ALBERT's SOP: minipt's label 1 is
  IsNext / in order, transformers' label 0 is), so row k of one is row 1 - k of the other.

``perm`` reorders the channels of the residual stream, on the axis it names ("in": the
last, a weight's input columns; "out": the first, a weight's output rows or a vector),
after any of the above: "even channels first, then the odd ones" (``deinterleave``).
Marian keeps the sinusoid's sines in the first half of the channels and its cosines in
the second, where Vaswani et al. interleave them; every weight that reads or writes the
stream, reordered alike, computes the same function (``marian_layout.py``).

Every conversion is a relabelling, a transpose, a slice, a row reversal or a reordering,
all linear, so the same table carries parameters, gradients and shapes (``to_theirs``,
``from_theirs``, ``their_shapes``), and a round trip gives the very same bits back.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Entry:
    theirs: str              # the tensor's name in the other library's files
    ours: str                # the minipt parameter (``GPT.named_parameters()``) holding it
    how: str = "copy"        # "copy" | "transpose" | "rows" | "flip"
    part: int = 0            # rows: which block of rows of ``ours``
    parts: int = 1           # rows: how many equal blocks ``ours`` is cut into
    perm: str = ""           # "" | "in" | "out": the residual-stream axis reordered by ``deinterleave``


def deinterleave(n: int) -> np.ndarray:
    """Channel order [0, 2, 4, ..., 1, 3, 5, ...] of an even ``n``: theirs[j] = ours[order[j]]."""
    return np.concatenate([np.arange(0, n, 2), np.arange(1, n, 2)])


def _reorder(a: np.ndarray, perm: str, inverse: bool = False) -> np.ndarray:
    """``a`` with its ``perm`` axis deinterleaved (or, ``inverse``, interleaved back)."""
    if not perm:
        return a
    axis = -1 if perm == "in" else 0
    order = deinterleave(a.shape[axis])
    return np.take(a, np.argsort(order) if inverse else order, axis=axis)


def _check_names(entries: list[Entry], ours: dict) -> None:
    """The table and the model must name the same parameters (a layout bug otherwise)."""
    covered = {e.ours for e in entries}
    missing, extra = sorted(set(ours) - covered), sorted(covered - set(ours))
    if missing or extra:
        raise RuntimeError(f"layout table out of step with the model: parameters not mapped {missing}, "
                           f"mapped but absent {extra}")


def _rows(a: np.ndarray, e: Entry) -> np.ndarray:
    n = a.shape[0] // e.parts
    return a[e.part * n:(e.part + 1) * n]


def to_theirs(entries: list[Entry], ours: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """minipt-named arrays (parameters or gradients) -> the other library's names (copies)."""
    _check_names(entries, ours)
    out = {}
    for e in entries:
        a = ours[e.ours]
        if e.how == "copy":
            out[e.theirs] = a.copy()
        elif e.how == "transpose":
            out[e.theirs] = np.ascontiguousarray(a.T)                    # (C_out, C_in) -> (C_in, C_out)
        elif e.how == "rows":
            out[e.theirs] = np.ascontiguousarray(_rows(a, e))            # (3C, C) -> (C, C)
        elif e.how == "flip":
            out[e.theirs] = np.ascontiguousarray(a[::-1])                 # (2, ...) rows reversed
        else:
            raise ValueError(f"layout entry {e.theirs}: unknown conversion {e.how!r}")
        out[e.theirs] = np.ascontiguousarray(_reorder(out[e.theirs], e.perm))
    return out


def from_theirs(entries: list[Entry], theirs: dict[str, np.ndarray], dtype) -> dict[str, np.ndarray]:
    """The other library's arrays -> minipt-named arrays in ``dtype`` (fused rows concatenated
    in ``part`` order)."""
    out: dict[str, np.ndarray] = {}
    blocks: dict[str, list[tuple[int, np.ndarray]]] = {}
    for e in entries:
        a = _reorder(np.asarray(theirs[e.theirs]), e.perm, inverse=True)
        if e.how == "copy":
            out[e.ours] = a.astype(dtype, copy=True)
        elif e.how == "transpose":
            out[e.ours] = np.ascontiguousarray(a.T, dtype=dtype)         # (C_in, C_out) -> (C_out, C_in)
        elif e.how == "rows":
            blocks.setdefault(e.ours, []).append((e.part, a))
        elif e.how == "flip":
            out[e.ours] = np.ascontiguousarray(a[::-1], dtype=dtype)     # (2, ...) rows reversed
        else:
            raise ValueError(f"layout entry {e.theirs}: unknown conversion {e.how!r}")
    for name, parts in blocks.items():
        parts.sort(key=lambda pa: pa[0])
        out[name] = np.concatenate([a for _, a in parts], axis=0).astype(dtype)   # (3C, C)
    return out


def their_shapes(entries: list[Entry], ours: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """The shape each of their tensors must have, from the minipt model's parameter shapes."""
    out = {}
    for e in entries:
        shape = tuple(ours[e.ours])
        if e.how == "transpose":
            shape = shape[::-1]
        elif e.how == "rows":
            shape = (shape[0] // e.parts,) + shape[1:]
        out[e.theirs] = shape
    return out


def config_mismatch(config, wanted: dict, architecture: str, summary: str) -> str | None:
    """The first field of ``config`` that differs from ``wanted``, as the reason
    ``architecture`` cannot hold it ("norm='rms': GPT2LMHeadModel needs norm='layer'
    (summary)"), or None when every field matches."""
    for key, value in wanted.items():
        if getattr(config, key) != value:
            return f"{key}={getattr(config, key)!r}: {architecture} needs {key}={value!r} ({summary})"
    return None
