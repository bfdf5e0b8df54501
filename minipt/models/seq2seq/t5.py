"""T5: the Text-to-Text Transfer Transformer (Raffel, Shazeer, Roberts, Lee, Narang,
Matena, Zhou, Li & Liu 2020, "Exploring the Limits of Transfer Learning with a Unified
Text-to-Text Transformer"), an encoder-decoder that reads text and writes text.

- **Encoder-decoder** (Sec. 2.1, after Vaswani et al. 2017): a bidirectional encoder
  over the input; a decoder with causal self-attention and cross-attention to the
  encoder's final output. Teacher forcing: the decoder reads the targets shifted right,
  starting from the pad id (``shift_right``).
- **Pre-RMSNorm, no biases** (Sec. 2.1): "layer normalization ... only rescaled and no
  additive bias": x / sqrt(mean(x^2) + eps) * g at the input of every sub-layer, a final
  one after each stack; no dense layer has a bias.
- **Relative position bias** (Sec. 2.1; Shaw et al. 2018): a learned scalar per (bucket,
  head) added to the attention scores; the bias is computed once, in the first layer, and
  shared by every layer of the stack (``nn.T5RelativeBias``; the encoder's buckets are
  bidirectional, the decoder's causal; the bucket's log ratio in float32, as the
  reference code). Cross-attention has no position bias.
- **No attention scaling**: scores are q.k (no 1/sqrt(D)); T5's init folds it into W_q,
  std (C D)^-1/2 (Mesh TensorFlow, transformers).
- **Feed-forward**: ReLU (T5 v1.0), or the gated GELU of T5 v1.1 (``ffn="gated-gelu"``,
  Shazeer 2020: w2(gelu_tanh(w1 x) * w3 x)).
- **Embeddings**: one table shared by the encoder and the decoder; with a tied output
  layer (v1.0) the decoder's output is rescaled by d_model^-1/2 before the logits
  (``scale_output``; v1.1 unties the head and does not rescale).
- Dropout (``dropout``) on the embeddings, on each residual branch, on the attention
  weights and after each stack's final norm, as T5.

Parameters (V vocab, C d_model, H heads, D = C / H, F d_ff, N buckets; encoder layer i,
decoder layer j; transformers' names in ``interop/t5_layout.py``):

| name | shape | note |
|---|---|---|
| shared.weight | (V, C) | token embedding of both stacks; the output layer when tied (its
  gradient is the sum of the three uses) |
| encoder_bias.weight | (N, H) | bidirectional buckets (encoder layer 0's table) |
| decoder_bias.weight | (N, H) | causal buckets (decoder layer 0's table) |
| encoder.blocks.i.ln_1.weight | (C,) | RMSNorm before self-attention |
| encoder.blocks.i.attn.c_attn.weight | (3C, C) | q, k, v fused |
| encoder.blocks.i.attn.c_proj.weight | (C, C) | o |
| encoder.blocks.i.ln_2.weight | (C,) | RMSNorm before the FFN |
| encoder.blocks.i.mlp.c_fc.weight, c_proj.weight | (F, C), (C, F) | ReLU: wi, wo |
| encoder.blocks.i.mlp.w1, w3, w2 .weight | (F, C), (F, C), (C, F) | gated GELU: wi_0, wi_1, wo |
| encoder.ln_f.weight | (C,) | final RMSNorm |
| decoder.blocks.j.* | | as the encoder's, plus: |
| decoder.blocks.j.ln_cross.weight | (C,) | RMSNorm before cross-attention |
| decoder.blocks.j.cross_attn.q_proj.weight | (C, C) | q |
| decoder.blocks.j.cross_attn.kv_proj.weight | (2C, C) | k, v fused |
| decoder.blocks.j.cross_attn.c_proj.weight | (C, C) | o |
| decoder.ln_f.weight | (C,) | final RMSNorm |
| lm_head.weight | (V, C) | only when untied |
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ...core.checks import check_ids, check_ndim
from ...core.module import Module, eval_mode
from ...inference.seq2seq_decoding import Encoded
from ...nn.dropout import Dropout
from ...nn.embedding import Embedding
from ...nn.kv_cache import KVCache
from ...nn.linear import Linear
from ...nn.positions import T5RelativeBias
from ...nn.stack import TransformerStack
from ...ops.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ...ops.embedding import embedding_backward, embedding_forward
from ...ops.linear import linear_backward, linear_forward
from ...recipes.t5 import PRESETS, train_t5
from ..protocol import IGNORE
from ..registry import GradcheckCase, ModelEntry, register

FFN = {"relu": "relu", "gated-gelu": "geglu"}          # T5's feed_forward_proj -> the FeedForward activation


@dataclass
class T5Config:
    vocab_size: int = 64
    d_model: int = 32
    d_ff: int = 64
    n_layer: int = 2                    # encoder layers
    n_decoder_layer: int | None = None  # default: n_layer
    n_head: int = 4
    num_buckets: int = 32
    max_distance: int = 128
    ffn: str = "relu"                   # "relu" (v1.0) | "gated-gelu" (v1.1)
    tie_embeddings: bool = True
    scale_output: bool | None = None    # default: tie_embeddings (v1.0 rescales, v1.1 does not)
    max_source_len: int = 64            # T5 has no position table: these only bound what is read
    max_target_len: int = 64
    pad_id: int = 0                     # also the decoder's start token
    dropout: float = 0.0
    eps: float = 1e-6

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "d_ff", "n_layer", "n_head", "max_source_len", "max_target_len"):
            if int(getattr(self, name)) != getattr(self, name) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if self.d_model % self.n_head:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_head {self.n_head}")
        if self.ffn not in FFN:
            raise ValueError(f"ffn must be one of {sorted(FFN)}, got {self.ffn!r}")
        if self.n_decoder_layer is None:
            self.n_decoder_layer = self.n_layer
        if self.scale_output is None:
            self.scale_output = self.tie_embeddings
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id {self.pad_id} is outside the vocabulary (0..{self.vocab_size - 1})")

    def to_dict(self) -> dict:
        return asdict(self)


def shift_right(labels: np.ndarray, start_id: int) -> np.ndarray:
    """Teacher forcing: the decoder reads (start, y_1 .. y_{T-1}) to predict (y_1 .. y_T);
    IGNORE targets are read as ``start_id`` (T5's pad), as transformers' ``_shift_right``."""
    out = np.empty_like(labels)                                       # (B, T)
    out[:, 0] = start_id
    out[:, 1:] = labels[:, :-1]
    out[out == IGNORE] = start_id
    return out


class T5(Module):
    has_backward = True

    def __init__(self, config: T5Config, *, rng: np.random.Generator, dtype=np.float32, name: str = "t5"):
        super().__init__()
        self.name, self.config = name, config
        c = config
        C, H, D, F = c.d_model, c.n_head, c.d_model // c.n_head, c.d_ff
        self.shared = Embedding(c.vocab_size, C, rng=rng, std=1.0, dtype=dtype)
        bias = dict(num_buckets=c.num_buckets, max_distance=c.max_distance, rng=rng, std=C ** -0.5, dtype=dtype)
        self.encoder_bias = T5RelativeBias(H, bidirectional=True, **bias)
        self.decoder_bias = T5RelativeBias(H, bidirectional=False, **bias)
        block = dict(d_model=C, n_heads=H, d_ff=F, rng=rng, norm="rms", prenorm=True, activation=FFN[c.ffn],
                     bias=False, dropout=c.dropout, eps=c.eps, scale=1.0, final_norm=True, dtype=dtype)
        self.encoder = TransformerStack(c.n_layer, **block)
        self.decoder = TransformerStack(c.n_decoder_layer, cross_attention=True, **block)
        sub = lambda: np.random.default_rng(rng.integers(2**63)) if c.dropout else None
        self.enc_drop_in, self.enc_drop_out = Dropout(c.dropout, rng=sub()), Dropout(c.dropout, rng=sub())
        self.dec_drop_in, self.dec_drop_out = Dropout(c.dropout, rng=sub()), Dropout(c.dropout, rng=sub())
        self.lm_head = None if c.tie_embeddings else Linear(C, c.vocab_size, bias=False, rng=rng, std=1.0,
                                                            dtype=dtype)
        self._init_like_t5(rng, C, D, F)
        self._cache = None

    def _init_like_t5(self, rng: np.random.Generator, C: int, D: int, F: int) -> None:
        """Mesh TensorFlow's init: W_q ~ N(0, 1/(C D)) (the folded 1/sqrt(D)), W_k, W_v, W_i
        ~ N(0, 1/C), W_o ~ N(0, 1/C), W_out of the FFN ~ N(0, 1/F)."""
        def fill(a: np.ndarray, std: float) -> None:
            a[...] = rng.standard_normal(a.shape) * std
        for stack in (self.encoder, self.decoder):
            for b in stack.blocks:
                for attn in (b.attn,) + ((b.cross_attn,) if b.has_cross else ()):
                    w = attn.q_proj.params["weight"] if attn.cross else attn.c_attn.params["weight"][:C]
                    fill(w, (C * D) ** -0.5)
                    rest = attn.kv_proj.params["weight"] if attn.cross else attn.c_attn.params["weight"][C:]
                    fill(rest, C ** -0.5)
                    fill(attn.c_proj.params["weight"], C ** -0.5)
                for lin in (b.mlp.w1, b.mlp.w3) if b.mlp.activation == "geglu" else (b.mlp.c_fc,):
                    fill(lin.params["weight"], C ** -0.5)
                fill((b.mlp.w2 if b.mlp.activation == "geglu" else b.mlp.c_proj).params["weight"], F ** -0.5)

    # -- the model protocol (and inference.seq2seq_decoding's) --------------------
    @property
    def block_size(self) -> int:
        return self.config.max_target_len

    @property
    def max_target_len(self) -> int:
        return self.config.max_target_len

    def new_cache(self) -> KVCache:
        """The decoder's self- and cross-attention caches (one slot per decoder layer)."""
        return KVCache(self.config.n_decoder_layer, self.config.max_target_len)

    def spec(self) -> dict:
        return {"model": self.name, **self.config.to_dict()}

    # -- encoder, decoder ---------------------------------------------------------
    def encode(self, source: np.ndarray) -> Encoded:
        """source (B, S) ids, padded with pad_id on the right -> Encoded(memory (B, S, C),
        mask (B, 1, S) of real source positions, or None when nothing is padded)."""
        c = self.config
        source = np.asarray(source)
        check_ndim("source", source, 2)
        check_ids("source", source, c.vocab_size)
        B, S = source.shape
        if S > c.max_source_len:
            raise ValueError(f"source length {S} exceeds max_source_len {c.max_source_len}")
        real = source != c.pad_id                                         # (B, S)
        if not real.any(axis=1).all():
            raise ValueError(f"source rows {np.flatnonzero(~real.any(axis=1)).tolist()} are empty (all padding)")
        mask = None if real.all() else real[:, None, :]                   # (B, 1, S)
        x, self._enc_embed = embedding_forward(source, self.shared.params["weight"])   # (B, S, C)
        bias = self.encoder_bias(S, S)                                    # (H, S, S), shared by every layer
        h = self.encoder(self.enc_drop_in(x), mask=mask, attn_bias=bias)  # (B, S, C)
        return Encoded(self.enc_drop_out(h), mask)

    def decode(self, target_in: np.ndarray, encoded: Encoded, *, cache: KVCache | None = None) -> np.ndarray:
        """target_in (B, T) ids (with a cache: the new ones, continuing its positions) ->
        logits (B, T, V)."""
        c = self.config
        target_in = np.asarray(target_in)
        check_ndim("target_in", target_in, 2)
        check_ids("target_in", target_in, c.vocab_size)
        offset = 0 if cache is None else cache.length
        B, T = target_in.shape
        if T < 1:
            raise ValueError("target_in is empty: the decoder needs at least the start token")
        if offset + T > c.max_target_len:
            raise ValueError(f"target length {offset + T} exceeds max_target_len {c.max_target_len}")
        if encoded.memory.ndim != 3 or encoded.memory.shape[0] != B:
            raise ValueError(f"encoded memory: expected (B={B}, S, C), got {encoded.memory.shape}")
        y, self._dec_embed = embedding_forward(target_in, self.shared.params["weight"])   # (B, T, C)
        bias = self.decoder_bias(T, offset + T, offset)                   # (H, T, offset + T), causal buckets
        h = self.decoder(self.dec_drop_in(y), encoded.memory, causal=True, attn_bias=bias,
                         memory_mask=encoded.mask, cache=cache)           # (B, T, C)
        scale = c.d_model ** -0.5 if c.scale_output else 1.0
        logits, lin_cache = linear_forward(self.dec_drop_out(h) * scale, self.head_weight()[0], None)  # (B, T, V)
        self._head = (lin_cache, scale)
        return logits

    def head_weight(self) -> tuple[np.ndarray, np.ndarray]:
        owner = self.shared if self.lm_head is None else self.lm_head
        return owner.params["weight"], owner.grads["weight"]          # (V, C)

    def forward(self, source: np.ndarray, target_in: np.ndarray, targets: np.ndarray | None = None):
        """Teacher forcing: source (B, S), target_in (B, T) (``shift_right`` of the targets)
        [, targets (B, T)] -> loss (mean cross-entropy over targets not IGNORE, or None),
        logits (B, T, V)."""
        encoded = self.encode(source)
        logits = self.decode(target_in, encoded)
        loss = ce = None
        if targets is not None:
            targets = np.asarray(targets)
            if targets.shape != np.shape(target_in):
                raise ValueError(f"targets: expected shape {np.shape(target_in)} (as target_in), got {targets.shape}")
            if not (targets != IGNORE).any():
                raise ValueError("targets are all IGNORE: an empty target has nothing to learn")
            loss, ce = cross_entropy_forward(logits, targets)
        self._cache = ce
        return loss, logits

    def backward(self, dloss: float = 1.0, dlogits: np.ndarray | None = None) -> None:
        """Back through the head, the decoder (its relative bias gets the sum of every
        layer's gradient), then, from the cross-attention's memory gradient, the encoder."""
        if dlogits is None:
            if self._cache is None:
                raise RuntimeError("T5.backward needs a forward with targets, or dlogits")
            dlogits = cross_entropy_backward(dloss, self._cache)       # (B, T, V)
        lin_cache, scale = self._head
        dh, dw, _ = linear_backward(dlogits, lin_cache)                # (B, T, C), (V, C)
        self.head_weight()[1][...] += dw                               # tied: into shared's gradient
        g = self.decoder.backward(self.dec_drop_out.backward(dh * scale))
        self.decoder_bias.backward(g.dattn_bias)                       # (H, T, T) summed over layers
        dW = self.shared.grads["weight"]                               # one table, three uses: sum
        dW += embedding_backward(self.dec_drop_in.backward(g.dx), self._dec_embed)
        e = self.encoder.backward(self.enc_drop_out.backward(g.dmemory))
        self.encoder_bias.backward(e.dattn_bias)
        dW += embedding_backward(self.enc_drop_in.backward(e.dx), self._enc_embed)

    def log_prob(self, source: np.ndarray, target_in: np.ndarray, targets: np.ndarray) -> float:
        """Total log-probability (nats) of ``targets`` given the source, in eval mode."""
        with eval_mode(self):
            loss, _ = self.forward(source, target_in, targets)
        return -float(loss) * int(np.sum(np.asarray(targets) != IGNORE))


# -- registry entry ---------------------------------------------------------------
TINY = dict(vocab_size=9, d_model=8, d_ff=12, n_layer=2, n_head=2, num_buckets=8, max_distance=10,
            max_source_len=8, max_target_len=8)


def tiny_batch() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """source (2, 6) with a padded row, target_in (2, 6) = shift_right(targets), targets with
    one IGNORE."""
    targets = np.array([[2, 3, 4, 5, 6, 7], [3, 1, IGNORE, 2, 3, 1]])
    return np.array([[1, 2, 3, 4, 5, 6], [6, 7, 1, 1, 0, 0]]), shift_right(targets, 0), targets


def tiny_model(seed: int = 0, **kw) -> T5:
    from ..decoder.gpt import perturbed
    model = T5(T5Config(**{**TINY, **kw}), rng=np.random.default_rng(seed), dtype=np.float64)
    return perturbed(model, scale=0.3, seed=seed + 1)


def _whole(**kw):
    def run():
        from ...core.gradcheck import check_module
        return check_module(tiny_model(**kw), *tiny_batch(), select=lambda out: out[0], max_checks=8)
    return run


def build(*, rng, dtype=np.float32, **settings) -> T5:
    return T5(T5Config(**settings), rng=rng, dtype=dtype)


register(ModelEntry(
    name="t5", title="T5", paper="Raffel et al. 2020, Exploring the Limits of Transfer Learning with a Unified "
    "Text-to-Text Transformer", objective="span corruption, then text-to-text (teacher-forced decoder)",
    build=build, tiny=lambda: (tiny_model(), tiny_batch()), lesson="19_t5", language_model=False,
    presets=PRESETS, recipe=train_t5, verbs=("generate",),
    gradchecks=(GradcheckCase("T5 v1.1", "gated GELU, untied head, padded source", _whole(
                    ffn="gated-gelu", tie_embeddings=False)),
                GradcheckCase("T5 v1.0 with dropout", "ReLU, tied, rescaled head, dropout 0.1, padded source",
                              _whole(dropout=0.1)))))
