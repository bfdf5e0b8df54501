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
from ...core.module import Module
from ...nn.dropout import Dropout
from ...nn.embedding import Embedding
from ...nn.kv_cache import KVCache
from ...nn.linear import Linear
from ...nn.positions import T5RelativeBias
from ...nn.stack import TransformerStack
from ...ops.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ...ops.embedding import embedding_backward, embedding_forward
from ...ops.linear import linear_backward, linear_forward
from ..protocol import IGNORE, log_prob_from_loss
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
    block_size: int = 64                # longest source or target read at once
    pad_id: int = 0                     # also the decoder's start token
    dropout: float = 0.0
    eps: float = 1e-6

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "d_ff", "n_layer", "n_head", "block_size"):
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


def _source_mask(attention_mask: np.ndarray | None, shape: tuple[int, int]) -> np.ndarray | None:
    """attention_mask (B, S) of 1 (read) / 0 (padding) -> may-attend (B, 1, S), or None."""
    if attention_mask is None:
        return None
    m = np.asarray(attention_mask)
    if m.shape != shape:
        raise ValueError(f"attention_mask: expected shape {shape} (as input_ids), got {m.shape}")
    if not np.isin(m, (0, 1)).all():
        raise ValueError("attention_mask must hold 1 (read) and 0 (padding) only")
    if not m.any(axis=1).all():
        raise ValueError(f"attention_mask: row {int(np.argmin(m.any(axis=1)))} reads no token")
    return m.astype(bool)[:, None, :]                                 # (B, 1, S)


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

    # -- the model protocol -------------------------------------------------------
    @property
    def block_size(self) -> int:
        return self.config.block_size

    def new_cache(self) -> KVCache:
        """The decoder's self- and cross-attention caches (one slot per decoder layer)."""
        return KVCache(self.config.n_decoder_layer)

    def spec(self) -> dict:
        return {"model": self.name, **self.config.to_dict()}

    def _check_ids(self, name: str, ids: np.ndarray, offset: int = 0) -> None:
        check_ndim(name, ids, 2)
        check_ids(name, ids, self.config.vocab_size)
        if offset + ids.shape[1] > self.config.block_size:
            raise ValueError(f"{name}: length {offset + ids.shape[1]} exceeds the maximum (block_size "
                             f"{self.config.block_size})")

    # -- encoder, decoder ---------------------------------------------------------
    def encode(self, input_ids: np.ndarray, attention_mask: np.ndarray | None = None) -> np.ndarray:
        """input_ids (B, S) [, attention_mask (B, S) 1/0] -> the encoder's output (B, S, C)."""
        self._check_ids("input_ids", input_ids)
        B, S = input_ids.shape
        mask = _source_mask(attention_mask, (B, S))                   # (B, 1, S) or None
        x, self._enc_embed = embedding_forward(input_ids, self.shared.params["weight"])   # (B, S, C)
        x = self.enc_drop_in(x)
        bias = self.encoder_bias(S, S)                                # (H, S, S), shared by every layer
        return self.enc_drop_out(self.encoder(x, mask=mask, attn_bias=bias))   # (B, S, C)

    def decode(self, decoder_input_ids: np.ndarray, memory: np.ndarray, attention_mask: np.ndarray | None = None,
               cache: KVCache | None = None) -> np.ndarray:
        """decoder_input_ids (B, T), the encoder's output (B, S, C) -> logits (B, T, V).
        With ``cache`` the ids continue the cached positions (inference only)."""
        offset = 0 if cache is None else cache.length
        self._check_ids("decoder_input_ids", decoder_input_ids, offset)
        B, T = decoder_input_ids.shape
        if memory.ndim != 3 or memory.shape[0] != B:
            raise ValueError(f"memory: expected (B={B}, S, C), got {memory.shape}")
        mask = _source_mask(attention_mask, memory.shape[:2])         # (B, 1, S) or None
        y, self._dec_embed = embedding_forward(decoder_input_ids, self.shared.params["weight"])  # (B, T, C)
        y = self.dec_drop_in(y)
        bias = self.decoder_bias(T, offset + T, offset)               # (H, T, offset + T), causal buckets
        h = self.dec_drop_out(self.decoder(y, memory, causal=True, attn_bias=bias, memory_mask=mask,
                                           cache=cache))              # (B, T, C)
        scale = self.config.d_model ** -0.5 if self.config.scale_output else 1.0
        logits, lin_cache = linear_forward(h * scale, self.head_weight()[0], None)   # (B, T, V)
        self._head = (lin_cache, scale)
        return logits

    def head_weight(self) -> tuple[np.ndarray, np.ndarray]:
        owner = self.shared if self.lm_head is None else self.lm_head
        return owner.params["weight"], owner.grads["weight"]          # (V, C)

    def forward(self, input_ids: np.ndarray, labels: np.ndarray | None = None,
                attention_mask: np.ndarray | None = None, *, decoder_input_ids: np.ndarray | None = None):
        """input_ids (B, S), labels (B, T) [, attention_mask (B, S)] -> loss (or None), logits
        (B, T, V). The decoder reads ``shift_right(labels)`` unless ``decoder_input_ids`` is given."""
        if decoder_input_ids is None:
            if labels is None:
                raise ValueError("T5 needs labels or decoder_input_ids for its decoder")
            check_ndim("labels", labels, 2)
            decoder_input_ids = shift_right(labels, self.config.pad_id)
        if labels is not None and labels.shape != decoder_input_ids.shape:
            raise ValueError(f"labels: expected shape {decoder_input_ids.shape}, got {labels.shape}")
        if labels is not None and labels.shape[0] != input_ids.shape[0]:
            raise ValueError(f"labels: batch {labels.shape[0]} differs from input_ids' {input_ids.shape[0]}")
        memory = self.encode(input_ids, attention_mask)               # (B, S, C)
        logits = self.decode(decoder_input_ids, memory, attention_mask)   # (B, T, V)
        loss, ce_cache = (None, None)
        if labels is not None:
            loss, ce_cache = cross_entropy_forward(logits, labels)
        self._cache = ce_cache
        return loss, logits

    def backward(self, dloss: float = 1.0, dlogits: np.ndarray | None = None) -> None:
        """Back through the head, the decoder (its relative bias gets the sum of every
        layer's gradient), then, from the cross-attention's memory gradient, the encoder."""
        if dlogits is None:
            if self._cache is None:
                raise RuntimeError("T5.backward needs a forward with labels, or dlogits")
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

    def log_prob(self, input_ids: np.ndarray, labels: np.ndarray) -> float:
        """Total log-probability (nats) of ``labels`` given ``input_ids``, in eval mode."""
        return log_prob_from_loss(self, input_ids, labels)


