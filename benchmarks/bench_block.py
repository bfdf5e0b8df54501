"""One pre-LN GPT-2 block (GELU tanh, causal), forward + backward, float32: minipt with
its Numba kernels vs the same block on the NumPy twins only (kernels switched off in
process, as MINIPT_NUMBA=0 would) vs an equivalent torch block (eager, 2 threads).

    python benchmarks/bench_block.py [--rounds 5] [--sizes S,M,L] [--tune] [--no-profile]

Sizes (B, T, C, H): S (16, 64, 64, 4), M (16, 128, 128, 4), L (8, 256, 192, 6), d_ff 4C.
minipt, the twins and torch run in alternating rounds (benchmarks/harness.py); ratios are
medians of per-round ratios with min..max, > 1 meaning minipt is faster. BLAS threads
(threadpoolctl) and Numba threads are tuned per size with --tune (default: minipt's
thread policy, minipt.kernels.threads); the per-op table splits one minipt step into BLAS
(the Linear layers), attention (the op, and the head split/merge around it) and
elementwise work (LayerNorm, GELU, residual adds), so the next speed-up is visible.
"""
from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

from minipt import kernels  # noqa: E402
from minipt.nn import attention as mha_module  # noqa: E402
from minipt.nn.block import TransformerBlock  # noqa: E402

SIZES = {"S": (16, 64, 64, 4), "M": (16, 128, 128, 4), "L": (8, 256, 192, 6)}   # B, T, C, H


def make_block(C: int, H: int) -> TransformerBlock:
    return TransformerBlock(C, H, 4 * C, rng=np.random.default_rng(0), activation="gelu_tanh",
                            out_std=0.02 / math.sqrt(2 * 4))


def minipt_step(block, x, dy):
    def step():
        block.zero_grad()
        block(x, causal=True)
        block.backward(dy)
    return step


class kernels_off:
    """Run the NumPy twins: the ops ask ``kernels.get`` at call time, so flipping
    ``kernels.ENABLED`` in process is what MINIPT_NUMBA=0 does at import."""

    def __enter__(self):
        self.was, kernels.ENABLED = kernels.ENABLED, False

    def __exit__(self, *exc):
        kernels.ENABLED = self.was


