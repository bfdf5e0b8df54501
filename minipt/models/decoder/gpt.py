"""The decoder-only family: GPT-1, GPT-2, GPT-3 and a LLaMA-style model.

- GPT-1 (Radford et al. 2018, "Improving Language Understanding by Generative
  Pre-Training"): h0 = U W_e + W_p (learned positions), post-LN blocks with masked
  self-attention, GELU, P(u) = softmax(h_n W_e^T) (output tied to the token embedding),
  N(0, 0.02) init. GELU as OpenAI's released code computes it: the tanh approximation
  0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as ``transformers``' OpenAIGPT does
  (``afn: "gelu"``), so ``interop`` can load and save the ``openai-gpt`` layout.
- GPT-2 (Radford et al. 2019): LayerNorm moved to the input of each sub-block (pre-LN),
  a final LayerNorm after the last block, residual projections initialised with std
  0.02 / sqrt(2 N).
- GPT-3 (Brown et al. 2020): GPT-2 with layers alternating dense and locally banded
  sparse attention (here: a causal band of ``window`` tokens on odd layers).
- LLaMA-style models (``llama.py``) are the same class with another config.

Every model meets the protocol of ``models/protocol.py``: ``loss, logits =
model(idx, targets)``, ``model.backward(dloss=1.0)``, ``block_size``, ``new_cache()``,
``log_prob``, ``spec()``. The entries ``gpt1``, ``gpt`` (GPT-2) and ``gpt3`` are
registered at the bottom of this file.

Parameters (V vocab, T block_size, C d_model, F d_ff, L n_layer; ``h.blocks.i``):

| name | shape | note |
|---|---|---|
| wte.weight | (V, C) | token embedding W_e; also the output layer when tied |
| wpe.weight | (T, C) | learned positions W_p |
| h.blocks.i.ln_1.weight, .bias | (C,) | before attention (pre-LN) or after it (GPT-1) |
| h.blocks.i.attn.c_attn.weight, .bias | (3C, C), (3C,) | fused q, k, v |
| h.blocks.i.attn.c_proj.weight, .bias | (C, C), (C,) | output projection |
| h.blocks.i.ln_2.weight, .bias | (C,) | around the MLP |
| h.blocks.i.mlp.c_fc.weight, .bias | (F, C), (F,) | |
| h.blocks.i.mlp.c_proj.weight, .bias | (C, F), (C,) | |
| h.ln_f.weight, .bias | (C,) | GPT-2/3 only |
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
from ...nn.masks import banded
from ...nn.positions import LearnedPositions
from ...nn.stack import TransformerStack
from ...ops.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ...ops.linear import linear_backward, linear_forward
from ..protocol import log_prob_from_loss
from ..registry import ModelEntry, register


@dataclass
class GPTConfig:
    vocab_size: int = 65
    block_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    d_model: int = 64
    d_ff: int | None = None               # default 4 * d_model (LLaMA: 8/3 * d_model)
    prenorm: bool = True                  # GPT-1: False (post-LN)
    final_norm: bool = True               # GPT-2's extra LayerNorm after the last block
    norm: str = "layer"                   # "layer" | "rms"
    activation: str = "gelu_tanh"         # "gelu" | "gelu_tanh" | "relu" | "swiglu"
    positions: str = "learned"            # "learned" | "rope"
    bias: bool = True
    tie_embeddings: bool = True
    scaled_residual_init: bool = True     # GPT-2: c_proj std 0.02 / sqrt(2 n_layer)
    sparse_window: int = 0                # GPT-3: odd layers attend to a causal band
    dropout: float = 0.0
    eps: float = 1e-5

    def __post_init__(self) -> None:
        if self.d_model % self.n_head:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_head {self.n_head}")
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "d_model"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.positions not in ("learned", "rope"):
            raise ValueError(f"positions must be 'learned' or 'rope', got {self.positions!r}")
        if self.d_ff is None:
            self.d_ff = (8 * self.d_model // 3) if self.activation == "swiglu" else 4 * self.d_model

    @classmethod
    def gpt1(cls, **kw) -> "GPTConfig":
        return cls(**{**dict(prenorm=False, final_norm=False, activation="gelu_tanh",
                             scaled_residual_init=False), **kw})

    @classmethod
    def gpt2(cls, **kw) -> "GPTConfig":
        return cls(**kw)

    @classmethod
    def gpt3(cls, **kw) -> "GPTConfig":
        return cls(**{**dict(sparse_window=max(kw.get("block_size", 64) // 8, 2)), **kw})

    def to_dict(self) -> dict:
        return asdict(self)


class GPT(Module):
    has_backward = True

    def __init__(self, config: GPTConfig, *, rng: np.random.Generator, dtype=np.float32, name: str = "gpt"):
        super().__init__()
        self.name = name                    # the registry entry that rebuilds it (spec)
        self.config = c = config
        self.wte = Embedding(c.vocab_size, c.d_model, rng=rng, std=0.02, dtype=dtype)
        self.wpe = LearnedPositions(c.block_size, c.d_model, rng=rng, std=0.02, dtype=dtype) \
            if c.positions == "learned" else None
        self.drop = Dropout(c.dropout, rng=np.random.default_rng(rng.integers(2**63)))
        out_std = 0.02 / np.sqrt(2 * c.n_layer) if c.scaled_residual_init else 0.02
        self.h = TransformerStack(
            c.n_layer, final_norm=c.final_norm, d_model=c.d_model, n_heads=c.n_head, d_ff=c.d_ff,
            rng=rng, norm=c.norm, prenorm=c.prenorm, activation=c.activation, bias=c.bias,
            dropout=c.dropout, rope=c.positions == "rope", eps=c.eps, out_std=float(out_std), dtype=dtype)
        self.lm_head = None if c.tie_embeddings else \
            Linear(c.d_model, c.vocab_size, bias=False, rng=rng, std=0.02, dtype=dtype)
        self._cache = None

    # -- the model protocol -------------------------------------------------------
    @property
    def block_size(self) -> int:
        return self.config.block_size

    def new_cache(self) -> KVCache:
        return KVCache(self.config.n_layer)

    def spec(self) -> dict:
        return {"model": self.name, **self.config.to_dict()}

    def layer_masks(self, T: int, S: int) -> list[np.ndarray | None]:
        """Per-layer masks: None (the causal fast path) on dense layers; GPT-3's odd
        layers see only the last ``sparse_window`` tokens."""
        w = self.config.sparse_window
        return [banded(T, w, S) if w and i % 2 == 1 else None for i in range(self.config.n_layer)]

    def hidden(self, idx: np.ndarray, cache: KVCache | None = None) -> np.ndarray:
        """Final hidden states h_n (B, T, C) for token ids (B, T); with a KV cache the ids
        continue the cached positions."""
        c = self.config
        check_ndim("idx", idx, 2)
        check_ids("idx", idx, c.vocab_size)
        T = idx.shape[1]
        offset = 0 if cache is None else cache.length
        if offset + T > c.block_size:
            raise ValueError(f"sequence length {offset + T} exceeds the context (block_size {c.block_size})")
        x = self.wte(idx)                                       # (B, T, C), a new array
        if self.wpe is not None:
            x += self.wpe(T, offset)                            # (B, T, C) + (T, C)
        x = self.drop(x)
        positions = np.arange(offset, offset + T) if c.positions == "rope" else None
        return self.h(x, causal=True, layer_masks=self.layer_masks(T, offset + T), positions=positions,
                      cache=cache)

    def head_weight(self) -> tuple[np.ndarray, np.ndarray]:
        owner = self.wte if self.lm_head is None else self.lm_head
        return owner.params["weight"], owner.grads["weight"]     # (V, C)

    def forward(self, idx: np.ndarray, targets: np.ndarray | None = None, *, cache: KVCache | None = None):
        """idx (B, T) [, targets (B, T)] -> loss (or None), logits (B, T, V)."""
        h = self.hidden(idx, cache)                             # (B, T, C)
        w, _ = self.head_weight()
        logits, lin_cache = linear_forward(h, w, None)          # (B, T, V)
        loss, ce_cache = (None, None)
        if targets is not None:
            if targets.shape != idx.shape:
                raise ValueError(f"targets: expected shape {idx.shape}, got {targets.shape}")
            loss, ce_cache = cross_entropy_forward(logits, targets)
        self._cache = (lin_cache, ce_cache)
        return loss, logits

    def backward(self, dloss: float = 1.0, dlogits: np.ndarray | None = None) -> None:
        """Backpropagate ``dloss`` through the loss (or a given ``dlogits``)."""
        lin_cache, ce_cache = self._cache
        if dlogits is None:
            if ce_cache is None:
                raise RuntimeError("backward needs a forward with targets, or dlogits")
            dlogits = cross_entropy_backward(dloss, ce_cache)   # (B, T, V)
        self.backward_hidden(self.backward_head(dlogits, lin_cache))

    def backward_head(self, dlogits: np.ndarray, lin_cache) -> np.ndarray:
        dh, dw, _ = linear_backward(dlogits, lin_cache)         # (B, T, C), (V, C)
        self.head_weight()[1][...] += dw                        # tied: adds to wte's gradient
        return dh

    def backward_hidden(self, dh: np.ndarray) -> None:
        dx = self.drop.backward(self.h.backward(dh).dx)         # (B, T, C)
        if self.wpe is not None:
            self.wpe.backward(dx)                               # sums over B
        self.wte.backward(dx)

    def log_prob(self, idx: np.ndarray, targets: np.ndarray) -> float:
        """Total log-probability (nats) of ``targets`` given ``idx``, in eval mode."""
        return log_prob_from_loss(self, idx, targets)


# -- registry entries -------------------------------------------------------------
TINY = dict(vocab_size=7, block_size=6, n_layer=2, n_head=2, d_model=8)


def tiny_batch() -> tuple[np.ndarray, np.ndarray]:
    """idx (2, 5), targets (2, 5) with one ignored target, for contract tests and gradchecks."""
    return (np.array([[1, 2, 3, 4, 5], [6, 0, 1, 1, 2]]),
            np.array([[2, 3, 4, 5, 6], [0, 1, -100, 2, 3]]))


def perturbed(model: Module, scale: float = 0.3, seed: int = 1) -> Module:
    """``model`` with N(0, scale) noise added to every weight (in place): larger weights
    make attention non-uniform, so a gradcheck exercises every path."""
    r = np.random.default_rng(seed)
    for _, p in model.named_parameters():
        p[...] += r.standard_normal(p.shape) * scale
    return model


def gpt_entry(name: str, title: str, paper: str, make, lesson: str, **tiny_kw) -> ModelEntry:
    """A registry entry for a member of the GPT family: ``make`` is its config factory."""
    def build(*, rng, dtype=np.float32, **settings):
        return GPT(make(**settings), rng=rng, dtype=dtype, name=name)

    def tiny():
        model = build(rng=np.random.default_rng(0), dtype=np.float64, **TINY, **tiny_kw)
        return perturbed(model), tiny_batch()

    return ModelEntry(name=name, title=title, paper=paper, objective="causal LM", build=build, tiny=tiny,
                      lesson=lesson, presets="minipt.recipes.char_lm.CHAR_PRESETS",
                      recipe="minipt.recipes.char_lm.train_char_lm")


register(gpt_entry("gpt1", "GPT-1", "Radford et al. 2018, Improving Language Understanding by Generative "
                   "Pre-Training", GPTConfig.gpt1, "10_gpt_finetune", dropout=0.1))
register(gpt_entry("gpt", "GPT-2", "Radford et al. 2019, Language Models are Unsupervised Multitask Learners",
                   GPTConfig.gpt2, "09_gpt"))
register(gpt_entry("gpt3", "GPT-3", "Brown et al. 2020, Language Models are Few-Shot Learners",
                   GPTConfig.gpt3, "11_in_context", sparse_window=2))
