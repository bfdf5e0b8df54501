"""BERT (Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional Transformers for
Language Understanding").

Input ``[CLS] A [SEP] B [SEP]``; each token's vector is the sum of a token, a segment
(A = 0, B = 1) and a learned absolute position embedding, then LayerNorm and dropout
(section 3.2, figure 2):  e = LN(W_tok[x] + W_seg[s] + W_pos[t]).
A post-LN Transformer encoder (exact-erf GELU) reads it with *bidirectional* attention:
every position sees every real position; padding keys are masked out.
Pre-training (section 3.1) adds two losses:
- masked LM: logits = LN(GELU(h W_t^T + b_t)) W_tok^T + b (tied to the token embedding)
  at the chosen positions (``objectives/mlm.py`` chooses them, 80/10/10),
  L_mlm = mean over labelled positions of -log p(x_t);
- next sentence prediction: pooled = tanh(h_[CLS] W_p^T + b_p), a 2-way classifier,
  L_nsp = mean over the batch of -log p(IsNext label). Label 1 = IsNext, as in
  ``objectives/sentence_pairs.py`` (transformers' ``next_sentence_label`` has 0 = IsNext:
  ``interop/bert_layout.py`` swaps the two rows of ``nsp.weight`` and ``nsp.bias`` on
  import and export, and ``albert_layout.py`` those of ALBERT's SOP head).
L = L_mlm + L_nsp.

Hooks for the family (``roberta.py``, ``albert.py``, ``electra.py``): ``nsp=False`` drops the
pooler and NSP (RoBERTa); ``position_offset`` numbers each row's non-padding tokens from
padding_idx + 1 (RoBERTa, ``BertEmbeddings``); ``embedding_size`` E factorises the embedding V -> E -> C (ALBERT).

Parameters (V vocab, P max_position, C d_model, E embedding size, F d_ff; ``encoder.``):

| name | shape | note |
|---|---|---|
| embeddings.word_embeddings.weight | (V, E) | W_tok; also the MLM decoder (tied) |
| embeddings.position_embeddings.weight | (P, E) | learned positions |
| embeddings.token_type_embeddings.weight | (2, E) | segments A, B |
| embeddings.ln.weight, .bias | (E,) | LayerNorm after the sum |
| embedding_projection.weight, .bias | (C, E), (C,) | only with ``embedding_size`` (ALBERT) |
| stack.blocks.i.* | | post-LN blocks (``nn/block.py``): attn.c_attn, attn.c_proj, ln_1, mlp.c_fc, mlp.c_proj, ln_2 |
| mlm.dense.weight, .bias | (E, C), (E,) | MLM transform |
| mlm.ln.weight, .bias | (E,) | |
| mlm.bias | (V,) | MLM output bias (the decoder weight is W_tok) |
| pooler.dense.weight, .bias | (C, C), (C,) | only with NSP |
| nsp.weight, .bias | (2, C), (2,) | only with NSP |
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import NamedTuple

import numpy as np

from ...core.checks import check_ids, check_ndim, check_positive_int
from ...core.module import Module
from ...nn.dropout import Dropout
from ...nn.embedding import Embedding
from ...nn.heads import MLMHead, Pooler
from ...nn.linear import Linear
from ...nn.norms import LayerNorm
from ...nn.positions import LearnedPositions
from ...nn.stack import TransformerStack
from ...ops.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ..protocol import IGNORE
from ..registry import ModelEntry, register


@dataclass
class BertConfig:
    vocab_size: int = 64
    max_position: int = 64
    type_vocab_size: int = 2
    n_layer: int = 2
    n_head: int = 4
    d_model: int = 64
    d_ff: int = 256
    dropout: float = 0.1
    eps: float = 1e-12
    activation: str = "gelu"             # exact erf GELU, as BERT
    embedding_size: int | None = None    # ALBERT's E; None: E = d_model, no projection
    nsp: bool = True                     # RoBERTa: False (MLM only, no pooler)
    position_offset: int = 0             # RoBERTa: padding_idx + 1; positions count non-pad ids from it
    causal: bool = False                 # left-to-right attention: BERT's "LTR" ablation (section 5.1, table 5)

    def __post_init__(self) -> None:
        for name in ("vocab_size", "max_position", "type_vocab_size", "n_layer", "n_head", "d_model", "d_ff"):
            check_positive_int(name, getattr(self, name))
        if self.embedding_size is not None:
            check_positive_int("embedding_size", self.embedding_size)
        check_positive_int("position_offset", self.position_offset, minimum=0)
        if self.position_offset >= self.max_position:
            raise ValueError(f"position_offset {self.position_offset} leaves no position in max_position "
                             f"{self.max_position}")
        if self.d_model % self.n_head:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_head {self.n_head}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")

    @property
    def embed_dim(self) -> int:
        return self.d_model if self.embedding_size is None else self.embedding_size

    def to_dict(self) -> dict:
        return asdict(self)


class BertEmbeddings(Module):
    """ids, segments (B, T) -> Dropout(LN(W_tok[ids] + W_seg[segments] + W_pos[p])) (B, T, E).

    p = t (BERT). With ``position_offset`` (RoBERTa; pad = offset - 1, its padding id), p
    counts the row's non-padding ids as fairseq and transformers do: a real token at t gets
    pad + (number of non-pad ids at 0..t), a padding id gets pad itself, so a left-padded
    row numbers its first real token pad + 1 like a right-padded one."""

    def __init__(self, c: BertConfig, *, rng: np.random.Generator, dtype=np.float32):
        super().__init__()
        E = c.embed_dim
        self.word_embeddings = Embedding(c.vocab_size, E, rng=rng, std=0.02, dtype=dtype)
        self.position_embeddings = LearnedPositions(c.max_position, E, rng=rng, std=0.02, dtype=dtype)
        self.token_type_embeddings = Embedding(c.type_vocab_size, E, rng=rng, std=0.02, dtype=dtype)
        self.ln = LayerNorm(E, c.eps, dtype=dtype)
        self.drop = Dropout(c.dropout, rng=np.random.default_rng(rng.integers(2**63)) if c.dropout else None)
        self.pad = c.position_offset - 1 if c.position_offset else None

    def position_ids(self, ids: np.ndarray, start: int = 0) -> np.ndarray:
        """RoBERTa's positions (B, T): (cumsum of the non-pad ids + start) at real ids, pad at padding."""
        real = ids != self.pad                                                    # (B, T)
        return np.where(real, np.cumsum(real, axis=1) + start, 0) + self.pad      # (B, T)

    def forward(self, ids: np.ndarray, segments: np.ndarray, start: int = 0) -> np.ndarray:
        """``start``: the position of the first id (a KV-cached step continues from there)."""
        T = ids.shape[1]
        x = self.word_embeddings(ids)                                             # (B, T, E), a new array
        x += self.token_type_embeddings(segments)
        if self.pad is None:
            x += self.position_embeddings(T, start)                               # + (T, E)
        else:
            x += self.position_embeddings.at(self.position_ids(ids, start))       # + (B, T, E)
        return self.drop(self.ln(x))                                              # (B, T, E)

    def backward(self, dy: np.ndarray) -> None:
        dx = self.ln.backward(self.drop.backward(dy))                             # (B, T, E)
        self.position_embeddings.backward(dx)                                     # sums over B
        self.token_type_embeddings.backward(dx)
        self.word_embeddings.backward(dx)
        return None                                                               # ids have no gradient


