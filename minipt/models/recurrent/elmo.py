"""ELMo: deep contextualised word representations from a bidirectional LM (Peters,
Neumann, Iyyer, Gardner, Clark, Lee & Zettlemoyer 2018, "Deep contextualized word
representations").

The biLM (Sec. 3.1) is two LSTM language models over one sequence t_1 .. t_N: the
forward LM predicts t_{k+1} from t_1..t_k, the backward LM predicts t_{k-1} from
t_k..t_N. They share the token encoder (a character CNN with highways, ``CharCNN``) and
the softmax layer; their LSTM stacks are separate (``BiLSTM(merge="separate")``), with
LSTMP projections and a residual connection between the layers (Sec. 3.4). Training
maximises the sum of both directions' log-likelihoods; ``loss`` here is their mean,
0.5 (L_fwd + L_bwd), in nats per token.

Batches are those of any causal LM, ``idx, targets = w_0..w_{T-1}, w_1..w_T``: the
model reads w_0..w_T once; the forward LM's output at k predicts w_{k+1} (= targets),
the backward LM's output at k+1 predicts w_k (= idx). Targets may end in IGNORE
(right padding). ``log_prob`` is ``-loss * count`` as the protocol asks: the mean of the
two directions' log-probabilities of the window. The returned logits are the forward
LM's (the backward LM's are ``backward_logits``), so ``log_prob`` is not the sum of
``log_softmax(logits)`` at the targets: the entry is registered with
``language_model=False`` and is scored per direction (``direction_loss``).

Downstream (Sec. 3.2-3.3): ``layers(...)`` gives the L + 1 = 3 representations of each
token (the token layer [x; x] and both biLSTM layers [h_fwd; h_bwd]); a task learns the
scalar mix ELMo = gamma sum_j s_j h_j (``minipt.nn.scalar_mix``) on frozen biLM
features. ``sentence_layers`` encodes any words, unseen ones included, by their spelling
(a character outside the character vocabulary becomes ``<unk>``).

Parameters (V words, D model width = LSTMP size, H LSTM cell width, F = sum of filter
counts, C_char char embedding width, K filter width, layer l, direction
d in {forward_layers, backward_layers}):

| name | shape |
|---|---|
| token_encoder.char_embedding.weight | (n_chars, C_char) |
| token_encoder.convs.i.weight / .bias | (count_i, C_char, K_i) / (count_i,) |
| token_encoder.highways.j.{transform,gate}.weight / .bias | (F, F) / (F,) |
| token_encoder.projection.weight / .bias | (D, F) / (D,) |
| bilm.d.l.weight_ih | (4H, D) |
| bilm.d.l.weight_hh | (4H, D) |
| bilm.d.l.bias | (4H,) |
| bilm.d.l.weight_hr | (D, H) |
| softmax.weight / .bias | (V, D) / (V,) (shared by both directions) |
"""
from __future__ import annotations

import numpy as np

from ...core.checks import check_ids, check_ndim
from ...core.module import Module, eval_mode
from ...nn.char_cnn import CharCNN, CharVocab
from ...nn.dropout import Dropout
from ...nn.linear import Linear
from ...nn.lstm import BiLSTM
from ...ops.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ...ops.linear import linear_backward, linear_forward
from ..protocol import IGNORE, log_prob_from_loss
from ..registry import ModelEntry, Preset, register

FILTERS = ((1, 16), (2, 16), (3, 32), (4, 32))


