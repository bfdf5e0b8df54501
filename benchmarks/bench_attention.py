"""Causal attention forward+backward, float32: minipt's default path (the fused Numba
kernel) against its NumPy twin and torch's scaled_dot_product_attention (if installed),
the three timed in alternating rounds (benchmarks/harness.py).

    python benchmarks/bench_attention.py [--rounds 7] [--calls 3]

Ratios are median per-round ratios with min..max; > 1 means minipt is faster. Sizes are
the GPT-2-style S, M, L of the issues.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

from minipt.ops import attention as A  # noqa: E402

SIZES = {"S": (16, 4, 64, 16), "M": (16, 4, 128, 32), "L": (8, 6, 256, 32)}   # B, H, T, D


def sides(torch, B, H, T, D):
    r = np.random.default_rng(0)
    q, k, v, dout = (r.standard_normal((B, H, T, D)).astype(np.float32) for _ in range(4))   # (B, H, T, D)
    scale = 1 / math.sqrt(D)

    def minipt():
        out, cache = A.attention_forward(q, k, v, causal=True)
        A.attention_backward(dout, cache)

    def twin():
        out, cache = A.attention_forward_numpy(q, k, v, None, True, None, 0.0, None, True, scale)
        A.attention_backward_numpy(dout, cache)
    out = {"minipt": minipt, "numpy": twin}
    if torch:
        tq, tk, tv = (torch.from_numpy(a.copy()).requires_grad_(True) for a in (q, k, v))
        tg = torch.from_numpy(dout)

        def ref():
            torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True).backward(tg)
        out["torch"] = ref
    return out


def run(quick: bool = False, rounds: int = 7, calls: int = 3) -> list[dict]:
    torch = harness.try_torch(2)
    rows = []
    for name, (B, H, T, D) in SIZES.items():
        fns = sides(torch, B, H, T, D)
        t = harness.rounds_of(fns, rounds=3 if quick else rounds, calls=calls)
        case = f"{name} causal fwd+bwd B{B} H{H} T{T} D{D}"
        rows.append(harness.row("attention", case, "minipt", "numpy", harness.Comparison(t["minipt"], t["numpy"])))
        if torch:
            rows.append(harness.row("attention", case, "minipt", "torch", harness.Comparison(t["minipt"], t["torch"])))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    torch = harness.try_torch(2)
    print(f"torch {torch.__version__ if torch else 'not installed'}; float32, causal, fwd+bwd; ms per call; "
          f"B/A: median of per-round ratios (> 1: A = minipt faster)")
    harness.print_rows(run(args.quick, args.rounds, args.calls))


if __name__ == "__main__":
    main()