class BertEncoder(Module):
    """input_ids (B, T), token_type_ids (B, T) or None (all A), attention_mask (B, T) or None
    (1 = real, 0 = padding) -> hidden states (B, T, C)."""

    def __init__(self, config: BertConfig, rng: np.random.Generator, dtype=np.float32):
        super().__init__()
        self.config = c = config
        self.embeddings = BertEmbeddings(c, rng=rng, dtype=dtype)
        self.embedding_projection = None if c.embedding_size is None else \
            Linear(c.embedding_size, c.d_model, rng=rng, std=0.02, dtype=dtype)   # ALBERT: E -> C
        self.stack = TransformerStack(
            c.n_layer, d_model=c.d_model, n_heads=c.n_head, d_ff=c.d_ff, rng=rng, norm="layer", prenorm=False,
            activation=c.activation, dropout=c.dropout, eps=c.eps, dtype=dtype)

    @property
    def max_length(self) -> int:
        return self.config.max_position - self.config.position_offset

    def check_inputs(self, input_ids, token_type_ids=None, attention_mask=None) -> tuple[np.ndarray, np.ndarray | None]:
        """Validate the three inputs; -> (segments (B, T), boolean real-token mask (B, T) or None)."""
        c = self.config
        check_ids("input_ids", input_ids, c.vocab_size)
        check_ndim("input_ids", input_ids, 2)
        B, T = input_ids.shape
        if T > self.max_length:
            raise ValueError(f"input_ids: sequence length {T} exceeds max_position {c.max_position}"
                             + (f" minus position_offset {c.position_offset}" if c.position_offset else ""))
        if token_type_ids is None:
            token_type_ids = np.zeros_like(input_ids)
        else:
            if not isinstance(token_type_ids, np.ndarray) or not np.issubdtype(token_type_ids.dtype, np.integer):
                raise TypeError("token_type_ids: expected an integer array of segment ids")
            if token_type_ids.size and (token_type_ids.min() < 0 or token_type_ids.max() >= c.type_vocab_size):
                bad = sorted(set(np.unique(token_type_ids).tolist()) - set(range(c.type_vocab_size)))
                raise ValueError(f"token_type_ids: expected segment ids 0 (A) to {c.type_vocab_size - 1}, got {bad}")
            if token_type_ids.shape != input_ids.shape:
                raise ValueError(f"token_type_ids: expected shape {input_ids.shape} (as input_ids), "
                                 f"got {token_type_ids.shape}")
        real = None
        if attention_mask is not None:
            attention_mask = np.asarray(attention_mask)
            if attention_mask.shape != input_ids.shape:
                raise ValueError(f"attention_mask: expected shape {input_ids.shape} (as input_ids), "
                                 f"got {attention_mask.shape}")
            if not np.isin(attention_mask, (0, 1)).all():
                raise ValueError("attention_mask: expected 1 (real token) or 0 (padding) everywhere, "
                                 f"got values {np.unique(attention_mask).tolist()}")
            real = attention_mask.astype(bool)                                    # (B, T)
            if not real.any(axis=1).all():
                raise ValueError(f"attention_mask: rows {np.flatnonzero(~real.any(axis=1)).tolist()} have no "
                                 "real token")
        return token_type_ids, real

    def forward(self, input_ids: np.ndarray, token_type_ids: np.ndarray | None = None,
                attention_mask: np.ndarray | None = None) -> np.ndarray:
        segments, real = self.check_inputs(input_ids, token_type_ids, attention_mask)
        x = self.embeddings(input_ids, segments)                                  # (B, T, E)
        if self.embedding_projection is not None:
            x = self.embedding_projection(x)                                      # (B, T, E) -> (B, T, C)
        keys = None if real is None or real.all() else real[:, None, :]           # (B, 1, T): may attend
        return self.stack(x, mask=keys, causal=self.config.causal)   # (B, T, C); causal: left to right

    def backward(self, dh: np.ndarray) -> None:
        """dh (B, T, C): adds into every parameter's gradient, embeddings included."""
        dx = self.stack.backward(dh).dx                                           # (B, T, C)
        if self.embedding_projection is not None:
            dx = self.embedding_projection.backward(dx)                           # (B, T, E)
        self.embeddings.backward(dx)
        return None