class ELMo(Module):
    has_backward = True
    block_size = None

    def __init__(self, vocab: list[str], *, d_model: int = 32, hidden: int = 64, n_layer: int = 2,
                 char_dim: int = 8, filters=FILTERS, n_highway: int = 2, max_chars: int = 12,
                 dropout: float = 0.1, rng: np.random.Generator, dtype=np.float32):
        super().__init__()
        if len(set(vocab)) != len(vocab) or not vocab:
            raise ValueError(f"vocab: expected distinct words, got {len(vocab)} entries, {len(set(vocab))} distinct")
        filters = tuple(tuple(f) for f in filters)
        self.settings = dict(vocab=list(vocab), d_model=d_model, hidden=hidden, n_layer=n_layer,
                             char_dim=char_dim, filters=[list(f) for f in filters], n_highway=n_highway,
                             max_chars=max_chars, dropout=dropout)
        self.vocab = list(vocab)
        self.chars = CharVocab("".join(vocab), max_chars)
        self.word_chars = self.chars.encode(self.vocab)               # (V, L)
        self.token_encoder = CharCNN(self.chars.size, char_dim, filters, n_highway, d_model, rng=rng, dtype=dtype)
        self.bilm = BiLSTM(d_model, hidden, n_layer, proj_size=d_model, residual=True, merge="separate",
                           rng=rng, dtype=dtype)
        self.drop_in = Dropout(dropout, rng=np.random.default_rng(rng.integers(2**63)))
        self.drop_out = Dropout(dropout, rng=np.random.default_rng(rng.integers(2**63)))
        self.softmax = Linear(d_model, len(vocab), rng=rng, std=None, dtype=dtype)
        self._cache = None

    def new_cache(self):
        return None

    # -- the token encoder on word ids --------------------------------------------
    def encode_ids(self, seq: np.ndarray) -> np.ndarray:
        """seq (B, S) word ids -> token vectors (B, S, D); the char CNN runs once per
        distinct word of the batch."""
        uniq, inv = np.unique(seq, return_inverse=True)
        x = self.token_encoder(self.word_chars[uniq])                # (U, D)
        self._enc = (inv.reshape(seq.shape), len(uniq))
        return x[inv.reshape(seq.shape)]                             # (B, S, D)

    def encode_ids_backward(self, dx: np.ndarray) -> None:
        inv, U = self._enc
        du = np.zeros((U, dx.shape[-1]), dx.dtype)                   # (U, D)
        np.add.at(du, inv.reshape(-1), dx.reshape(-1, dx.shape[-1]))
        self.token_encoder.backward(du)

    # -- the biLM -------------------------------------------------------------------
    def forward(self, idx: np.ndarray, targets: np.ndarray | None = None):
        """idx (B, T) [, targets (B, T) = idx shifted by one] -> loss (or None), forward-LM logits (B, T, V)."""
        check_ndim("idx", idx, 2)
        V = len(self.vocab)
        check_ids("idx", idx, V)
        B, T = idx.shape
        if B == 0 or T == 0:
            raise ValueError(f"idx: an empty batch (shape {idx.shape})")
        if targets is None:
            seq, lengths, n_pred = idx, None, T - 1                  # predict within the window only
        else:
            if targets.shape != idx.shape:
                raise ValueError(f"targets: expected shape {idx.shape}, got {targets.shape}")
            keep = targets != IGNORE                                  # (B, T)
            n = keep.sum(axis=1)
            if not np.array_equal(keep, np.arange(T)[None, :] < n[:, None]) or n.min() == 0:
                raise ValueError("targets: IGNORE may only pad the end of a row, and each row needs a target")
            check_ids("targets", np.where(keep, targets, 0), V)
            if np.any((targets[:, :-1] != idx[:, 1:]) & keep[:, :-1]):
                raise ValueError("targets: ELMo's batches are a causal LM's (targets = idx shifted left by one)")
            seq = np.concatenate([idx[:, :1], np.where(keep, targets, 0)], axis=1)   # (B, T+1) w_0 .. w_T
            lengths, n_pred = n + 1, T
        x = self.drop_in(self.encode_ids(seq))                       # (B, S, D)
        outs = self.bilm(x, lengths)                                 # L x (B, S, 2D)
        top = self.drop_out(outs[-1])                                # (B, S, 2D)
        D = top.shape[-1] // 2
        w, b = self.softmax.params["weight"], self.softmax.params["bias"]
        logits_f, lin_f = linear_forward(np.ascontiguousarray(top[:, :n_pred, :D]), w, b)    # (B, T, V)
        logits_b, lin_b = linear_forward(np.ascontiguousarray(top[:, 1:n_pred + 1, D:]), w, b)  # (B, T, V)
        self.backward_logits = logits_b
        loss = None
        if targets is not None:
            lf, ce_f = cross_entropy_forward(logits_f, targets, IGNORE)
            lb, ce_b = cross_entropy_forward(logits_b, np.where(keep, idx, IGNORE), IGNORE)
            loss = 0.5 * (lf + lb)
            self.direction_loss = (float(lf), float(lb))
            self._cache = (lin_f, lin_b, ce_f, ce_b, top.shape, n_pred)
        return loss, logits_f

    def backward(self, dloss: float = 1.0) -> None:
        if self._cache is None:
            raise RuntimeError("backward needs a forward with targets")
        lin_f, lin_b, ce_f, ce_b, shape, n_pred = self._cache
        D = shape[-1] // 2
        dtop = np.zeros(shape, dtype=self.softmax.params["weight"].dtype)   # (B, S, 2D)
        for ce, lin, sl in ((ce_f, lin_f, (slice(None), slice(0, n_pred), slice(0, D))),
                            (ce_b, lin_b, (slice(None), slice(1, n_pred + 1), slice(D, None)))):
            dh, dw, db = linear_backward(cross_entropy_backward(0.5 * dloss, ce), lin)
            self.softmax.grads["weight"] += dw                       # one softmax, two directions
            self.softmax.grads["bias"] += db
            dtop[sl] += dh
        douts = [None] * (self.bilm.n_layers - 1) + [self.drop_out.backward(dtop)]
        self.encode_ids_backward(self.drop_in.backward(self.bilm.backward(douts)))

    def log_prob(self, idx: np.ndarray, targets: np.ndarray) -> float:
        return log_prob_from_loss(self, idx, targets)

    def spec(self) -> dict:
        return {"model": "elmo", **self.settings}

    # -- features for downstream tasks ---------------------------------------------
    def sentence_layers(self, sentences: list[list[str]]) -> tuple[list[np.ndarray], np.ndarray]:
        """Eval-mode representations of whole sentences (any words: spelled by characters).
        -> ([token layer, biLSTM layer 1, ...] each (B, T, 2D), lengths (B,)); padding is 0."""
        if not sentences or any(len(s) == 0 for s in sentences):
            raise ValueError("sentences: expected a non-empty list of non-empty word lists")
        lengths = np.array([len(s) for s in sentences])
        T = int(lengths.max())
        chars = np.zeros((len(sentences), T, self.chars.max_chars), dtype=np.int64)   # (B, T, L)
        for b, s in enumerate(sentences):
            chars[b, :len(s)] = self.chars.encode(s)
        with eval_mode(self):
            x = self.token_encoder(chars)                            # (B, T, D)
            x = x * (np.arange(T)[None, :, None] < lengths[:, None, None])
            outs = self.bilm(x, lengths)
        return [np.concatenate([x, x], axis=-1)] + outs, lengths


