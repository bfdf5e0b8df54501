"""The Transformer encoder-decoder (Vaswani, Shazeer, Parmar, Uszkoreit, Jones, Gomez,
Kaiser & Polosukhin 2017, "Attention Is All You Need").

- **Encoder** (Sec. 3.1): N blocks of bidirectional self-attention and a feed-forward
  layer; padded source positions are never attended to.
- **Decoder** (Sec. 3.1): N blocks of causal ("masked") self-attention, cross-attention
  whose keys and values are the encoder's final output ("encoder-decoder attention",
  Sec. 3.2.3) and a feed-forward layer.
- **Embeddings** (Sec. 3.4): token vectors multiplied by sqrt(d_model); one table
  shared by source and target (``share_embeddings``, as for the paper's shared
  BPE vocabulary) or two; the output layer is always the target table, transposed
  (logits = h W_tgt^T, "the same weight matrix between the two embedding layers and
  the pre-softmax linear transformation").
- **Positions** (Sec. 3.5): the fixed sinusoidal table, added to both sides; dropout
  on the sums (Sec. 5.4).
- **Teacher forcing**: training feeds the gold target shifted right
  (``target_in`` = [start, y_1 .. y_{n-1}]) and predicts ``targets`` = [y_1 .. y_n];
  padding is IGNORE in ``targets`` and sits right of every real token, so causal
  attention never lets it reach a real position.
- Post-LN blocks as in the paper by default (``prenorm=True`` puts the norm first and a
  final norm after each stack, as T5 and GPT-2 do).

``loss, logits = model(source (B, S), target_in (B, T), targets (B, T))``; the pieces
``encode`` and ``decode`` form the protocol of ``inference.seq2seq_decoding`` (greedy
and beam search with self- and cross-attention KV caches).

Parameters (V vocab, C d_model, F d_ff, N_e / N_d layers, i a block index):

| name | shape | note |
|---|---|---|
| shared.weight | (V, C) | with share_embeddings: source and target table, and the output layer |
| src_embed.weight, tgt_embed.weight | (V_src, C), (V_tgt, C) | without it; tgt_embed is the output layer |
| encoder.blocks.i.{ln_1, attn, ln_2, mlp} | as in ``nn/block.py`` | c_attn (3C, C), c_proj (C, C), c_fc (F, C), ... |
| decoder.blocks.i.{ln_1, attn, ln_cross, cross_attn, ln_2, mlp} | | cross_attn.q_proj (C, C), .kv_proj (2C, C) |
| encoder.ln_f, decoder.ln_f | (C,) | pre-LN only |
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ...core.checks import check_ids, check_ndim
from ...core.module import Module
from ...inference.seq2seq_decoding import Encoded
from ...nn.dropout import Dropout
from ...nn.embedding import Embedding
from ...nn.kv_cache import KVCache
from ...nn.positions import SinusoidalPositions
from ...nn.stack import TransformerStack
from ...ops.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ...ops.embedding import embedding_backward, embedding_forward
from ...ops.linear import linear_backward, linear_forward
from ...recipes.seq2seq import PRESETS, train_seq2seq
from ..protocol import IGNORE
from ..registry import GradcheckCase, ModelEntry, register


@dataclass
class TransformerConfig:
    vocab_size: int = 64                 # the target vocabulary (and the source's when shared)
    src_vocab_size: int | None = None    # None: as vocab_size
    share_embeddings: bool = True
    n_encoder_layers: int = 2
    n_decoder_layers: int = 2
    n_head: int = 4
    d_model: int = 64
    d_ff: int | None = None              # default 4 * d_model
    max_source_len: int = 64
    max_target_len: int = 64
    pad_id: int = 0                      # padded source positions are masked out
    prenorm: bool = False                # the paper: post-LN
    activation: str = "relu"             # the paper: max(0, x W_1 + b_1) W_2 + b_2
    dropout: float = 0.0
    eps: float = 1e-5

    def __post_init__(self) -> None:
        if self.src_vocab_size is None:
            self.src_vocab_size = self.vocab_size
        if self.share_embeddings and self.src_vocab_size != self.vocab_size:
            raise ValueError(f"share_embeddings needs one vocabulary, got src_vocab_size {self.src_vocab_size} "
                             f"and vocab_size {self.vocab_size}")
        for name in ("vocab_size", "src_vocab_size", "n_encoder_layers", "n_decoder_layers", "n_head", "d_model",
                     "max_source_len", "max_target_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.d_model % self.n_head:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_head {self.n_head}")
        if not 0 <= self.pad_id < self.src_vocab_size:
            raise ValueError(f"pad_id {self.pad_id} is outside the source vocabulary [0, {self.src_vocab_size})")
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model

    def to_dict(self) -> dict:
        return asdict(self)


class Transformer(Module):
    has_backward = True

    def __init__(self, config: TransformerConfig, *, rng: np.random.Generator, dtype=np.float32,
                 name: str = "transformer"):
        super().__init__()
        self.name, self.config = name, config
        c = config
        if c.share_embeddings:
            self.shared = Embedding(c.vocab_size, c.d_model, rng=rng, dtype=dtype)              # (V, C)
        else:
            self.src_embed = Embedding(c.src_vocab_size, c.d_model, rng=rng, dtype=dtype)      # (V_src, C)
            self.tgt_embed = Embedding(c.vocab_size, c.d_model, rng=rng, dtype=dtype)          # (V_tgt, C)
        self.positions = SinusoidalPositions(max(c.max_source_len, c.max_target_len), c.d_model, dtype=dtype)
        sub = lambda: np.random.default_rng(rng.integers(2**63))
        self.enc_drop, self.dec_drop = Dropout(c.dropout, rng=sub()), Dropout(c.dropout, rng=sub())
        block = dict(d_model=c.d_model, n_heads=c.n_head, d_ff=c.d_ff, rng=rng, norm="layer", prenorm=c.prenorm,
                     activation=c.activation, dropout=c.dropout, eps=c.eps, dtype=dtype)
        self.encoder = TransformerStack(c.n_encoder_layers, final_norm=c.prenorm, **block)
        self.decoder = TransformerStack(c.n_decoder_layers, final_norm=c.prenorm, cross_attention=True, **block)
        self.scale = float(np.sqrt(c.d_model))
        self._cache, self._lin, self._emb = None, None, {}

    # -- the model protocol ---------------------------------------------------------
    @property
    def block_size(self) -> int:
        return self.config.max_target_len

    @property
    def max_target_len(self) -> int:
        return self.config.max_target_len

    def new_cache(self) -> KVCache:
        return KVCache(self.config.n_decoder_layers, self.config.max_target_len)

    def spec(self) -> dict:
        return {"model": self.name, **self.config.to_dict()}

    def src_table(self) -> Embedding:
        return self.shared if self.config.share_embeddings else self.src_embed

    def tgt_table(self) -> Embedding:
        return self.shared if self.config.share_embeddings else self.tgt_embed

    # -- encoder and decoder ----------------------------------------------------------
    def _embed(self, table: Embedding, ids: np.ndarray, offset: int, drop: Dropout, side: str) -> np.ndarray:
        """Token vectors * sqrt(C) + positions, dropped out. The lookup goes through the op
        (not the module), so a shared table keeps the source's and the target's caches apart."""
        x, self._emb[side] = embedding_forward(ids, table.params["weight"])  # (B, T, C)
        return drop(x * self.scale + self.positions(ids.shape[1], offset))     # + PE (T, C)

    def _embed_backward(self, table: Embedding, dx: np.ndarray, side: str) -> None:
        table.grads["weight"] += embedding_backward(dx * self.scale, self._emb[side])

    def encode(self, source: np.ndarray) -> Encoded:
        """source (B, S) ids, padded with pad_id on the right -> Encoded(memory (B, S, C),
        mask (B, 1, S) of real source positions, or None when nothing is padded)."""
        c = self.config
        source = np.asarray(source)
        check_ndim("source", source, 2)
        check_ids("source", source, c.src_vocab_size)
        if source.shape[1] > c.max_source_len:
            raise ValueError(f"source length {source.shape[1]} exceeds max_source_len {c.max_source_len}")
        real = source != c.pad_id                                              # (B, S)
        if not real.any(axis=1).all():
            raise ValueError(f"source rows {np.flatnonzero(~real.any(axis=1)).tolist()} are empty (all padding)")
        mask = None if real.all() else real[:, None, :]                        # (B, 1, S)
        x = self._embed(self.src_table(), source, 0, self.enc_drop, "src")            # (B, S, C)
        return Encoded(self.encoder(x, mask=mask), mask)

    def decode(self, target_in: np.ndarray, encoded: Encoded, *, cache: KVCache | None = None) -> np.ndarray:
        """target_in (B, T) ids (with a cache: the new ones, continuing its positions) ->
        logits (B, T, V) = h W_tgt^T."""
        c = self.config
        target_in = np.asarray(target_in)
        check_ndim("target_in", target_in, 2)
        check_ids("target_in", target_in, c.vocab_size)
        offset = 0 if cache is None else cache.length
        if target_in.shape[1] < 1:
            raise ValueError("target_in is empty: the decoder needs at least the start token")
        if offset + target_in.shape[1] > c.max_target_len:
            raise ValueError(f"target length {offset + target_in.shape[1]} exceeds max_target_len {c.max_target_len}")
        y = self._embed(self.tgt_table(), target_in, offset, self.dec_drop, "tgt")    # (B, T, C)
        h = self.decoder(y, encoded.memory, causal=True, memory_mask=encoded.mask, cache=cache)   # (B, T, C)
        logits, self._lin = linear_forward(h, self.tgt_table().params["weight"], None)             # (B, T, V)
        return logits

    def forward(self, source: np.ndarray, target_in: np.ndarray, targets: np.ndarray | None = None):
        """Teacher forcing: -> loss (mean cross-entropy over targets not IGNORE, or None), logits (B, T, V)."""
        encoded = self.encode(source)
        logits = self.decode(target_in, encoded)
        loss = ce = None
        if targets is not None:
            targets = np.asarray(targets)
            if targets.shape != target_in.shape:
                raise ValueError(f"targets: expected shape {target_in.shape} (as target_in), got {targets.shape}")
            if not (targets != IGNORE).any():
                raise ValueError("targets are all IGNORE: an empty target has nothing to learn")
            loss, ce = cross_entropy_forward(logits, targets)
        self._cache = (self._lin, ce)
        return loss, logits

    def backward(self, dloss: float = 1.0, dlogits: np.ndarray | None = None) -> None:
        if self._cache is None:
            raise RuntimeError("Transformer.backward needs a forward first")
        lin, ce = self._cache
        if dlogits is None:
            if ce is None:
                raise RuntimeError("backward needs a forward with targets, or dlogits")
            dlogits = cross_entropy_backward(dloss, ce)                        # (B, T, V)
        dh, dw, _ = linear_backward(dlogits, lin)                              # (B, T, C), (V, C)
        self.tgt_table().grads["weight"] += dw                                 # the tied output layer
        g = self.decoder.backward(dh)                                          # dx (B, T, C), dmemory (B, S, C)
        self._embed_backward(self.tgt_table(), self.dec_drop.backward(g.dx), "tgt")
        dsrc = self.encoder.backward(g.dmemory).dx                             # (B, S, C)
        self._embed_backward(self.src_table(), self.enc_drop.backward(dsrc), "src")

    def log_prob(self, source: np.ndarray, target_in: np.ndarray, targets: np.ndarray) -> float:
        """Total log-probability (nats) of ``targets`` given the source, in eval mode
        (a conditional language model: the protocol's log_prob with the source added)."""
        from ...core.module import eval_mode
        with eval_mode(self):
            loss, _ = self.forward(source, target_in, targets)
        return -float(loss) * int(np.sum(np.asarray(targets) != IGNORE))


# -- registry entry -------------------------------------------------------------------
TINY = dict(vocab_size=9, n_encoder_layers=2, n_decoder_layers=2, n_head=2, d_model=8, d_ff=12, activation="gelu",
            max_source_len=6, max_target_len=5, pad_id=0)


def tiny_batch() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """source (2, 5) with a padded row, target_in (2, 4), targets (2, 4) with padding IGNORE'd."""
    return (np.array([[3, 4, 5, 6, 2], [7, 8, 3, 0, 0]]),
            np.array([[1, 5, 6, 7], [1, 8, 4, 0]]),
            np.array([[5, 6, 7, 2], [8, 4, 2, IGNORE]]))


def build(*, rng, dtype=np.float32, **settings) -> Transformer:
    return Transformer(TransformerConfig(**settings), rng=rng, dtype=dtype)


def tiny(**overrides):
    from ..decoder.gpt import perturbed
    model = build(rng=np.random.default_rng(0), dtype=np.float64, **{**TINY, **overrides})
    return perturbed(model), tiny_batch()


def _check_separate():
    """Whole model with separate source (V_src 11) and target (V 9) tables, pre-LN."""
    from ...core.gradcheck import check_module
    model, (src, tin, tgt) = tiny(share_embeddings=False, src_vocab_size=11, prenorm=True)
    return check_module(model, src + (src > 0), tin, tgt, select=lambda out: out[0], max_checks=6)


register(ModelEntry(
    name="transformer", title="Transformer (encoder-decoder)",
    paper="Vaswani et al. 2017, Attention Is All You Need",
    objective="teacher-forced cross-entropy on the target", build=build, tiny=tiny,
    lesson="18_encoder_decoder", presets=PRESETS, recipe=train_seq2seq, language_model=False,
    verbs=("generate",),
    gradchecks=(GradcheckCase("Transformer, two tables", "separate source/target embeddings, pre-LN",
                              _check_separate),)))
