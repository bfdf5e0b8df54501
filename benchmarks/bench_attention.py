"""Causal attention forward+backward, float32: minipt's default path (the fused Numba
kernel) against its NumPy twin and torch's scaled_dot_product_attention (if installed).

    python benchmarks/bench_attention.py [--repeat 7]

Ratios > 1 mean minipt is faster. Sizes are the GPT-2-style S, M, L of the issues.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median_ms, try_torch  # noqa: E402

from minipt.ops import attention as A  # noqa: E402

SIZES = {"S": (16, 4, 64, 16), "M": (16, 4, 128, 32), "L": (8, 6, 256, 32)}   # B, H, T, D


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    torch = try_torch()
    print(f"torch {torch.__version__ if torch else 'not installed'}; float32, causal, fwd+bwd, median of {args.repeat}")
    print(f"{'size':<5} {'B,H,T,D':<16} {'numpy ms':>9} {'minipt ms':>10} {'vs numpy':>9} {'torch ms':>9} {'vs torch':>9}")
    for name, (B, H, T, D) in SIZES.items():
        r = np.random.default_rng(0)
        q, k, v, dout = (r.standard_normal((B, H, T, D)).astype(np.float32) for _ in range(4))
        scale = 1 / math.sqrt(D)

        def minipt():
            out, cache = A.attention_forward(q, k, v, causal=True)
            A.attention_backward(dout, cache)

        def twin():
            out, cache = A.attention_forward_numpy(q, k, v, None, True, None, 0.0, None, True, scale)
            A.attention_backward_numpy(dout, cache)
        t_np, t_mp = median_ms(twin, args.repeat), median_ms(minipt, args.repeat)
        cols = f"{'-':>9} {'-':>9}"
        if torch:
            tq, tk, tv = (torch.from_numpy(a.copy()).requires_grad_(True) for a in (q, k, v))
            tg = torch.from_numpy(dout)

            def ref():
                out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
                out.backward(tg)
            t_t = median_ms(ref, args.repeat)
            cols = f"{t_t:9.2f} {t_t / t_mp:8.2f}x"
        print(f"{name:<5} {str((B, H, T, D)):<16} {t_np:9.2f} {t_mp:10.2f} {t_np / t_mp:8.2f}x {cols}")


if __name__ == "__main__":
    main()
