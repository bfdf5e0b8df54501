"""ELMo's token encoder: characters -> CNN with max-pooling -> highway -> projection.

Kim, Jernite, Sontag & Rush 2016 ("Character-Aware Neural Language Models"), as used by
ELMo (Peters et al. 2018, Sec. 3.1 and 3.4): each word is spelled as characters between a
begin-of-word and an end-of-word marker; the characters are embedded (L, C_char); filters
of several widths K slide over them (``minipt.ops.conv1d``); each filter keeps its largest
response over the word (max-pooling over time), then an activation; the pooled features
of all widths are concatenated, pass highway layers (Srivastava, Greff & Schmidhuber
2015) and a linear projection to the model width. A word never seen in training still
has a spelling, so it still gets a vector.

``CharVocab`` maps text to character ids. Ids 0-3 are ``<pad>`` (after the end marker),
``<bow>``, ``<eow>`` and ``<unk>``: **a character outside the vocabulary becomes
``<unk>``** (id 3) rather than an error, so any string can be encoded; words longer than
``max_chars - 2`` characters are cut, as ELMo cuts at 50.
"""
from __future__ import annotations

import numpy as np

from ..core import init
from ..core.module import Module
from ..ops.activations import (
    relu_backward,
    relu_forward,
    sigmoid_backward,
    sigmoid_forward,
)
from ..ops.conv1d import conv1d_backward, conv1d_forward
from .embedding import Embedding
from .linear import Linear

PAD, BOW, EOW, UNK = "<pad>", "<bow>", "<eow>", "<unk>"


class CharVocab:
    def __init__(self, chars: str | list[str], max_chars: int = 16):
        if max_chars < 3:
            raise ValueError(f"max_chars must be >= 3 (<bow>, a character, <eow>), got {max_chars}")
        self.itos = [PAD, BOW, EOW, UNK] + sorted(set(chars))
        self.stoi = {c: i for i, c in enumerate(self.itos)}
        self.max_chars = max_chars

    @property
    def size(self) -> int:
        return len(self.itos)

    def encode(self, words: list[str]) -> np.ndarray:
        """words (N,) -> char ids (N, max_chars): <bow> chars <eow> <pad>...; unknown -> <unk>."""
        ids = np.zeros((len(words), self.max_chars), dtype=np.int64)   # (N, L), <pad> = 0
        unk = self.stoi[UNK]
        for n, w in enumerate(words):
            body = [self.stoi.get(ch, unk) for ch in w[:self.max_chars - 2]]
            ids[n, :len(body) + 2] = [self.stoi[BOW], *body, self.stoi[EOW]]
        return ids


class Conv1d(Module):
    def __init__(self, in_channels: int, out_channels: int, width: int, *, rng: np.random.Generator,
                 dtype=np.float32):
        super().__init__()
        k = 1.0 / np.sqrt(in_channels * width)
        self.add_param("weight", rng.uniform(-k, k, (out_channels, in_channels, width)).astype(dtype))  # (O, C, K)
        self.add_param("bias", init.zeros(out_channels, dtype))                                       # (O,)
        self._cache = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        y, self._cache = conv1d_forward(x, self.params["weight"], self.params["bias"])
        return y                                                     # (N, L - K + 1, O)

    def backward(self, dy: np.ndarray) -> np.ndarray:
        dx, dw, db = conv1d_backward(dy, self._cache)
        self.grads["weight"] += dw
        self.grads["bias"] += db
        return dx