class BertOutput(NamedTuple):
    loss: np.ndarray | None         # () L_mlm + L_nsp (the parts that have labels), or None
    mlm_loss: np.ndarray | None     # ()
    nsp_loss: np.ndarray | None     # ()
    logits: np.ndarray              # (B, T, V) MLM scores
    nsp_logits: np.ndarray | None   # (B, 2) IsNext scores (label 1 = B follows A)


class BertForPreTraining(Module):
    """``loss, logits = model(input_ids, token_type_ids, attention_mask, mlm_labels, nsp_labels)``.

    mlm_labels (B, T): the original id at predicted positions, IGNORE elsewhere; labels on
    padding (attention_mask 0) never count. nsp_labels (B,) 1 = IsNext, 0 = NotNext.
    ``outputs(...)`` returns every part (``BertOutput``); ``backward(dloss)`` follows it.
    """
    has_backward = True

    def __init__(self, config: BertConfig, *, rng: np.random.Generator, dtype=np.float32, name: str = "bert"):
        super().__init__()
        self.name, self.config = name, config
        c = config
        self.encoder = BertEncoder(c, rng, dtype)
        self.mlm = MLMHead(c.d_model, c.vocab_size, rng=rng, tied_to=self.encoder.embeddings.word_embeddings,
                           embedding_size=c.embedding_size, activation=c.activation, eps=c.eps, dtype=dtype)
        self.pooler = Pooler(c.d_model, rng=rng, dtype=dtype) if c.nsp else None
        self.nsp = Linear(c.d_model, 2, rng=rng, std=0.02, dtype=dtype) if c.nsp else None
        self._cache = None

    # -- the model protocol ----------------------------------------------------------
    @property
    def block_size(self) -> int:
        return self.encoder.max_length

    def new_cache(self) -> None:
        return None                           # bidirectional: no incremental decoding

    def spec(self) -> dict:
        return {"model": self.name, **self.config.to_dict()}

    # -- forward / backward ------------------------------------------------------------
    def outputs(self, input_ids: np.ndarray, token_type_ids: np.ndarray | None = None,
                attention_mask: np.ndarray | None = None, mlm_labels: np.ndarray | None = None,
                nsp_labels: np.ndarray | None = None) -> BertOutput:
        h = self.encoder(input_ids, token_type_ids, attention_mask)               # (B, T, C)
        logits = self.mlm(h)                                                      # (B, T, V)
        mlm_loss = mlm_cache = None
        if mlm_labels is not None:
            mlm_labels = self._mlm_targets(mlm_labels, input_ids.shape, attention_mask)
            mlm_loss, mlm_cache = cross_entropy_forward(logits, mlm_labels)      # ()
        nsp_logits = nsp_loss = nsp_cache = None
        if self.nsp is not None:
            nsp_logits = self.nsp(self.pooler(h))                                 # (B, 2)
            if nsp_labels is not None:
                nsp_labels = self._nsp_targets(nsp_labels, input_ids.shape[0])
                nsp_loss, nsp_cache = cross_entropy_forward(nsp_logits, nsp_labels)   # ()
        elif nsp_labels is not None:
            raise ValueError("nsp_labels were given but this model has no NSP head (config.nsp is False)")
        parts = [x for x in (mlm_loss, nsp_loss) if x is not None]
        loss = None if not parts else sum(parts[1:], parts[0])
        self._cache = (mlm_cache, nsp_cache, h.shape, h.dtype)
        return BertOutput(loss, mlm_loss, nsp_loss, logits, nsp_logits)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, mlm_labels=None, nsp_labels=None):
        out = self.outputs(input_ids, token_type_ids, attention_mask, mlm_labels, nsp_labels)
        return out.loss, out.logits

    @staticmethod
    def _mlm_targets(labels, shape, attention_mask) -> np.ndarray:
        if not isinstance(labels, np.ndarray) or not np.issubdtype(labels.dtype, np.integer):
            raise TypeError("mlm_labels: expected an integer array (token ids, IGNORE = -100 elsewhere)")
        if labels.shape != shape:
            raise ValueError(f"mlm_labels: expected shape {shape} (as input_ids), got {labels.shape}")
        if attention_mask is not None:
            labels = np.where(np.asarray(attention_mask).astype(bool), labels, IGNORE)   # padding never counts
        if not np.any(labels != IGNORE):
            raise ValueError("mlm_labels: no predicted position in the batch (every label is IGNORE or on "
                             "padding), so the MLM loss is undefined; mask at least one real token")
        return labels

    @staticmethod
    def _nsp_targets(labels, B: int) -> np.ndarray:
        labels = np.asarray(labels)
        if not np.issubdtype(labels.dtype, np.integer):
            raise TypeError(f"nsp_labels: expected integers 0 (NotNext) or 1 (IsNext), got dtype {labels.dtype}")
        if labels.shape != (B,):
            raise ValueError(f"nsp_labels: expected shape ({B},) (one label per sequence), got {labels.shape}")
        if not np.isin(labels, (0, 1)).all():
            raise ValueError(f"nsp_labels: expected 0 (NotNext) or 1 (IsNext), got {np.unique(labels).tolist()}")
        return labels

    def backward(self, dloss: float = 1.0) -> None:
        """Back-propagate ``dloss`` through L_mlm + L_nsp (the parts the last forward had)."""
        if self._cache is None:
            raise RuntimeError("backward needs a forward first")
        mlm_cache, nsp_cache, shape, dtype = self._cache
        if mlm_cache is None and nsp_cache is None:
            raise RuntimeError("backward needs a forward with mlm_labels or nsp_labels (there is no loss)")
        dh = np.zeros(shape, dtype=dtype)                                         # (B, T, C)
        if mlm_cache is not None:
            dh += self.mlm.backward(cross_entropy_backward(dloss, mlm_cache))     # tied: into W_tok's gradient
        if nsp_cache is not None:
            dpooled = self.nsp.backward(cross_entropy_backward(dloss, nsp_cache))  # (B, C)
            dh += self.pooler.backward(dpooled)                                   # only [CLS] row
        self.encoder.backward(dh)