# -- registry entry ---------------------------------------------------------------
TINY = dict(vocab_size=9, d_model=8, d_ff=12, n_layer=2, n_head=2, num_buckets=8, max_distance=10, block_size=8)


def tiny_batch() -> tuple[np.ndarray, np.ndarray]:
    """input_ids (2, 6), labels (2, 6) with one ignored target."""
    return (np.array([[1, 2, 3, 4, 5, 6], [6, 0, 1, 1, 2, 8]]),
            np.array([[2, 3, 4, 5, 6, 7], [0, 1, IGNORE, 2, 3, 1]]))


def tiny_model(seed: int = 0, **kw) -> T5:
    from ..decoder.gpt import perturbed
    model = T5(T5Config(**{**TINY, **kw}), rng=np.random.default_rng(seed), dtype=np.float64)
    return perturbed(model, scale=0.3, seed=seed + 1)


def _whole(**kw):
    def run():
        from ...core.gradcheck import check_module
        model = tiny_model(**kw)
        ids, labels = tiny_batch()
        mask = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
        return check_module(model, ids, labels, mask, select=lambda out: out[0], max_checks=12)
    return run


def build(*, rng, dtype=np.float32, **settings) -> T5:
    return T5(T5Config(**settings), rng=rng, dtype=dtype)


register(ModelEntry(
    name="t5", title="T5", paper="Raffel et al. 2020, Exploring the Limits of Transfer Learning with a Unified "
    "Text-to-Text Transformer", objective="text-to-text (teacher-forced decoder)",
    build=build, tiny=lambda: (tiny_model(), tiny_batch()), lesson="19_t5",
    gradchecks=(GradcheckCase("T5 v1.1", "gated GELU, untied head, padded source", _whole(
                    ffn="gated-gelu", tie_embeddings=False)),
                GradcheckCase("T5 v1.0 with dropout", "ReLU, tied, rescaled head, dropout 0.1, padded source",
                              _whole(dropout=0.1)))))
