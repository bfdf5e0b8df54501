"""UniLM: one shared Transformer, four language models chosen by the attention mask
(Dong, Yang, Wang, Wei, Liu, Wang, Gao, Zhou & Hon 2019, "Unified Language Model
Pre-training for Natural Language Understanding and Generation").

- **One network** (Sec. 2.1-2.2): BERT's encoder (``models/encoder/bert.py``): token +
  learned position + segment embeddings, LayerNorm, post-LN blocks with exact GELU
  (``activation``; the toy preset takes its tanh approximation, which trains faster).
  Every layer reads the same may-attend mask M (True where the paper's M_ij = 0):
  A_l = softmax(Q K^T / sqrt(d_k) + M) V. The mode is nothing but M
  (``objectives.unified.unilm_mask``):
  - bidirectional: every token sees every token (BERT);
  - left-to-right: i sees j <= i; right-to-left: i sees j >= i;
  - sequence-to-sequence over ``[SOS] S [EOS] T [EOS]``: source tokens see the source,
    target tokens see the source and the target up to themselves.
- **Cloze in every mode** (Sec. 2.3): masked tokens ([MASK], BERT's 80/10/10) are
  predicted by BERT's MLM head (tied to the token embedding) from the top layer;
  L_cloze = mean over masked positions of -log p(x_t). **NSP** (bidirectional rows only,
  as the paper): a 2-way classifier on the pooled [SOS] vector; rows of other modes
  carry the label IGNORE. L = L_cloze + L_nsp. The batch mix (1/3 bidirectional, 1/3
  seq2seq, 1/6 left-to-right, 1/6 right-to-left) is ``objectives.unified.unilm_mode``.
- **Fine-tuning for generation** (Sec. 2.3, 3.2): seq2seq mask, target tokens only are
  masked, the final [EOS] included (``unilm_example(..., mode="seq2seq")``). Decoding
  (``generate``) appends a [MASK] after the tokens so far, predicts it, and writes the
  prediction in its place. Source tokens never see target tokens and a target token
  sees only what precedes it, so every key and value, once computed, never changes: a
  KV cache holds them; each step feeds (previous token, [MASK]) and drops the [MASK]'s
  entry afterwards (``KVCache.truncate``). Cached decoding equals re-reading the
  whole sequence (tested).

Parameters: those of BERT (``models/encoder/bert.py``'s table): ``encoder.*``,
``mlm.*`` (decoder tied to encoder.embeddings.word_embeddings.weight (V, C)),
``pooler.dense.*`` (C, C), ``nsp.*`` (2, C). No dropout in float64 checks.
"""
from __future__ import annotations

import numpy as np

from ...core.checks import check_ids, check_ndim
from ...core.module import eval_mode
from ...nn.kv_cache import KVCache
from ...objectives.unified import UNILM_MODES, unilm_mask
from ...ops.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ..encoder.bert import BertConfig, BertForPreTraining, perturbed
from ..protocol import IGNORE
from ..registry import GradcheckCase, ModelEntry, register
from .common import HiddenProbe, check_mask


