"""GLM: autoregressive blank infilling (Du, Qian, Liu, Ding, Qiu, Yang & Tang 2022,
"GLM: General Language Model Pretraining with Autoregressive Blank Infilling").

- **Blank infilling** (Sec. 2.1): spans are removed from the text x; Part A is x with
  each span replaced by one [MASK]; Part B is the spans in a random order (the
  objectives' ``glm_blank_infilling``: lengths ~ Poisson(3), about 15 % of the tokens),
  each as [START] s_1 .. s_l, predicting s_1 .. s_l [END]:
  max_theta E_z [ sum_i log p(s_{z_i} | x_corrupt, s_{z_<i}) ].
- **One mask** (Sec. 2.2.1, Fig. 2): Part A tokens see all of Part A and nothing of
  Part B; Part B tokens see Part A and the Part B tokens before them (itself included):
  bidirectional encoder and left-to-right decoder in one stack.
- **2-D positions** (Sec. 2.2.2): every token adds two learned position embeddings: the
  first id is the position in Part A (a Part B token takes the position of its span's
  [MASK]), the second the position inside the span (0 for Part A, 1..l+1 in a span), so
  the model does not know a span's length before it generates it.
- **Architecture**, as seed 004 notes it: post-LN blocks (``nn/block.py``), GELU (exact, or
  its tanh approximation, which the toy preset uses for speed),
  and a single linear output layer tied to the token embedding (logits = h W^T; no MLM
  transform).
- **Blank filling at inference** (``fill``): Part A with [MASK]s is read once
  bidirectionally; each blank, left to right, gets a [START] at its [MASK]'s position and
  is generated greedily until [END] (or ``max_span`` tokens); later blanks see the
  spans filled before them, as in training.

Parameters (V vocab, P max_position, C d_model, F d_ff):

| name | shape | note |
|---|---|---|
| word_embeddings.weight | (V, C) | also the output layer (tied) |
| position_embeddings.weight | (P, C) | first position id: place in Part A |
| block_position_embeddings.weight | (P, C) | second position id: place inside the span |
| stack.blocks.i.* | | post-LN blocks: ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj |
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ...core.checks import check_ids, check_ndim, check_positive_int
from ...core.module import Module, eval_mode
from ...nn.embedding import Embedding
from ...nn.stack import TransformerStack
from ...objectives.permutation import glm_blank_infilling
from ...ops.cross_entropy import cross_entropy_backward, cross_entropy_forward
from ...ops.linear import linear_backward, linear_forward
from ..protocol import IGNORE
from ..registry import GradcheckCase, ModelEntry, register
from .common import HiddenProbe, check_mask


@dataclass
class GLMConfig:
    vocab_size: int = 64
    max_position: int = 64
    n_layer: int = 2
    n_head: int = 4
    d_model: int = 64
    d_ff: int | None = None               # default 4 * d_model
    activation: str = "gelu"              # exact GELU; "gelu_tanh", its tanh approximation, trains faster
    eps: float = 1e-5

    def __post_init__(self) -> None:
        for name in ("vocab_size", "max_position", "n_layer", "n_head", "d_model"):
            check_positive_int(name, getattr(self, name))
        if self.d_model % self.n_head:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_head {self.n_head}")
        if self.activation not in ("gelu", "gelu_tanh"):
            raise ValueError(f"activation must be 'gelu' or 'gelu_tanh' (GLM's GELU), got {self.activation!r}")
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model


class GLM(Module):
    """``loss, logits = model(ids, positions, mask, targets)``: ids (B, N) Part A then
    Part B, positions (B, 2, N), mask (N, N) or (B, N, N) may-attend, targets (B, N)
    (IGNORE on Part A and padding)."""
    has_backward = True

    def __init__(self, config: GLMConfig, *, rng: np.random.Generator, dtype=np.float32, name: str = "glm"):
        super().__init__()
        self.name, self.config = name, config
        c = config
        self.word_embeddings = Embedding(c.vocab_size, c.d_model, rng=rng, std=0.02, dtype=dtype)
        self.position_embeddings = Embedding(c.max_position, c.d_model, rng=rng, std=0.02, dtype=dtype)
        self.block_position_embeddings = Embedding(c.max_position, c.d_model, rng=rng, std=0.02, dtype=dtype)
        self.stack = TransformerStack(c.n_layer, d_model=c.d_model, n_heads=c.n_head, d_ff=c.d_ff, rng=rng,
                                      norm="layer", prenorm=False, activation=c.activation, eps=c.eps, dtype=dtype)
        self._cache = None

    # -- the model protocol ----------------------------------------------------------
    @property
    def block_size(self) -> int:
        return self.config.max_position

    def new_cache(self) -> None:
        return None                           # blank filling re-reads Part A and B each step

    def spec(self) -> dict:
        return {"model": self.name, **asdict(self.config)}

    # -- forward / backward ----------------------------------------------------------
    def embed(self, ids, positions) -> np.ndarray:
        """W_tok[ids] + W_pos[positions[:, 0]] + W_block[positions[:, 1]] (B, N, C)."""
        check_ndim("ids", ids, 2)
        check_ids("ids", ids, self.config.vocab_size)
        B, N = ids.shape
        if N > self.config.max_position:
            raise ValueError(f"ids: Part A and Part B hold {N} tokens; the context is max_position "
                             f"{self.config.max_position}")
        positions = np.asarray(positions)
        if positions.shape != (B, 2, N):
            raise ValueError(f"positions: expected shape ({B}, 2, {N}) (position in Part A, position in the span), "
                             f"got {positions.shape}")
        check_ids("positions", positions, self.config.max_position)
        return (self.word_embeddings(ids) + self.position_embeddings(positions[:, 0])
                + self.block_position_embeddings(positions[:, 1]))                 # (B, N, C)

    def forward(self, ids, positions, mask, targets=None):
        x = self.embed(ids, positions)                                            # (B, N, C)
        return self.forward_hidden(x, check_mask(mask, *ids.shape), targets)

    def forward_hidden(self, x, mask, targets=None):
        h = self.stack(x, mask=mask)                                              # (B, N, C)
        logits, lin = linear_forward(h, self.word_embeddings.params["weight"], None)   # (B, N, V): tied
        loss = ce = None
        if targets is not None:
            if np.shape(targets) != x.shape[:2]:
                raise ValueError(f"targets: expected shape {x.shape[:2]}, got {np.shape(targets)}")
            loss, ce = cross_entropy_forward(logits, np.asarray(targets))
        self._cache = (lin, ce)
        return loss, logits

    def backward_hidden(self, dloss: float = 1.0) -> np.ndarray:
        """Back through the output layer and the stack; returns dx (B, N, C)."""
        lin, ce = self._cache
        if ce is None:
            raise RuntimeError("backward needs a forward with targets")
        dh, dw, _ = linear_backward(cross_entropy_backward(dloss, ce), lin)       # (B, N, C), (V, C)
        self.word_embeddings.grads["weight"] += dw                                # the tied output layer
        return self.stack.backward(dh).dx

    def backward(self, dloss: float = 1.0) -> None:
        dx = self.backward_hidden(dloss)                                          # (B, N, C)
        for table in (self.word_embeddings, self.position_embeddings, self.block_position_embeddings):
            table.backward(dx)

    # -- blank filling ------------------------------------------------------------------
    def fill(self, part_a, *, mask_id: int, start_id: int, end_id: int, max_span: int) -> list[list[int]]:
        """Greedy blank infilling: part_a (1-D ids with a [MASK] per blank) -> one list of
        ids per blank, left to right."""
        part_a = np.asarray(part_a, dtype=np.int64)
        if part_a.ndim != 1:
            raise ValueError(f"part_a: expected 1-D ids, got shape {part_a.shape}")
        blanks = np.flatnonzero(part_a == mask_id)
        n_a = len(part_a)
        if not blanks.size:
            raise ValueError(f"part_a has no blank: put a [MASK] (id {mask_id}) where a span is to be filled")
        need = n_a + len(blanks) * (max_span + 1)
        if need > self.config.max_position:
            raise ValueError(f"{len(blanks)} blanks of up to {max_span} tokens do not fit: Part A ({n_a}) and "
                             f"Part B need {need} positions, the model has {self.config.max_position}")
        b_ids, b_pos = [], []                                                     # Part B so far
        spans = []
        with eval_mode(self):
            for m in blanks:
                span = []
                b_ids.append(start_id)
                b_pos.append((m, 1))
                for _ in range(max_span + 1):
                    ids = np.concatenate([part_a, b_ids])[None]                   # (1, N)
                    N = ids.shape[1]
                    pos = np.array([list(range(n_a)) + [p for p, _ in b_pos], [0] * n_a + [q for _, q in b_pos]])
                    mask = np.zeros((N, N), dtype=bool)
                    mask[:, :n_a] = True                                          # everyone sees Part A
                    mask[n_a:, n_a:] = np.tril(np.ones((N - n_a, N - n_a), dtype=bool))   # Part B: causal
                    tok = int(self(ids, pos[None], mask)[1][0, -1].argmax())
                    if tok == end_id or len(span) == max_span:
                        break
                    span.append(tok)
                    b_ids.append(tok)
                    b_pos.append((m, len(span) + 1))
                spans.append(span)
        return spans


# -- registry entry -----------------------------------------------------------------------
TINY = dict(vocab_size=12, max_position=16, n_layer=2, n_head=2, d_model=8, d_ff=16)
PAD, MASK, START, END = 0, 1, 2, 3


def tiny_batch(seed: int = 0):
    """Two blank-infilling examples of different lengths, padded: (ids, positions, mask, targets)."""
    rng = np.random.default_rng(seed)
    rows = [glm_blank_infilling(np.array(x), rng, mask_id=MASK, start_id=START, end_id=END, ratio=0.3)
            for x in ([4, 5, 6, 7, 8, 9, 10, 11], [11, 10, 9, 8, 7])]
    N = max(len(r["ids"]) for r in rows)
    ids, targets = np.zeros((2, N), dtype=np.int64), np.full((2, N), IGNORE)
    pos, mask = np.zeros((2, 2, N), dtype=np.int64), np.zeros((2, N, N), dtype=bool)
    for b, r in enumerate(rows):
        n = len(r["ids"])
        ids[b, :n], targets[b, :n], pos[b, :, :n], mask[b, :n, :n] = r["ids"], r["targets"], r["positions"], r["mask"]
    return ids, pos, mask, targets


def build(*, rng: np.random.Generator, dtype=np.float32, **settings) -> GLM:
    return GLM(GLMConfig(**settings), rng=rng, dtype=dtype)


def tiny_model(seed: int = 0) -> GLM:
    from ..decoder.gpt import perturbed
    return perturbed(build(rng=np.random.default_rng(seed), dtype=np.float64, **TINY), scale=0.3, seed=seed + 1)


def tiny():
    return tiny_model(), tiny_batch()


def check_input():
    from ...core.gradcheck import check_module
    model = tiny_model(seed=1)
    ids, pos, mask, targets = tiny_batch(seed=1)
    return check_module(HiddenProbe(model), model.embed(ids, pos), mask, targets, max_checks=8)


register(ModelEntry(
    name="glm", title="GLM", paper="Du et al. 2022, GLM: General Language Model Pretraining with Autoregressive "
    "Blank Infilling", objective="autoregressive blank infilling (2-D positions)", build=build, tiny=tiny,
    lesson="23_glm", presets="minipt.recipes.unified.GLM_PRESETS",
    recipe="minipt.recipes.unified.train_unified", language_model=False,
    gradchecks=(GradcheckCase("GLM from embeddings", "Part A + shuffled spans, padding, input + params",
                              check_input),)))
