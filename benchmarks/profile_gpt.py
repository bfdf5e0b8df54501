"""Where a minipt GPT-2 training step spends its time: cProfile over whole steps, each
function's own time (``tottime``) summed into the parts of the step.

    python benchmarks/profile_gpt.py [--size M] [--steps 10]

Parts: ``matmul (BLAS)`` is the time inside ``linear_forward`` / ``linear_backward`` and
the attention functions' own matrix products; ``attention`` the fused attention ops and
their softmax kernels; ``layernorm``, ``gelu``, ``cross-entropy``, ``embedding`` their
ops and kernels; ``AdamW`` the optimiser step; ``other`` the rest (Python glue, reshapes,
copies, gradient zeroing). A share is of the profiled total; cProfile adds a small
overhead per Python call, so the absolute times run a little above ``bench_gpt.py``'s.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gpt import SIZES  # noqa: E402

from minipt.models.decoder.gpt import GPT, GPTConfig  # noqa: E402
from minipt.optim import AdamW  # noqa: E402

PARTS = (  # (part, substrings of "file:function"), first match wins
    ("matmul (BLAS)", ("ops/linear.py",)),
    ("attention", ("ops/attention.py", "kernels/attention.py", "kernels/fused_attention.py", "kernels/softmax.py",
                   "ops/softmax.py")),
    ("layernorm", ("ops/norms.py", "kernels/layernorm.py")),
    ("gelu", ("ops/activations.py", "kernels/gelu.py")),
    ("cross-entropy", ("ops/cross_entropy.py",)),
    ("embedding", ("ops/embedding.py", "kernels/embedding.py")),
    ("AdamW", ("optim/",)),
)


def part_of(filename: str, function: str) -> str:
    where = f"{filename}:{function}"
    for part, keys in PARTS:
        if any(k in where for k in keys):
            return part
    return "other"


def profile_steps(size: str, steps: int) -> dict[str, float]:
    V, L, H, d, T, B = SIZES[size]
    model = GPT(GPTConfig.gpt2(vocab_size=V, block_size=T, n_layer=L, n_head=H, d_model=d),
                rng=np.random.default_rng(0))
    opt = AdamW(model, lr=1e-4, weight_decay=0.1)
    rng = np.random.default_rng(1)

    def step():
        x, y = rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))
        model.zero_grad()
        model(x, y)
        model.backward()
        opt.step()

    for _ in range(2):                       # JIT compilation and first-touch allocation
        step()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        step()
    prof.disable()
    totals: dict[str, float] = defaultdict(float)
    for (filename, _, function), (_, _, tottime, _, _) in pstats.Stats(prof).stats.items():
        totals[part_of(filename, function)] += tottime / steps
    return totals


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", default="M", choices=sorted(SIZES))
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    totals = profile_steps(args.size, args.steps)
    total = sum(totals.values())
    print(f"size {args.size} {SIZES[args.size]} (V, L, H, d, T, B): {total * 1e3:.1f} ms per step, "
          f"mean of {args.steps}")
    for part, t in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {part:<15} {t * 1e3:8.2f} ms  {100 * t / total:5.1f} %")


if __name__ == "__main__":
    main()