# -- registry entry -------------------------------------------------------------------
TINY = dict(vocab_size=11, max_position=8, n_layer=2, n_head=2, d_model=8, d_ff=16, dropout=0.1)
PAD, CLS, SEP, MASK = 0, 1, 2, 3


def tiny_batch() -> tuple[np.ndarray, ...]:
    """``[CLS] A [SEP] B [SEP]`` pairs (2, 7), the second padded, with MLM and NSP labels."""
    ids = np.array([[CLS, 4, MASK, SEP, 7, 8, SEP], [CLS, 9, SEP, MASK, SEP, PAD, PAD]])
    segments = np.array([[0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 0, 0]])
    mask = np.array([[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0, 0]])
    mlm = np.full(ids.shape, IGNORE)
    mlm[0, 2], mlm[0, 5], mlm[1, 3] = 5, 8, 10
    return ids, segments, mask, mlm, np.array([1, 0])


def perturbed(model: Module, scale: float = 0.3, seed: int = 1) -> Module:
    """Add N(0, scale) noise to every weight so attention and GELU leave their linear regime."""
    r = np.random.default_rng(seed)
    for _, p in model.named_parameters():
        p[...] += r.standard_normal(p.shape) * scale
    return model


def build(*, rng: np.random.Generator, dtype=np.float32, **settings) -> BertForPreTraining:
    return BertForPreTraining(BertConfig(**settings), rng=rng, dtype=dtype, name="bert")


def tiny() -> tuple[BertForPreTraining, tuple]:
    return perturbed(build(rng=np.random.default_rng(0), dtype=np.float64, **TINY)), tiny_batch()


register(ModelEntry(
    name="bert", title="BERT", paper="Devlin et al. 2019, BERT: Pre-training of Deep Bidirectional "
    "Transformers for Language Understanding", objective="MLM + NSP", build=build, tiny=tiny,
    lesson="15_bert", presets="minipt.recipes.encoder.PRESETS",
    recipe="minipt.recipes.encoder.bert_recipe", language_model=False, verbs=("fill", "embed")))