def build(*, rng: np.random.Generator, dtype=np.float32, vocab=None, **settings) -> ELMo:
    if vocab is None:
        from ...data.toy_words import word_tokenizer
        tok = word_tokenizer()
        vocab = [tok.decode([i]) for i in range(tok.vocab_size)]
    return ELMo(vocab, **settings, rng=rng, dtype=dtype)


def tiny() -> tuple[ELMo, tuple]:
    r = np.random.default_rng(0)
    model = ELMo(["the", "bat", "bank", "river", "."], d_model=3, hidden=4, char_dim=3, filters=((1, 2), (2, 3)),
                 n_highway=1, max_chars=6, dropout=0.0, rng=r, dtype=np.float64)
    for _, p in model.named_parameters():     # O(1) weights: gradients far above round-off
        p[...] = 0.6 * r.standard_normal(p.shape)
    seq = r.integers(0, 5, (2, 6))
    targets = seq[:, 1:].copy()
    targets[1, 3:] = IGNORE
    return model, (seq[:, :-1].copy(), targets)


register(ModelEntry(
    name="elmo", title="ELMo", paper="Peters et al. 2018, Deep contextualized word representations",
    objective="bidirectional LM (forward + backward, shared token encoder and softmax)", build=build, tiny=tiny,
    lesson="08_elmo",
    presets={"toy": Preset(
        model=dict(d_model=32, hidden=64, n_layer=2, dropout=0.1), batch_size=32,
        train=dict(steps=600, lr=1e-2, min_lr=1e-3, warmup=20, weight_decay=0.0, eval_every=100, eval_batches=10,
                   grad_clip=1.0),
        data=dict(n_words=100_000, block_size=20),
        expected="forward LM 1.837, backward LM 1.848 nats/word vs oracle 1.786 (lesson 08, same settings)")},
    recipe="minipt.recipes.recurrent.recipe", language_model=False))
