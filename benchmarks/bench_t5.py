"""T5 training throughput: span-corruption-shaped batches through forward, backward and
AdamW, float32, minipt against the same model in torch eager (if installed), in
alternating rounds (benchmarks/harness.py).

    python benchmarks/bench_t5.py [--sizes S,M,L] [--rounds 15] [--calls 3] [--profile-steps 15]

The model on both sides is T5 v1.0 (``models/seq2seq/t5.py``): one shared token table;
pre-RMSNorm blocks without biases; a bucketed relative position bias (32 buckets,
max distance 128) computed once per stack and shared by its layers, bidirectional in the
encoder and causal in the decoder; no 1/sqrt(D) attention scale; ReLU FFN; cross-attention
without a position bias; the output tied to the token table with the d^-0.5 rescale;
cross-entropy over the target tokens; no dropout. The torch side is written out here
with ``scaled_dot_product_attention`` (the bias as its float mask, scale 1) and torch's
``nn.RMSNorm``, and takes the bucket ids minipt computes (not timed). Sizes follow
``bench_gpt.py``: L encoder and L decoder layers, H heads, width d, source length S,
target length T = S / 4 (span corruption's targets are about a quarter of the input),
batch B. Each side first runs until its tokens/s stops rising (each warm-up window
printed), then the sides alternate; each round's tokens/s is printed, then a per-part
table of a step of each side (benchmarks/parts.py), then tokens/s (source + target
tokens) of each side and the median of the per-round ratios minipt/torch (> 1: minipt is
faster) with min..max. Without torch it measures minipt alone and says so. On a loaded
machine the ratios are not meaningful.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

from minipt.models.seq2seq.t5 import T5, T5Config, shift_right  # noqa: E402
from minipt.ops.positions import relative_position_bucket  # noqa: E402
from minipt.optim import AdamW  # noqa: E402

SIZES = {  # V, L, H, d, S, B
    "S": (256, 2, 4, 64, 64, 16),
    "M": (256, 4, 4, 128, 128, 16),
    "L": (512, 6, 6, 192, 256, 8),
}
BUCKETS, MAX_DISTANCE = 32, 128


def tokens_per_step(config: dict) -> int:
    """Source + target tokens a training step reads, from a row's ``config``."""
    return config["B"] * (config["S"] + config["S"] // 4)


def batches(V, S, B, n=4, seed=1):
    """(source (B, S), target_in (B, T), targets (B, T)), T = S // 4, ids from 1 (0 is pad/start)."""
    rng = np.random.default_rng(seed)
    T = S // 4
    out = []
    for _ in range(n):
        source, targets = rng.integers(1, V, (B, S)), rng.integers(1, V, (B, T))
        out.append((source, shift_right(targets, 0), targets))
    return out


def minipt_step(V, L, H, d, S, B):
    """A closure running one training step (zero_grad, forward, backward, AdamW)."""
    model = T5(T5Config(vocab_size=V, d_model=d, d_ff=4 * d, n_layer=L, n_head=H, num_buckets=BUCKETS,
                        max_distance=MAX_DISTANCE, max_source_len=S, max_target_len=S // 4),
               rng=np.random.default_rng(0))
    opt = AdamW(model, lr=1e-4, weight_decay=0.0)
    data, i = batches(V, S, B), [0]

    def step():
        source, target_in, targets = data[i[0] % len(data)]
        i[0] += 1
        opt.zero_grad()
        model(source, target_in, targets)
        model.backward()
        opt.step()
    return step


def torch_step(torch, V, L, H, d, S, B):
    nn, F = torch.nn, torch.nn.functional
    D, T = d // H, S // 4

    def buckets(n, bidirectional):
        rel = np.arange(n)[None, :] - np.arange(n)[:, None]                  # key - query (n, n)
        return torch.from_numpy(relative_position_bucket(rel, bidirectional, BUCKETS, MAX_DISTANCE))

    enc_buckets, dec_buckets = buckets(S, True), buckets(T, False)
    causal = torch.full((T, T), float("-inf")).triu(1)

    def RMSNorm():                                                            # torch's own: aten::rms_norm
        return nn.RMSNorm(d, eps=1e-6)

    class Attention(nn.Module):
        def __init__(self, cross):
            super().__init__()
            self.cross = cross
            self.q = nn.Linear(d, d, bias=False)
            self.kv = nn.Linear(d, 2 * d, bias=False)
            self.o = nn.Linear(d, d, bias=False)

        def forward(self, x, memory, bias):
            b, t, _ = x.shape
            q = self.q(x).view(b, t, H, D).transpose(1, 2)
            k, v = (z.view(b, -1, H, D).transpose(1, 2) for z in self.kv(memory).split(d, dim=2))
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=1.0)   # T5: no 1/sqrt(D)
            return self.o(y.transpose(1, 2).reshape(b, t, d))

    class Layer(nn.Module):
        def __init__(self, decoder):
            super().__init__()
            self.decoder = decoder
            self.ln_1, self.attn = RMSNorm(), Attention(False)
            if decoder:
                self.ln_x, self.cross = RMSNorm(), Attention(True)
            self.ln_2 = RMSNorm()
            self.wi, self.wo = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)

        def forward(self, x, bias, memory=None):
            h = self.ln_1(x)
            x = x + self.attn(h, h, bias)
            if self.decoder:
                x = x + self.cross(self.ln_x(x), memory, None)
            return x + self.wo(F.relu(self.wi(self.ln_2(x))))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.shared = nn.Embedding(V, d)
            self.enc_bias, self.dec_bias = nn.Embedding(BUCKETS, H), nn.Embedding(BUCKETS, H)
            self.enc = nn.ModuleList(Layer(False) for _ in range(L))
            self.dec = nn.ModuleList(Layer(True) for _ in range(L))
            self.enc_ln, self.dec_ln = RMSNorm(), RMSNorm()

        def forward(self, source, target_in, targets):
            x = self.shared(source)
            bias = self.enc_bias(enc_buckets).permute(2, 0, 1)[None]          # (1, H, S, S), shared
            for layer in self.enc:
                x = layer(x, bias)
            memory = self.enc_ln(x)
            y = self.shared(target_in)
            bias = self.dec_bias(dec_buckets).permute(2, 0, 1)[None] + causal
            for layer in self.dec:
                y = layer(y, bias, memory)
            logits = (self.dec_ln(y) * d ** -0.5) @ self.shared.weight.T      # tied, rescaled
            return F.cross_entropy(logits.view(-1, V), targets.reshape(-1))

    model = Model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    data, i = [tuple(torch.from_numpy(a) for a in b) for b in batches(V, S, B)], [0]

    def step():
        source, target_in, targets = data[i[0] % len(data)]
        i[0] += 1
        opt.zero_grad(set_to_none=True)
        model(source, target_in, targets).backward()
        opt.step()
    return step


def run(sizes=("S", "M", "L"), rounds=15, calls=3, profile_steps=15, separate=False):
    return harness.training_table("a T5 training step", SIZES, sizes, minipt_step, torch_step, tokens_per_step, "V L H d S B",
                                  rounds, calls, profile_steps, "bench_t5" if separate else None)


if __name__ == "__main__":
    harness.training_main(__doc__, SIZES, run)