class UniLM(BertForPreTraining):
    """``loss, logits = model(input_ids, token_type_ids, mask, mlm_labels, nsp_labels)``.

    mask: a mode name (one of ``UNILM_MODES``; "seq2seq" needs ``src_len``, the length of
    ``[SOS] S [EOS]``) or a boolean may-attend array (T, T) or (B, T, T), one per row
    (a batch mixes modes). mlm_labels (B, T): the original ids at masked positions,
    IGNORE elsewhere; nsp_labels (B,): 1 IsNext, 0 NotNext, IGNORE for rows without NSP.
    """
    has_backward = True

    def __init__(self, config: BertConfig, *, rng: np.random.Generator, dtype=np.float32, name: str = "unilm"):
        super().__init__(config, rng=rng, dtype=dtype, name=name)    # BERT's encoder, MLM head, pooler, NSP

    # -- the model protocol (block_size and spec as BERT's) -----------------------------
    def new_cache(self) -> KVCache:
        return KVCache(self.config.n_layer, max_length=self.block_size)

    # -- forward / backward ----------------------------------------------------------
    def embed(self, input_ids, token_type_ids, start: int = 0) -> np.ndarray:
        """ids, segments (B, T) -> LN(W_tok + W_seg + W_pos[start:start + T]) (B, T, C)."""
        check_ndim("input_ids", input_ids, 2)
        check_ids("input_ids", input_ids, self.config.vocab_size)
        B, T = input_ids.shape
        if start + T > self.block_size:
            raise ValueError(f"input_ids: positions up to {start + T} exceed max_position {self.config.max_position}")
        segments = np.zeros_like(input_ids) if token_type_ids is None else np.asarray(token_type_ids)
        check_ids("token_type_ids", segments, self.config.type_vocab_size)
        if segments.shape != (B, T):
            raise ValueError(f"token_type_ids: expected shape {(B, T)} (as input_ids), got {segments.shape}")
        x = self.encoder.embeddings(input_ids, segments, start)                  # (B, T, E)
        if self.encoder.embedding_projection is not None:
            x = self.encoder.embedding_projection(x)                             # (B, T, C)
        return x

    def resolve_mask(self, mask, B: int, T: int, src_len: int | None = None) -> np.ndarray:
        """A mode name or an array -> a checked may-attend array (T, T) or (B, T, T)."""
        if isinstance(mask, str):
            return unilm_mask(mask, T, src_len)
        return check_mask(mask, B, T)

    def encode(self, input_ids, token_type_ids=None, mask="bidirectional", *, src_len: int | None = None):
        """The top layer's states (B, T, C) under ``mask`` (no loss, no cache for backward)."""
        x = self.embed(input_ids, token_type_ids)                                # (B, T, C)
        return self.encoder.stack(x, mask=self.resolve_mask(mask, *input_ids.shape, src_len))

    def nsp_logits(self, h: np.ndarray) -> np.ndarray:
        """IsNext scores (B, 2) from the states of ``encode``."""
        if self.nsp is None:
            raise ValueError("this model has no NSP head (config.nsp is False)")
        return self.nsp(self.pooler(h))

    def forward(self, input_ids, token_type_ids=None, mask="bidirectional", mlm_labels=None, nsp_labels=None,
                *, src_len: int | None = None):
        x = self.embed(input_ids, token_type_ids)                                # (B, T, C)
        mask = self.resolve_mask(mask, *input_ids.shape, src_len)
        return self.forward_hidden(x, mask, mlm_labels, nsp_labels)

    def forward_hidden(self, x, mask, mlm_labels=None, nsp_labels=None):
        """From embedded inputs x (B, T, C) and a checked mask: the stack and both heads."""
        B, T, _ = x.shape
        h = self.encoder.stack(x, mask=mask)                                     # (B, T, C), one mask for all layers
        logits = self.mlm(h)                                                     # (B, T, V)
        parts, caches = [], [None, None]
        if mlm_labels is not None:
            mlm_labels = np.asarray(mlm_labels)
            if mlm_labels.shape != (B, T):
                raise ValueError(f"mlm_labels: expected shape {(B, T)} (as input_ids), got {mlm_labels.shape}")
            loss, caches[0] = cross_entropy_forward(logits, mlm_labels)         # () cloze
            parts.append(loss)
        if nsp_labels is not None:
            if self.nsp is None:
                raise ValueError("nsp_labels were given but this model has no NSP head (config.nsp is False)")
            nsp_labels = np.asarray(nsp_labels)
            if nsp_labels.shape != (B,) or not np.isin(nsp_labels, (0, 1, IGNORE)).all():
                raise ValueError(f"nsp_labels: expected ({B},) values 0, 1 or IGNORE, got {nsp_labels.tolist()}")
            if (nsp_labels != IGNORE).any():
                loss, caches[1] = cross_entropy_forward(self.nsp(self.pooler(h)), nsp_labels)   # (B, 2) -> ()
                parts.append(loss)
        self._cache = (caches, h.shape, h.dtype)
        return (sum(parts[1:], parts[0]) if parts else None), logits

    def backward(self, dloss: float = 1.0) -> None:
        self.encoder.embeddings.backward(self._backward_projection(self.backward_hidden(dloss)))

    def _backward_projection(self, dx):
        p = self.encoder.embedding_projection
        return dx if p is None else p.backward(dx)

    def backward_hidden(self, dloss: float = 1.0) -> np.ndarray:
        """Back through the heads and the stack; returns dx (B, T, C) of the embedded inputs."""
        if self._cache is None or self._cache[0] == [None, None]:
            raise RuntimeError("backward needs a forward with mlm_labels or nsp_labels (there is no loss)")
        (mlm_cache, nsp_cache), shape, dtype = self._cache
        dh = np.zeros(shape, dtype=dtype)                                        # (B, T, C)
        if mlm_cache is not None:
            dh += self.mlm.backward(cross_entropy_backward(dloss, mlm_cache))    # tied: into W_tok's gradient
        if nsp_cache is not None:
            dh += self.pooler.backward(self.nsp.backward(cross_entropy_backward(dloss, nsp_cache)))
        return self.encoder.stack.backward(dh).dx

    # -- generation -------------------------------------------------------------------
    def generate(self, source, *, sos_id: int, eos_id: int, mask_id: int, max_len: int,
                 use_cache: bool = True) -> list[int]:
        """Greedy seq2seq decoding of ``source`` (1-D ids, without [SOS]/[EOS]): the target
        ids up to (not including) the first [EOS], at most ``max_len``."""
        source = np.asarray(source, dtype=np.int64)
        if source.ndim != 1 or source.size == 0:
            raise ValueError(f"source: expected a non-empty 1-D array of ids, got shape {source.shape}")
        prefix = np.concatenate([[sos_id], source, [eos_id]])                    # [SOS] S [EOS]
        n_src = len(prefix)
        if n_src + max_len + 1 > self.block_size:
            raise ValueError(f"source of {len(source)} ids + max_len {max_len} needs {n_src + max_len + 1} "
                             f"positions; the model has {self.block_size}")
        out: list[int] = []
        with eval_mode(self):
            cache = self.new_cache() if use_cache else None
            for step in range(max_len + 1):
                if cache is None:                                                # re-read the whole sequence
                    ids = np.concatenate([prefix, np.array(out, dtype=np.int64), [mask_id]])[None]   # (1, n + 1)
                    seg = (np.arange(ids.shape[1]) >= n_src)[None].astype(np.int64)
                    _, logits = self(ids, seg, "seq2seq", src_len=n_src)
                else:
                    logits = self._cached_step(prefix if step == 0 else [out[-1]], mask_id, n_src, cache)
                tok = int(logits[0, -1].argmax())
                if tok == eos_id:
                    break
                out.append(tok)
        return out[:max_len]

    def _cached_step(self, new, mask_id: int, n_src: int, cache: KVCache) -> np.ndarray:
        """Feed ``new`` ids and a [MASK] after them; keep the new ids' keys and values and
        drop the [MASK]'s. -> logits (1, len(new) + 1, V)."""
        P = cache.length
        ids = np.asarray([*new, mask_id], dtype=np.int64)[None]                 # (1, t)
        t = ids.shape[1]
        pos = np.arange(P, P + t)                                                # their positions
        seg = (pos >= n_src)[None].astype(np.int64)                              # (1, t)
        keys = np.arange(P + t)
        mask = keys[None, :] <= pos[:, None]                                     # (t, P + t): left of itself
        src = pos < n_src
        mask[src] = keys[None, :] < n_src                                        # source rows: the source only
        x = self.embed(ids, seg, start=P)                                        # (1, t, C)
        h = self.encoder.stack(x, mask=mask, cache=cache)                        # (1, t, C)
        cache.truncate(P + t - 1)                                                # the [MASK] is never read again
        return self.mlm(h)                                                       # (1, t, V)