def torch_block(torch, block, C, H):
    """The same block in torch, with minipt's weights copied in."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.c_attn, self.attn_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(self, x):
            B, T, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            heads = lambda t: t.view(B, T, H, C // H).transpose(1, 2)            # (B, H, T, D)
            o = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
            x = x + self.attn_proj(o.transpose(1, 2).reshape(B, T, C))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    tb = Block()
    pairs = {"ln_1": block.ln_1, "ln_2": block.ln_2, "c_attn": block.attn.c_attn, "attn_proj": block.attn.c_proj,
             "c_fc": block.mlp.c_fc, "mlp_proj": block.mlp.c_proj}
    with torch.no_grad():
        for name, mod in pairs.items():
            getattr(tb, name).weight.copy_(torch.from_numpy(mod.params["weight"]))
            getattr(tb, name).bias.copy_(torch.from_numpy(mod.params["bias"]))
    return tb


def torch_step(torch, tb, x, dy):
    tx, tdy = torch.from_numpy(x.copy()).requires_grad_(True), torch.from_numpy(dy)

    def step():
        tb.zero_grad(set_to_none=True)
        tx.grad = None
        tb(tx).backward(tdy)
    return step, tx


# -- thread tuning -----------------------------------------------------------------
def set_threads(blas: int, nb: int):
    import numba
    from threadpoolctl import threadpool_limits
    numba.set_num_threads(nb)
    return threadpool_limits(limits=blas, user_api="blas")


def tune(fn, repeat: int, numba_too: bool = True):
    """Median ms for each (BLAS threads, Numba threads); returns the best setting and the grid."""
    import numba
    most = numba.config.NUMBA_NUM_THREADS
    grid = {}
    for blas, nb in itertools.product((1, most), (1, most) if numba_too else (most,)):
        with set_threads(blas, nb):
            grid[(blas, nb)] = 1e3 * harness.median_seconds(fn, rounds=repeat)
    numba.set_num_threads(most)
    return min(grid, key=grid.get), grid


# -- per-op profile ----------------------------------------------------------------
class Profiler:
    """Wraps methods with timers; nested calls give inclusive and exclusive times."""

    def __init__(self):
        self.incl, self.child, self.stack = defaultdict(float), defaultdict(float), []

    def wrap(self, key, fn):
        def timed(*args, **kwargs):
            self.stack.append(key)
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                dt = time.perf_counter() - t0
                self.stack.pop()
                self.incl[key] += dt
                if self.stack:
                    self.child[self.stack[-1]] += dt
        return timed

    def exclusive(self, key):
        return self.incl[key] - self.child[key]


def profile(block, x, dy, steps: int = 5):
    """Exclusive ms per (part, fwd|bwd) of one step, averaged over ``steps``."""
    prof = Profiler()
    saved = [(mha_module, "attention_forward"), (mha_module, "attention_backward")]
    originals = [getattr(m, n) for m, n in saved]
    for (m, n), f in zip(saved, originals):
        setattr(m, n, prof.wrap(("attention op", "fwd" if n.endswith("forward") else "bwd"), f))
    for name, mod in block.named_modules():
        for which in ("forward", "backward"):
            setattr(mod, which, prof.wrap((name or "block", which[0] + "wd"), getattr(mod, which)))
    step = minipt_step(block, x, dy)
    step()
    prof.incl.clear()
    prof.child.clear()
    for _ in range(steps):
        step()
    for (m, n), f in zip(saved, originals):
        setattr(m, n, f)
    for _, mod in block.named_modules():
        vars(mod).pop("forward", None)
        vars(mod).pop("backward", None)
    return {key: prof.exclusive(key) / steps * 1e3 for key in prof.incl}


KIND = {"attn.c_attn": "BLAS", "attn.c_proj": "BLAS", "mlp.c_fc": "BLAS", "mlp.c_proj": "BLAS",
        "attention op": "attention", "attn": "attention", "ln_1": "elementwise", "ln_2": "elementwise",
        "mlp": "elementwise", "block": "elementwise", "drop_1": "elementwise", "mlp.dropout": "elementwise"}
WHAT = {"attn": "head split/merge, reshapes", "mlp": "GELU tanh", "block": "residual adds",
        "attention op": "QK^T, softmax, PV (+ bwd)", "ln_1": "LayerNorm", "ln_2": "LayerNorm"}


def print_profile(name, times, flops_linear):
    both = lambda k: (times.get((k, "fwd"), 0.0), times.get((k, "bwd"), 0.0))
    parts = sorted({k for k, _ in times}, key=lambda k: -sum(both(k)))
    total = sum(times.values())
    print(f"\nper-op profile of one minipt step, size {name} (exclusive ms, mean of 5 steps)")
    print(f"  {'part':<14} {'kind':<12} {'fwd':>7} {'bwd':>7} {'share':>6}  what")
    by_kind = defaultdict(float)
    for k in parts:
        f, b = both(k)
        kind = KIND.get(k, "elementwise")
        by_kind[kind] += f + b
        if f + b < 0.005 * total:
            continue
        what = WHAT.get(k, "linear (GEMM + bias)" if kind == "BLAS" else "")
        print(f"  {k:<14} {kind:<12} {f:7.2f} {b:7.2f} {100 * (f + b) / total:5.1f}%  {what}")
    print("  " + ", ".join(f"{kind} {ms:.2f} ms ({100 * ms / total:.0f}%)" for kind, ms in
                           sorted(by_kind.items(), key=lambda kv: -kv[1])) + f"; total {total:.2f} ms")
    print(f"  BLAS rate: {flops_linear / by_kind['BLAS'] / 1e6:.0f} GFLOP/s on the Linear layers")


def with_threads(threads, fn):
    """``fn`` run under (BLAS, Numba) thread counts, or as is when ``threads`` is None."""
    if threads is None:
        return fn

    def run():
        with set_threads(*threads):
            fn()
    return run


class Twin:
    """A step run with the Numba kernels switched off."""

    def __init__(self, step):
        self.step = step

    def __call__(self):
        with kernels_off():
            self.step()


def run(quick: bool = True, rounds: int = 5, sizes=("S", "M", "L"), tune_threads: bool = False,
        show_profile: bool = False) -> list[dict]:
    """One row per (size, reference): minipt against the NumPy twins and against torch."""
    torch = harness.try_torch(2)
    rows, profiles, grids = [], [], []
    for name in sizes:
        B, T, C, H = SIZES[name]
        r = np.random.default_rng(1)
        x, dy = (r.standard_normal((B, T, C)).astype(np.float32) for _ in range(2))   # (B, T, C)
        block = make_block(C, H)
        step, twin = minipt_step(block, x, dy), Twin(minipt_step(block, x, dy))
        best = best_twin = None
        if tune_threads:                          # short grids; the comparison below alternates
            best, grid = tune(step, 3)
            best_twin, _ = tune(twin, 3, numba_too=False)
            grids.append((name, grid))
        fns = {"minipt": with_threads(best, step), "numpy": with_threads(best_twin, twin)}
        extra = {"threads": str(best) if best else "policy"}
        if torch:
            tb = torch_block(torch, block, C, H)
            fns["torch"] = torch_step(torch, tb, x, dy)[0]
            extra["max_abs_diff_vs_torch"] = float(
                np.abs(tb(torch.from_numpy(x)).detach().numpy() - block(x, causal=True)).max())
        t = harness.rounds_of(fns, rounds=3 if quick else rounds, calls=3)
        case = f"{name} block fwd+bwd B{B} T{T} C{C} H{H}"
        extra["minipt_peak_mb"] = harness.peak_memory_mb(step)
        rows.append(harness.row("block", case, "minipt", "numpy", harness.Comparison(t["minipt"], t["numpy"]),
                                **extra))
        if torch:
            rows.append(harness.row("block", case, "minipt", "torch", harness.Comparison(t["minipt"], t["torch"])))
        if show_profile:
            limiter = set_threads(*best) if best else None
            times = profile(block, x, dy)
            if limiter:
                limiter.restore_original_limits()
            flops = 6 * B * T * C * (3 * C + C + 4 * C + 4 * C)          # fwd 2NK, bwd 4NK per Linear
            profiles.append((name, times, flops))
    for name, grid in grids:
        print(f"minipt thread grid {name}, (BLAS, Numba): ms, median of 3: "
              + ", ".join(f"{k}: {v:.1f}" for k, v in grid.items()))
    for p in profiles:
        print_profile(*p)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds (3 timed calls per side each)")
    ap.add_argument("--sizes", default="S,M,L")
    ap.add_argument("--tune", action="store_true", help="pick the best (BLAS, Numba) threads per size first")
    ap.add_argument("--no-profile", action="store_true")
    args = ap.parse_args()
    torch = harness.try_torch(2)
    print(f"torch {torch.__version__ if torch else 'not installed'}; one pre-LN GPT-2 block, float32, causal, "
          f"fwd+bwd; ms per call; B/A: median of {args.rounds} per-round ratios (> 1: minipt faster); "
          f"peak MB: tracemalloc, minipt only")
    rows = run(False, args.rounds, args.sizes.split(","), args.tune, not args.no_profile)
    harness.print_rows(rows)


if __name__ == "__main__":
    main()
