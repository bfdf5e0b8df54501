"""Causal language modelling on packed documents (GPT, Radford et al. 2018; RoBERTa's
FULL-SENTENCES packing, Liu et al. 2019): documents joined with an end-of-text token into
one stream, cut into (B, T + 1) rows; inputs x = row[:-1], targets y = row[1:]."""
from __future__ import annotations

import numpy as np

from ..core.checks import check_positive_int
from .common import check_ids_array


def pack_documents(docs: list, eot_id: int, block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """docs: token-id lists -> x, y (N, block_size): every document followed by
    ``eot_id``; the stream's tail that does not fill a row is dropped."""
    if not docs:
        raise ValueError("pack_documents: no documents")
    check_positive_int("block_size", block_size)
    stream = np.concatenate([np.append(check_ids_array("document", d, 1), eot_id) for d in docs])
    n = (len(stream) - 1) // block_size
    if n == 0:
        raise ValueError(f"the packed stream has {len(stream)} tokens; one block needs {block_size + 1}")
    rows = stream[: n * block_size + 1]
    x = rows[:-1].reshape(n, block_size)                       # (N, T)
    y = rows[1:].reshape(n, block_size)                        # (N, T), shifted by one
    return x, y