# -- registry entry ---------------------------------------------------------------------
TINY = dict(vocab_size=11, max_position=8, n_layer=2, n_head=2, d_model=8, d_ff=16, dropout=0.0)
PAD, SOS, EOS, MASK = 0, 1, 2, 3


def tiny_batch(mode: str = "seq2seq"):
    """``[SOS] S [EOS] T [EOS]`` (2, 7), masked tokens in both segments, the second row's
    last two positions padding; one NSP label (on the bidirectional row when mode is)."""
    ids = np.array([[SOS, 4, MASK, EOS, 7, MASK, EOS], [SOS, 9, EOS, MASK, EOS, PAD, PAD]])
    seg = np.array([[0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 0, 0]])
    labels = np.full(ids.shape, IGNORE)
    labels[0, 2], labels[0, 5], labels[1, 3] = 5, 8, 10
    mask = np.stack([unilm_mask(mode, 7, 4), unilm_mask(mode, 7, 3)])            # (2, 7, 7)
    mask[1, :, 5:] = False                                                       # padding keys
    nsp = np.array([1, IGNORE]) if mode == "bidirectional" else np.array([IGNORE, IGNORE])
    return ids, seg, mask, labels, nsp


def build(*, rng: np.random.Generator, dtype=np.float32, **settings) -> UniLM:
    return UniLM(BertConfig(**settings), rng=rng, dtype=dtype)


def tiny_model(seed: int = 0) -> UniLM:
    return perturbed(build(rng=np.random.default_rng(seed), dtype=np.float64, **TINY), seed=seed + 1)


def tiny():
    return tiny_model(), tiny_batch("seq2seq")


def check_mode(mode: str):
    """Whole model in float64 under one mode's mask: every parameter (tied decoder
    included) and the input of the stack."""
    from ...core.gradcheck import check_module
    model = tiny_model(seed=UNILM_MODES.index(mode))
    ids, seg, mask, labels, nsp = tiny_batch(mode)
    params = check_module(model, ids, seg, mask, labels, nsp, select=lambda out: out[0], max_checks=6)
    x = model.embed(ids, seg)
    inputs = check_module(HiddenProbe(model), x, mask, labels, nsp, max_checks=6)
    params.arrays.extend(a for a in inputs.arrays if a.kind == "input")
    return params


register(ModelEntry(
    name="unilm", title="UniLM", paper="Dong et al. 2019, Unified Language Model Pre-training for Natural "
    "Language Understanding and Generation", objective="cloze under 4 masks + NSP", build=build, tiny=tiny,
    lesson="21_unilm_prefix_lm", presets="minipt.recipes.unified.UNILM_PRESETS",
    recipe="minipt.recipes.unified.train_unified", language_model=False,
    gradchecks=tuple(GradcheckCase(f"UniLM {m}", "cloze + NSP, padding, input + params", lambda m=m: check_mode(m))
                     for m in UNILM_MODES)))
