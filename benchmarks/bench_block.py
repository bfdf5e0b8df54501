"""One pre-LN GPT-2 block (GELU tanh, causal), forward + backward, float32: minipt with
its Numba kernels, minipt with the NumPy twins only, and the same block in torch eager
(if installed), in one run. Then a per-op profile of one minipt step.

    python benchmarks/bench_block.py [--repeat 7] [--numba-threads N]

Ratios > 1 mean minipt is faster.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median_ms, try_torch  # noqa: E402

from minipt import kernels  # noqa: E402
from minipt.nn.block import TransformerBlock  # noqa: E402

SIZES = {"S": (16, 64, 64, 4), "M": (16, 128, 128, 4), "L": (8, 256, 192, 6)}   # B, T, C, H


def torch_block(torch, C, H):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.fc, self.proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(self, x):
            B, T, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
            y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).reshape(B, T, C))
            return x + self.proj(nn.functional.gelu(self.fc(self.ln_2(x)), approximate="tanh"))
    return Block()


def profile(block, x, dy):
    """Wall time per op kind in one forward+backward, by wrapping the ops' entry points."""
    import minipt.nn.attention as att
    import minipt.nn.feedforward as ff
    import minipt.nn.linear as lin
    import minipt.nn.norms as norms
    spent = defaultdict(float)
    patched = []

    def wrap(mod, name, kind):
        fn = getattr(mod, name)

        def timed(*a, **k):
            t0 = time.perf_counter()
            out = fn(*a, **k)
            spent[kind] += time.perf_counter() - t0
            return out
        setattr(mod, name, timed)
        patched.append((mod, name, fn))
    wrap(lin, "linear_forward", "matmul (linear)"), wrap(lin, "linear_backward", "matmul (linear)")
    wrap(att, "attention_forward", "attention"), wrap(att, "attention_backward", "attention")
    wrap(norms, "layer_norm_forward", "layernorm"), wrap(norms, "layer_norm_backward", "layernorm")
    wrap(ff, "activation_pair", "gelu")  # construction only; gelu is timed below
    t0 = time.perf_counter()
    block(x, causal=True)
    block.backward(dy)
    total = time.perf_counter() - t0
    for mod, name, fn in patched:
        setattr(mod, name, fn)
    spent.pop("gelu", None)
    spent["other (gelu, residuals, reshapes)"] = total - sum(spent.values())
    return total, spent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--numba-threads", type=int, default=0, help="0: leave Numba's default")
    args = ap.parse_args()
    if args.numba_threads:
        import numba
        numba.set_num_threads(args.numba_threads)
    torch = try_torch()
    print(f"torch {torch.__version__ if torch else 'not installed'}; float32, fwd+bwd of one block, "
          f"median of {args.repeat}")
    print(f"{'size':<5} {'B,T,C,H':<18} {'twins ms':>9} {'minipt ms':>10} {'vs twins':>9} {'torch ms':>9} {'vs torch':>9}")
    last = None
    for name, (B, T, C, H) in SIZES.items():
        block = TransformerBlock(C, H, 4 * C, rng=np.random.default_rng(0))
        r = np.random.default_rng(1)
        x, dy = (r.standard_normal((B, T, C)).astype(np.float32) for _ in range(2))

        def step():
            block(x, causal=True)
            block.backward(dy)
        t_mp = median_ms(step, args.repeat)
        kernels.ENABLED = False
        t_tw = median_ms(step, args.repeat)
        kernels.ENABLED = True
        cols = f"{'-':>9} {'-':>9}"
        if torch:
            tb = torch_block(torch, C, H)
            tx, tg = torch.from_numpy(x).requires_grad_(True), torch.from_numpy(dy)

            def ref():
                tb(tx).backward(tg)
            t_t = median_ms(ref, args.repeat)
            cols = f"{t_t:9.2f} {t_t / t_mp:8.2f}x"
        print(f"{name:<5} {str((B, T, C, H)):<18} {t_tw:9.2f} {t_mp:10.2f} {t_tw / t_mp:8.2f}x {cols}")
        last = (name, block, x, dy)
    name, block, x, dy = last
    total, spent = profile(block, x, dy)
    print(f"\nprofile of one minipt step at {name} ({total * 1e3:.1f} ms):")
    for kind, t in sorted(spent.items(), key=lambda kv: -kv[1]):
        print(f"  {kind:<34} {t * 1e3:7.2f} ms  {t / total:5.1%}")


if __name__ == "__main__":
    main()
