"""GPT-2-style training throughput: forward, backward and AdamW, float32, minipt against
the same model in torch eager (if installed), in one run.

    python benchmarks/bench_gpt.py [--sizes S,M,L] [--steps 10]

Prints tokens/s (median over steps after 2 warm-up steps), the minipt/torch ratio
(> 1: minipt is faster) and minipt's peak traced memory.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import try_torch  # noqa: E402

from minipt.models.decoder.gpt import GPT, GPTConfig  # noqa: E402
from minipt.optim import AdamW  # noqa: E402

SIZES = {  # V, L, H, d, T, B
    "S": (65, 2, 4, 64, 64, 16),
    "M": (65, 4, 4, 128, 128, 16),
    "L": (512, 6, 6, 192, 256, 8),
}


def minipt_step_times(V, L, H, d, T, B, steps):
    model = GPT(GPTConfig.gpt2(vocab_size=V, block_size=T, n_layer=L, n_head=H, d_model=d),
                rng=np.random.default_rng(0))
    opt = AdamW(model, lr=1e-4, weight_decay=0.1)
    rng = np.random.default_rng(1)
    times = []
    for _ in range(steps + 2):
        x = rng.integers(0, V, (B, T))
        y = rng.integers(0, V, (B, T))
        t0 = time.perf_counter()
        model.zero_grad()
        model(x, y)
        model.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    return times[2:]


def peak_memory_mb(V, L, H, d, T, B):
    tracemalloc.start()
    minipt_step_times(V, L, H, d, T, B, 1)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def torch_step_times(torch, V, L, H, d, T, B, steps):
    nn = torch.nn
    F = nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, H, d // H).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).reshape(b, t, d))
            return x + self.proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, d), nn.Embedding(T, d)
            self.h = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(d)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            for blk in self.h:
                x = blk(x)
            logits = self.ln_f(x) @ self.wte.weight.T
            return F.cross_entropy(logits.view(-1, V), targets.view(-1))

    model = Model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    g = torch.Generator().manual_seed(1)
    times = []
    for _ in range(steps + 2):
        x = torch.randint(0, V, (B, T), generator=g)
        y = torch.randint(0, V, (B, T), generator=g)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        model(x, y).backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    return times[2:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="S,M,L")
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    torch = try_torch()
    print(f"torch {torch.__version__ if torch else 'not installed'}; float32; tokens/s, median of {args.steps} steps")
    print(f"{'size':<5} {'V,L,H,d,T,B':<26} {'minipt tok/s':>13} {'torch tok/s':>12} {'ratio':>7} {'peak MB':>8}")
    for name in args.sizes.split(","):
        V, L, H, d, T, B = SIZES[name]
        mp = B * T / statistics.median(minipt_step_times(V, L, H, d, T, B, args.steps))
        tt = B * T / statistics.median(torch_step_times(torch, V, L, H, d, T, B, args.steps)) if torch else None
        cols = f"{tt:12,.0f} {mp / tt:6.2f}x" if tt else f"{'-':>12} {'-':>7}"
        print(f"{name:<5} {str(SIZES[name]):<26} {mp:13,.0f} {cols} {peak_memory_mb(V, L, H, d, T, B):8.1f}")


if __name__ == "__main__":
    main()
