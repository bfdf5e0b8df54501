"""BART: a denoising sequence-to-sequence autoencoder (Lewis, Liu, Goyal, Ghazvininejad,
Mohamed, Levy, Stoyanov & Zettlemoyer 2020, "BART: Denoising Sequence-to-Sequence
Pre-training for Natural Language Generation, Translation, and Comprehension").

- **Architecture** (Sec. 2.1): a bidirectional encoder over the corrupted text and an
  autoregressive decoder with cross-attention to the encoder's last layer; post-LN
  blocks as the original Transformer, GELU (exact, ``transformers``' "gelu"), learned
  positions, a LayerNorm on the embeddings of each side (``layernorm_embedding``), no
  final LayerNorm. One token table ``shared`` feeds the encoder, the decoder and the
  output layer: logits = h W_e^T + final_logits_bias.
- **Positions**: ``transformers`` stores max_positions + 2 rows and reads row t + 2 at
  position t (fairseq's padding offset), so rows 0 and 1 are never read; minipt keeps
  that table as it is so that checkpoints load unchanged.
- **Training** (Sec. 2.2): the encoder reads noised text (``objectives/bart_noise.py``:
  token masking, deletion, text infilling, sentence permutation, document rotation), the
  decoder reads the original shifted right behind ``decoder_start_id`` (teacher forcing)
  and predicts the original. Source padding (``pad_id``) is masked out of every key.
- **Fine-tuning** (Sec. 3): sequence classification from the decoder's state at the final
  token (the EOS), as ``BartForSequenceClassification`` (dense, tanh, out_proj), and
  token tagging from the decoder's top states, both in ``bart_heads.py``; generation (``encode`` + ``decode`` with a
  ``KVCache``: self-attention keys grow, cross-attention keys are computed once).

Parameters (V vocab, P max_positions, C d_model, F d_ff; ``encoder.blocks.i`` and
``decoder.blocks.i``):

| name | shape | transformers (``model.`` +) |
|---|---|---|
| shared.weight | (V, C) | shared.weight = encoder/decoder.embed_tokens = lm_head.weight |
| enc_positions.weight, dec_positions.weight | (P + 2, C) | encoder/decoder.embed_positions.weight |
| enc_ln.*, dec_ln.* | (C,) | encoder/decoder.layernorm_embedding.* |
| *.blocks.i.attn.c_attn.weight, .bias | (3C, C), (3C,) | self_attn.{q,k,v}_proj stacked |
| *.blocks.i.attn.c_proj.* | (C, C), (C,) | self_attn.out_proj.* |
| *.blocks.i.ln_1.* | (C,) | self_attn_layer_norm.* |
| decoder.blocks.i.cross_attn.q_proj.* | (C, C), (C,) | encoder_attn.q_proj.* |
| decoder.blocks.i.cross_attn.kv_proj.* | (2C, C), (2C,) | encoder_attn.{k,v}_proj stacked |
| decoder.blocks.i.cross_attn.c_proj.*, ln_cross.* | | encoder_attn.out_proj.*, encoder_attn_layer_norm.* |
| *.blocks.i.mlp.c_fc.*, mlp.c_proj.*, ln_2.* | (F, C), (C, F), (C,) | fc1.*, fc2.*, final_layer_norm.* |
| final_logits_bias | (1, V) | final_logits_bias, a buffer there: trained here |
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ...core import init
from ...core.checks import check_ids, check_ndim
from ...core.module import Module
from ...inference.seq2seq_decoding import Encoded
from ...nn.dropout import Dropout
from ...nn.embedding import Embedding
from ...nn.kv_cache import KVCache
from ...nn.norms import LayerNorm
from ...nn.stack import TransformerStack
from ...ops.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ...ops.embedding import embedding_backward, embedding_forward
from ...ops.linear import linear_backward, linear_forward
from ..protocol import IGNORE
from ..registry import GradcheckCase, ModelEntry, register

POSITION_OFFSET = 2                       # transformers' BartLearnedPositionalEmbedding.offset


@dataclass
class BartConfig:
    vocab_size: int = 64
    max_positions: int = 64               # the longest source or target
    encoder_layers: int = 2
    decoder_layers: int = 2
    n_head: int = 4
    d_model: int = 64
    d_ff: int | None = None               # default 4 * d_model
    activation: str = "gelu"              # "gelu" (exact, BART) | "gelu_tanh" | "relu"
    eps: float = 1e-5
    dropout: float = 0.0
    pad_id: int = 1                       # BART's <pad>; source keys equal to it are masked
    eos_id: int = 2                       # </s>: the classifier reads the decoder at the last one
    decoder_start_id: int = 2             # transformers' decoder_start_token_id (</s> in BART)

    def __post_init__(self) -> None:
        for name in ("vocab_size", "max_positions", "encoder_layers", "decoder_layers", "n_head", "d_model"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if self.d_model % self.n_head:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_head {self.n_head}")
        for name in ("pad_id", "eos_id", "decoder_start_id"):
            if not 0 <= getattr(self, name) < self.vocab_size:
                raise ValueError(f"{name} {getattr(self, name)} is outside the vocabulary [0, {self.vocab_size})")
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model


def shift_right(targets: np.ndarray, start_id: int, pad_id: int) -> np.ndarray:
    """Teacher forcing: targets (B, T) -> decoder input (B, T) = [start, y_0 .. y_{T-2}],
    IGNORE targets read as padding (transformers' ``shift_tokens_right``)."""
    dec = np.empty_like(targets)                                       # (B, T)
    dec[:, 0] = start_id
    dec[:, 1:] = targets[:, :-1]
    return np.where(dec == IGNORE, pad_id, dec)


class Bart(Module):
    has_backward = True

    def __init__(self, config: BartConfig, *, rng: np.random.Generator, dtype=np.float32, name: str = "bart"):
        super().__init__()
        self.name, self.config = name, config
        c = config
        self.shared = Embedding(c.vocab_size, c.d_model, rng=rng, std=0.02, dtype=dtype)     # W_e (V, C)
        stack = dict(d_model=c.d_model, n_heads=c.n_head, d_ff=c.d_ff, rng=rng, norm="layer", prenorm=False,
                     activation=c.activation, dropout=c.dropout, eps=c.eps, dtype=dtype)
        for side, layers, cross in (("enc", c.encoder_layers, False), ("dec", c.decoder_layers, True)):
            setattr(self, f"{side}_positions",
                    Embedding(c.max_positions + POSITION_OFFSET, c.d_model, rng=rng, std=0.02, dtype=dtype))
            setattr(self, f"{side}_ln", LayerNorm(c.d_model, c.eps, dtype=dtype))
            setattr(self, f"{side}_drop", Dropout(c.dropout, rng=np.random.default_rng(rng.integers(2**63))))
        self.encoder = TransformerStack(c.encoder_layers, **stack)
        self.decoder = TransformerStack(c.decoder_layers, cross_attention=True, **stack)
        self.add_param("final_logits_bias", init.zeros((1, c.vocab_size), dtype))           # (1, V)
        self._cache = None

    # -- the model protocol -------------------------------------------------------
    @property
    def block_size(self) -> int:
        return self.config.max_positions

    def new_cache(self) -> KVCache:
        return KVCache(self.config.decoder_layers, max_length=self.config.max_positions)

    def spec(self) -> dict:
        return {"model": self.name, **asdict(self.config)}

    @property
    def max_target_len(self) -> int:
        return self.config.max_positions

    def log_prob(self, src: np.ndarray, target_in: np.ndarray, targets: np.ndarray) -> float:
        """Total log-probability (nats) of ``targets`` given the source, in eval mode."""
        from ...core.module import eval_mode
        with eval_mode(self):
            loss, _ = self.forward(src, target_in, targets)
        return -float(loss) * int(np.sum(np.asarray(targets) != IGNORE))

    # -- the two halves -----------------------------------------------------------
    def _check(self, name: str, ids: np.ndarray, offset: int = 0) -> None:
        check_ndim(name, ids, 2)
        check_ids(name, ids, self.config.vocab_size)
        if offset + ids.shape[1] > self.config.max_positions:
            raise ValueError(f"{name}: length {offset + ids.shape[1]} exceeds max_positions "
                             f"{self.config.max_positions}")

    def _embed(self, side: str, x: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, tuple]:
        """x (B, T, C) token vectors + learned positions (B, T) -> LN, dropout (B, T, C)."""
        pos = getattr(self, f"{side}_positions")(positions + POSITION_OFFSET)           # (B, T, C)
        return getattr(self, f"{side}_drop")(getattr(self, f"{side}_ln")(x + pos))

    def _embed_backward(self, side: str, dy: np.ndarray) -> np.ndarray:
        dx = getattr(self, f"{side}_ln").backward(getattr(self, f"{side}_drop").backward(dy))   # (B, T, C)
        getattr(self, f"{side}_positions").backward(dx)
        return dx

    def source_mask(self, src: np.ndarray) -> np.ndarray | None:
        """Key padding (B, 1, S): False where the source holds ``pad_id``; None without padding."""
        real = src != self.config.pad_id                                                 # (B, S)
        if not real.any(axis=1).all():
            raise ValueError(f"source rows {np.flatnonzero(~real.any(axis=1)).tolist()} are empty (all padding)")
        return None if real.all() else real[:, None, :]

    def encode_embedded(self, x: np.ndarray, src_mask: np.ndarray | None) -> np.ndarray:
        """Source token vectors x (B, S, C) -> encoder memory (B, S, C)."""
        B, S, _ = x.shape
        h = self._embed("enc", x, np.broadcast_to(np.arange(S), (B, S)))
        return self.encoder(h, mask=src_mask)

    def encode(self, src: np.ndarray) -> Encoded:
        """src (B, S) ids -> Encoded(memory (B, S, C), source key mask (B, 1, S) or None), for
        decoding (``inference/seq2seq_decoding.py``); training goes through ``hidden``."""
        self._check("src", src)
        mask = self.source_mask(src)
        return Encoded(self.encode_embedded(self.params_of_shared()[src], mask), mask)

    def decode_embedded(self, y: np.ndarray, memory: np.ndarray, src_mask: np.ndarray | None,
                        cache: KVCache | None = None, positions: np.ndarray | None = None) -> np.ndarray:
        """Decoder token vectors y (B, T, C), memory (B, S, C) -> top states (B, T, C).
        Positions continue the cache (or are given, (B, T))."""
        B, T, _ = y.shape
        if positions is None:
            offset = 0 if cache is None else cache.length
            positions = np.broadcast_to(np.arange(offset, offset + T), (B, T))
        h = self._embed("dec", y, positions)
        return self.decoder(h, memory, causal=True, memory_mask=src_mask, cache=cache)

    def decode(self, target_in: np.ndarray, encoded: Encoded, *, cache: KVCache | None = None) -> np.ndarray:
        """One decoding call: ids (B, T) continuing ``cache`` -> logits (B, T, V) (inference)."""
        self._check("target_in", target_in, 0 if cache is None else cache.length)
        h = self.decode_embedded(self.params_of_shared()[target_in], encoded.memory, encoded.mask, cache)  # (B, T, C)
        return h @ self.params_of_shared().T + self.params["final_logits_bias"]          # (B, T, V)

    def params_of_shared(self) -> np.ndarray:
        return self.shared.params["weight"]                                              # (V, C)

    def hidden(self, src: np.ndarray, dec_in: np.ndarray) -> np.ndarray:
        """src (B, S), decoder input (B, T) -> decoder top states (B, T, C), for backward."""
        self._check("src", src)
        self._check("target_in", dec_in)
        if dec_in.shape[0] != src.shape[0]:
            raise ValueError(f"target_in has batch {dec_in.shape[0]}, the source {src.shape[0]}")
        W = self.params_of_shared()
        xs, cs = embedding_forward(src, W)                                               # (B, S, C)
        xd, cd = embedding_forward(dec_in, W)                                            # (B, T, C)
        src_mask = self.source_mask(src)
        h = self.decode_embedded(xd, self.encode_embedded(xs, src_mask), src_mask)
        self._emb = (cs, cd)
        return h

    def backward_embedded(self, dh: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """dh (B, T, C) of the top states -> d source vectors (B, S, C), d decoder vectors (B, T, C)."""
        g = self.decoder.backward(dh)                                                    # dx, dmemory
        dy = self._embed_backward("dec", g.dx)
        dx = self._embed_backward("enc", self.encoder.backward(g.dmemory).dx)
        return dx, dy

    def backward_hidden(self, dh: np.ndarray) -> None:
        dx, dy = self.backward_embedded(dh)
        cs, cd = self._emb
        self.shared.grads["weight"] += embedding_backward(dx, cs) + embedding_backward(dy, cd)

    # -- the LM head ---------------------------------------------------------------
    def decoder_input(self, targets: np.ndarray) -> np.ndarray:
        """The teacher-forcing input for ``targets`` (B, T)."""
        return shift_right(targets, self.config.decoder_start_id, self.config.pad_id)

    def head(self, h: np.ndarray, targets: np.ndarray | None):
        """Top states (B, T, C) -> loss (or None), logits (B, T, V) = h W_e^T + b."""
        logits, lin = linear_forward(h, self.params_of_shared(), self.params["final_logits_bias"][0])  # (B, T, V)
        loss = ce = None
        if targets is not None:
            loss, ce = cross_entropy_forward(logits, targets)
        self._cache = (lin, ce)
        return loss, logits

    def forward(self, src: np.ndarray, target_in: np.ndarray, targets: np.ndarray | None = None):
        """Teacher forcing: src (B, S), target_in (B, T) [, targets (B, T)] -> loss (or None),
        logits (B, T, V). ``decoder_input(targets)`` makes target_in from the targets."""
        if targets is not None:
            if np.shape(targets) != np.shape(target_in):
                raise ValueError(f"targets: expected shape {np.shape(target_in)} (as target_in), got {np.shape(targets)}")
            if not (np.asarray(targets) != IGNORE).any():
                raise ValueError("targets are all IGNORE: an empty target has nothing to learn")
        return self.head(self.hidden(src, np.asarray(target_in)), None if targets is None else np.asarray(targets))

    def backward(self, dloss: float = 1.0) -> None:
        if self._cache is None:
            raise RuntimeError("backward needs a forward first")
        lin, ce = self._cache
        if ce is None:
            raise RuntimeError("backward needs a forward with targets")
        dh, dw, db = linear_backward(cross_entropy_backward(dloss, ce), lin)              # (B, T, C)
        self.shared.grads["weight"] += dw                                                # tied output layer
        self.grads["final_logits_bias"][0] += db
        self.backward_hidden(dh)


# -- registry entry ------------------------------------------------------------------
TINY = dict(vocab_size=11, max_positions=8, encoder_layers=1, decoder_layers=2, n_head=2, d_model=8, d_ff=12)


def tiny_model(seed: int = 0, cls=None, **kw) -> Bart:
    """A float64 model with every weight perturbed (non-uniform attention, non-zero biases)."""
    from ..decoder.gpt import perturbed
    model = (cls or Bart)(BartConfig(**{**TINY, **kw}), rng=np.random.default_rng(seed), dtype=np.float64)
    return perturbed(model, scale=0.3, seed=seed + 1)


def tiny():
    """(src, target_in, targets): a masked source (id 3 plays <mask>) with a padded row;
    targets with one IGNORE (padding of the shorter target), shifted right behind </s>."""
    src = np.array([[0, 5, 3, 7, 2, 1], [0, 3, 9, 4, 6, 2]])
    targets = np.array([[0, 5, 6, 7, 2, IGNORE], [0, 8, 9, 4, 6, 2]])
    model = tiny_model()
    return model, (src, model.decoder_input(targets), targets)


class EmbeddingsProbe(Module):
    """Wraps a model so ``check_module`` sees the source and decoder token vectors as inputs."""

    def __init__(self, model: Bart):
        super().__init__()
        self.model = model

    def forward(self, xs, xd, src_mask, targets):
        h = self.model.decode_embedded(xd, self.model.encode_embedded(xs, src_mask), src_mask)
        return self.model.head(h, targets)[0]

    def backward(self, dloss):
        lin, ce = self.model._cache
        dh, dw, db = linear_backward(cross_entropy_backward(dloss, ce), lin)
        self.model.shared.grads["weight"] += dw
        self.model.grads["final_logits_bias"][0] += db
        return self.model.backward_embedded(dh)


def _check_inputs():
    from ...core.gradcheck import check_module
    model, (src, target_in, targets) = tiny_model(seed=2), tiny()[1]
    W = model.shared.params["weight"]
    return check_module(EmbeddingsProbe(model), W[src].copy(), W[target_in].copy(),
                        model.source_mask(src), targets, max_checks=4)


def tiny_classifier():
    from .bart_heads import BartClassifier
    ids = np.array([[0, 5, 6, 2, 1, 1], [0, 8, 9, 4, 6, 2]])
    return BartClassifier(tiny_model(seed=3, decoder_layers=1), 3, rng=np.random.default_rng(4)).to(np.float64), (ids, np.array([2, 0]))


def tiny_tagger():
    from .bart_heads import BartTagger
    ids = np.array([[0, 5, 6, 2, 1, 1], [0, 8, 9, 4, 6, 2]])
    tags = np.array([[IGNORE, 1, 0, IGNORE, IGNORE, IGNORE], [IGNORE, 2, 2, 0, 1, IGNORE]])
    return BartTagger(tiny_model(seed=5, decoder_layers=1), 3, rng=np.random.default_rng(6)).to(np.float64), (ids, tags)


def _check_head(make):
    def run():
        from ...core.gradcheck import check_module
        model, batch = make()
        from ..decoder.gpt import perturbed
        perturbed(model, scale=0.1, seed=9)
        return check_module(model, *batch, select=lambda out: out[0], max_checks=4)
    return run


def positions_setting(settings: dict) -> dict:
    """A recipe's ``max_source_len`` / ``max_target_len`` -> BART's one ``max_positions``."""
    settings = dict(settings)
    lengths = [settings.pop(k) for k in ("max_source_len", "max_target_len") if k in settings]
    if lengths:
        settings["max_positions"] = max(lengths)
    return settings


def build(*, rng, dtype=np.float32, **settings) -> Bart:
    return Bart(BartConfig(**positions_setting(settings)), rng=rng, dtype=dtype)


BART_GRADCHECKS = (
    GradcheckCase("BART from token vectors", "source and decoder inputs, padded source, tied head",
                  _check_inputs),
    GradcheckCase("BART classifier", "decoder state at the last EOS, dense-tanh-out_proj", _check_head(tiny_classifier)),
    GradcheckCase("BART tagger", "decoder top states, linear per token", _check_head(tiny_tagger)))

from ...recipes.bart_mass import BART_PRESETS, train_bart  # noqa: E402  (the recipe imports nothing from here)

register(ModelEntry(
    name="bart", title="BART", paper="Lewis et al. 2020, BART: Denoising Sequence-to-Sequence Pre-training for "
    "Natural Language Generation, Translation, and Comprehension", objective="denoising autoencoder (five noises)",
    build=build, tiny=tiny, lesson="20_bart_mass", gradchecks=BART_GRADCHECKS, language_model=False,
    presets=BART_PRESETS, recipe=train_bart, verbs=("generate",)))