class Highway(Module):
    """y = t * relu(x W_H^T + b_H) + (1 - t) * x,  t = sigmoid(x W_T^T + b_T): the gate t
    chooses between transforming and carrying. b_T starts at -2 (Srivastava et al. advise
    a negative transform bias), so at first a layer mostly carries its input."""

    def __init__(self, dim: int, *, rng: np.random.Generator, dtype=np.float32):
        super().__init__()
        self.transform = Linear(dim, dim, rng=rng, std=None, dtype=dtype)
        self.gate = Linear(dim, dim, rng=rng, std=None, dtype=dtype)
        self.gate.params["bias"][...] = -2.0
        self._cache = None

    def forward(self, x: np.ndarray) -> np.ndarray:
        h, rc = relu_forward(self.transform(x))                      # (N, D)
        t, sc = sigmoid_forward(self.gate(x))                        # (N, D)
        self._cache = (x, h, t, rc, sc)
        return t * h + (1.0 - t) * x

    def backward(self, dy: np.ndarray) -> np.ndarray:
        x, h, t, rc, sc = self._cache
        dx = dy * (1.0 - t)                                          # carry path
        dx = dx + self.transform.backward(relu_backward(dy * t, rc))  # transform path
        dx = dx + self.gate.backward(sigmoid_backward(dy * (h - x), sc))  # gate path
        return dx


class CharCNN(Module):
    """char ids (..., L) -> token vectors (..., D). ``filters``: (width, count) pairs."""

    def __init__(self, n_chars: int, char_dim: int, filters: tuple[tuple[int, int], ...], n_highway: int,
                 out_dim: int, *, rng: np.random.Generator, activation: str = "relu", dtype=np.float32):
        super().__init__()
        if activation not in ("relu", "tanh"):
            raise ValueError(f"activation must be 'relu' or 'tanh', got {activation!r}")
        self.char_embedding = Embedding(n_chars, char_dim, rng=rng, std=1.0, dtype=dtype)
        self.convs = [Conv1d(char_dim, n, k, rng=rng, dtype=dtype) for k, n in filters]
        total = sum(n for _, n in filters)
        self.highways = [Highway(total, rng=rng, dtype=dtype) for _ in range(n_highway)]
        self.projection = Linear(total, out_dim, rng=rng, std=None, dtype=dtype)
        self.activation, self.max_width = activation, max(k for k, _ in filters)
        self._cache = None

    def forward(self, chars: np.ndarray) -> np.ndarray:
        if chars.ndim < 1 or chars.shape[-1] < self.max_width:
            raise ValueError(f"chars: expected (..., L) with L >= the widest filter {self.max_width}, "
                             f"got shape {chars.shape}")
        lead, L = chars.shape[:-1], chars.shape[-1]
        e = self.char_embedding(chars.reshape(-1, L))                # (N, L, C_char)
        pooled, caches = [], []
        for conv in self.convs:
            y = conv(e)                                              # (N, L - K + 1, O)
            arg = y.argmax(axis=1)                                   # (N, O) max-pooling over time
            m = np.take_along_axis(y, arg[:, None, :], axis=1)[:, 0]  # (N, O)
            a = np.maximum(m, 0) if self.activation == "relu" else np.tanh(m)
            pooled.append(a)
            caches.append((arg, y.shape, m, a))
        x = np.concatenate(pooled, axis=-1)                          # (N, sum O)
        for hw in self.highways:
            x = hw(x)
        out = self.projection(x)                                     # (N, D)
        self._cache = (caches, lead)
        return out.reshape(*lead, out.shape[-1])                     # (..., D)

    def backward(self, dy: np.ndarray) -> None:
        caches, lead = self._cache
        dx = self.projection.backward(dy.reshape(-1, dy.shape[-1]))  # (N, sum O)
        for hw in reversed(self.highways):
            dx = hw.backward(dx)
        de, start = None, 0
        for conv, (arg, shape, m, a) in zip(self.convs, caches):
            O = shape[2]
            da = dx[:, start:start + O]
            start += O
            dm = da * (m > 0) if self.activation == "relu" else da * (1.0 - a * a)   # (N, O)
            dconv = np.zeros(shape, dtype=dm.dtype)                  # (N, Lo, O)
            np.put_along_axis(dconv, arg[:, None, :], dm[:, None, :], axis=1)   # to the argmax only
            d = conv.backward(dconv)                                 # (N, L, C_char)
            de = d if de is None else de + d
        self.char_embedding.backward(de)
        return None                                                  # char ids have no gradient
