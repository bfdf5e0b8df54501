"""Attention forward+backward, float32: minipt's default path ("blas": BLAS products around
a Numba softmax, the batch in parts on threads) against its other fast path ("fused": the
whole attention in one Numba kernel), the NumPy twin and torch's
scaled_dot_product_attention (if installed), all timed in alternating rounds
(benchmarks/harness.py).

    python benchmarks/bench_attention.py [--rounds 7] [--calls 3] [--only causal,bert,t5]

Cases:
- causal: GPT's causal attention at the GPT-2-style sizes S, M, L of the issues;
- bert: bidirectional with a key padding mask, (B, 1, S) on minipt's side as BERT passes
  it, the same boolean (B, 1, 1, S) as torch's attn_mask; lengths drawn from T/2..T;
- t5: T5's encoder (an additive (H, T, S) bias, scale 1) and decoder (causal + bias; on
  torch's side the causal rule folded into the float mask, which SDPA cannot take with
  is_causal); the bias needs its gradient on both sides (torch: requires_grad).

Ratios are median per-round ratios with min..max; > 1 means minipt is faster.
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

SIZES = {  # case -> name -> (B, H, T, D)
    "causal": {"S": (16, 4, 64, 16), "M": (16, 4, 128, 32), "L": (8, 6, 256, 32)},
    "bert": {"H4 D64": (8, 4, 256, 64), "H8 D32": (8, 8, 256, 32)},
    "t5": {"enc H4 D64": (8, 4, 256, 64), "enc H8 D32": (8, 8, 256, 32), "dec H4 D64": (8, 4, 256, 64)},
}


def inputs(case, name, B, H, T, D):
    """q, k, v, dout (B, H, T, D); mask (B, 1, T) or None; bias (H, T, T) or None; causal; scale."""
    r = np.random.default_rng(0)
    q, k, v, dout = (r.standard_normal((B, H, T, D)).astype(np.float32) for _ in range(4))
    mask = bias = None
    if case == "bert":
        lengths = np.r_[T, r.integers(T // 2, T + 1, B - 1)]
        mask = (np.arange(T)[None] < lengths[:, None])[:, None, :]        # (B, 1, T): may attend
    if case == "t5":
        bias = r.standard_normal((H, T, T)).astype(np.float32)           # (H, T, T)
    causal = case == "causal" or name.startswith("dec")
    return q, k, v, dout, mask, bias, causal, 1.0 if case == "t5" else 1 / math.sqrt(D)


def sides(torch, case, name, B, H, T, D):
    q, k, v, dout, mask, bias, causal, scale = inputs(case, name, B, H, T, D)

    def path(name):
        def run():
            saved, A.FAST_PATH = A.FAST_PATH, name
            try:
                out, cache = A.attention_forward(q, k, v, mask, causal=causal, bias=bias, scale=scale)
                A.attention_backward(dout, cache)
            finally:
                A.FAST_PATH = saved
        return run

    def twin():
        out, cache = A.attention_forward_numpy(q, k, v, mask, causal, bias, 0.0, None, True, scale)
        A.attention_backward_numpy(dout, cache)
    out = {"minipt": path(A.FAST_PATH), "fused": path("fused"), "numpy": twin}
    if torch:
        tq, tk, tv = (torch.from_numpy(a.copy()).requires_grad_(True) for a in (q, k, v))
        tg = torch.from_numpy(dout)
        tmask = None if mask is None else torch.from_numpy(mask[:, None].copy())   # (B, 1, 1, T) bool
        tbias = None if bias is None else torch.from_numpy(bias[None].copy()).requires_grad_(True)
        upper = torch.full((T, T), float("-inf")).triu(1)

        def ref():
            m = tmask if tbias is None else tbias + upper if causal else tbias
            y = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=m, scale=scale,
                                                                 is_causal=causal and tbias is None)
            y.backward(tg)
        out["torch"] = ref
    return out


def run(quick: bool = False, rounds: int = 7, calls: int = 3, only=tuple(SIZES)) -> list[dict]:
    torch = harness.try_torch(2)
    rows = []
    for case in only:
        for name, (B, H, T, D) in SIZES[case].items():
            fns = sides(torch, case, name, B, H, T, D)
            t = harness.rounds_of(fns, rounds=3 if quick else rounds, calls=calls)
            label = f"{case} {name} B{B} H{H} T{T} D{D}"
            rows.append(harness.row("attention", label, "minipt", "numpy", harness.Comparison(t["minipt"], t["numpy"])))
            rows.append(harness.row("attention", label, "minipt", "fused", harness.Comparison(t["minipt"], t["fused"])))
            if torch:
                rows.append(harness.row("attention", label, "minipt", "torch",
                                        harness.Comparison(t["minipt"], t["torch"])))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default=",".join(SIZES), help="cases to run: " + ", ".join(SIZES))
    args = ap.parse_args()
    only = args.only.split(",")
    if any(c not in SIZES for c in only):
        ap.error(f"--only: expected cases from {', '.join(SIZES)}, got {args.only}")
    torch = harness.try_torch(2)
    print(f"torch {torch.__version__ if torch else 'not installed'}; float32, fwd+bwd; ms per call; "
          f"B/A: median of per-round ratios (> 1: A = minipt faster); {harness.load_note()}")
    harness.print_rows(run(args.quick, args.rounds, args.calls, only))


if __name__ == "__main__":
    main()
