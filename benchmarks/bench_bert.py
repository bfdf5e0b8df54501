"""BERT-style encoder training throughput: masked-LM forward, backward and AdamW, float32,
minipt against the same model in torch eager (if installed), in alternating rounds
(benchmarks/harness.py).

    python benchmarks/bench_bert.py [--sizes S,M,L] [--rounds 15] [--calls 3] [--profile-steps 15]

The model on both sides: token + segment + position embeddings, LayerNorm; post-LN
blocks with exact (erf) GELU and no causal mask; BERT's MLM head (dense, GELU,
LayerNorm, decoder tied to the token embedding with its own bias); cross-entropy on the
15 % labelled positions only; no NSP, no dropout (the two sides' dropout costs are not
what is compared). Sizes S/M/L are those of ``bench_gpt.py`` (L layers, H heads, width d,
T tokens, batch B) with the toy WordPiece vocabulary (V 250) for S and M. Each side first
runs until its tokens/s stops rising (each warm-up window printed), then the sides
alternate; each round's tokens/s is printed, then a per-part table of a step of each side
(benchmarks/parts.py), then tokens/s of each side (median per-step time over the rounds)
and the median of the per-round ratios minipt/torch (> 1: minipt is faster) with its
min..max. Without torch it measures minipt alone and says so. On a loaded machine the
ratios are not meaningful: both sides are slowed, by different amounts, by whatever else
runs.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

from minipt.models.encoder.bert import BertConfig, BertForPreTraining  # noqa: E402
from minipt.optim import AdamW  # noqa: E402

SIZES = {  # V, L, H, d, T, B
    "S": (250, 2, 4, 64, 64, 16),
    "M": (250, 4, 4, 128, 128, 16),
    "L": (512, 6, 6, 192, 256, 8),
}
MASK_PROB = 0.15


def tokens_per_step(config: dict) -> int:
    """Tokens a training step reads, from a row's ``config``."""
    return config["B"] * config["T"]


def batches(V, T, B, n=4, seed=1):
    """(ids (B, T), segments (B, T), labels (B, T) with -100 off the ~15 % chosen positions)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        ids = rng.integers(5, V, (B, T))
        segments = (np.arange(T)[None, :] >= T // 2).astype(np.int64).repeat(B, 0)
        chosen = rng.random((B, T)) < MASK_PROB
        chosen[:, 1] = True                                               # never an empty batch
        out.append((ids, segments, np.where(chosen, rng.integers(5, V, (B, T)), -100)))
    return out


def minipt_step(V, L, H, d, T, B):
    """A closure running one training step (zero_grad, forward, backward, AdamW)."""
    model = BertForPreTraining(BertConfig(vocab_size=V, max_position=T, n_layer=L, n_head=H, d_model=d, d_ff=4 * d,
                                          dropout=0.0, nsp=False), rng=np.random.default_rng(0))
    opt = AdamW(model, lr=1e-4, weight_decay=0.01)
    data, i = batches(V, T, B), [0]

    def step():
        ids, seg, labels = data[i[0] % len(data)]
        i[0] += 1
        opt.zero_grad()
        model(ids, seg, None, labels)
        model.backward()
        opt.step()
    return step


def torch_step(torch, V, L, H, d, T, B):
    nn = torch.nn
    F = nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(d, eps=1e-12), nn.LayerNorm(d, eps=1e-12)
            self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.c_attn(x).split(d, dim=2)
            q, k, v = (z.view(b, t, H, d // H).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v)                  # bidirectional
            x = self.ln_1(x + self.c_proj(y.transpose(1, 2).reshape(b, t, d)))   # post-LN
            return self.ln_2(x + self.proj(F.gelu(self.fc(x))))          # exact GELU

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos, self.seg = nn.Embedding(V, d), nn.Embedding(T, d), nn.Embedding(2, d)
            self.ln = nn.LayerNorm(d, eps=1e-12)
            self.h = nn.ModuleList(Block() for _ in range(L))
            self.dense, self.ln_mlm = nn.Linear(d, d), nn.LayerNorm(d, eps=1e-12)
            self.bias = nn.Parameter(torch.zeros(V))

        def forward(self, ids, seg, labels):
            x = self.ln(self.tok(ids) + self.seg(seg) + self.pos(torch.arange(ids.shape[1])))
            for blk in self.h:
                x = blk(x)
            logits = self.ln_mlm(F.gelu(self.dense(x))) @ self.tok.weight.T + self.bias   # tied decoder
            return F.cross_entropy(logits.view(-1, V), labels.view(-1), ignore_index=-100)

    model = Model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    data, i = [tuple(torch.from_numpy(a) for a in b) for b in batches(V, T, B)], [0]

    def step():
        ids, seg, labels = data[i[0] % len(data)]
        i[0] += 1
        opt.zero_grad(set_to_none=True)
        model(ids, seg, labels).backward()
        opt.step()
    return step


def run(sizes=("S", "M", "L"), rounds=15, calls=3, profile_steps=15, separate=False):
    return harness.training_table("an MLM training step", SIZES, sizes, minipt_step, torch_step, tokens_per_step, "V L H d T B",
                                  rounds, calls, profile_steps, "bench_bert" if separate else None)


if __name__ == "__main__":
    harness.training_main(__doc__, SIZES, run)
