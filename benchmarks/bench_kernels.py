"""Each Numba kernel against its NumPy twin, and against torch when it is installed.

    python benchmarks/bench_kernels.py [--rounds 7] [--quick] [--no-torch]

float32, C-contiguous, sizes of our GPT configs: N = B*T rows, C the model width (the
GELU runs on the FFN's 4C), softmax rows of K, embedding tables V x C. The twin, the
kernel and torch run in alternating rounds (benchmarks/harness.py), 10 ms apart so that
torch's OpenMP threads stop spinning before the next side is timed; a round's time is
the median of ``--calls`` calls. torch's backward is timed alone with
``torch.autograd.grad(..., retain_graph=True)`` on a graph built once, so each row
compares the same piece of work. Ratios are medians of per-round ratios (min..max):
speed-up = twin / kernel; vs torch = torch / kernel (> 1: minipt is faster).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

from minipt import kernels  # noqa: E402
from minipt.ops.activations import gelu_tanh_backward_numpy, gelu_tanh_forward_numpy  # noqa: E402
from minipt.ops.embedding import embedding_backward_numpy  # noqa: E402
from minipt.ops.norms import layer_norm_backward_numpy, layer_norm_forward_numpy  # noqa: E402
from minipt.ops.softmax import softmax_backward_numpy  # noqa: E402

EPS = 1e-5


class Case:
    """One row: the twin, the kernel, and a builder of the torch equivalent (called only
    in the torch phase)."""

    def __init__(self, name, twin, kernel, torch):
        self.name, self.twin, self.kernel, self.torch = name, twin, kernel, torch
        self.ms: dict[str, float] = {}


def layer_norm_cases(n, c, rng):
    x = rng.standard_normal((n, c), dtype=np.float32)     # (N, C)
    dy = rng.standard_normal((n, c), dtype=np.float32)    # (N, C)
    g = rng.standard_normal(c, dtype=np.float32)          # (C,)
    b = rng.standard_normal(c, dtype=np.float32)          # (C,)
    _, mean, rstd = layer_norm_forward_numpy(x, g, b, EPS)
    fwd, bwd = kernels.get("layer_norm_forward"), kernels.get("layer_norm_backward")

    def torch_fwd(torch):
        tx, tg, tb = (torch.from_numpy(a) for a in (x, g, b))
        return lambda: torch.nn.functional.layer_norm(tx, (c,), tg, tb, EPS)

    def torch_bwd(torch):
        tx, tg, tb = (torch.from_numpy(a.copy()).requires_grad_(True) for a in (x, g, b))
        ty, tdy = torch.nn.functional.layer_norm(tx, (c,), tg, tb, EPS), torch.from_numpy(dy)
        return lambda: torch.autograd.grad(ty, (tx, tg, tb), tdy, retain_graph=True)

    yield Case(f"layer_norm fwd {n}x{c}", lambda: layer_norm_forward_numpy(x, g, b, EPS),
               lambda: fwd(x, g, b, EPS), torch_fwd)
    yield Case(f"layer_norm bwd {n}x{c}", lambda: layer_norm_backward_numpy(dy, x, mean, rstd, g),
               lambda: bwd(dy, x, mean, rstd, g), torch_bwd)


def gelu_cases(n, c4, rng):
    h = rng.standard_normal(n * c4, dtype=np.float32)     # (N * 4C,) flat, as the op passes it
    dh = rng.standard_normal(n * c4, dtype=np.float32)
    fwd, bwd = kernels.get("gelu_tanh_forward"), kernels.get("gelu_tanh_backward")

    def torch_fwd(torch):
        th = torch.from_numpy(h)
        return lambda: torch.nn.functional.gelu(th, approximate="tanh")

    def torch_bwd(torch):
        th = torch.from_numpy(h.copy()).requires_grad_(True)
        ty, tdh = torch.nn.functional.gelu(th, approximate="tanh"), torch.from_numpy(dh)
        return lambda: torch.autograd.grad(ty, (th,), tdh, retain_graph=True)

    yield Case(f"gelu_tanh fwd {n}x{c4}", lambda: gelu_tanh_forward_numpy(h), lambda: fwd(h), torch_fwd)
    yield Case(f"gelu_tanh bwd {n}x{c4}", lambda: gelu_tanh_backward_numpy(dh, h), lambda: bwd(dh, h),
               torch_bwd)


def softmax_case(n, k, rng):
    z = rng.standard_normal((n, k), dtype=np.float32)     # (N, K)
    y = np.exp(z - z.max(axis=1, keepdims=True))
    y /= y.sum(axis=1, keepdims=True)                     # (N, K) rows sum to 1
    dy = rng.standard_normal((n, k), dtype=np.float32)    # (N, K)
    bwd = kernels.get("softmax_backward")

    def torch_bwd(torch):
        tz = torch.from_numpy(z.copy()).requires_grad_(True)
        ty, tdy = torch.softmax(tz, dim=-1), torch.from_numpy(dy)
        return lambda: torch.autograd.grad(ty, (tz,), tdy, retain_graph=True)

    return Case(f"softmax bwd {n}x{k}", lambda: softmax_backward_numpy(dy, y), lambda: bwd(dy, y), torch_bwd)


def embedding_case(n, v, c, rng):
    ids = rng.integers(0, v, n)                           # (N,) int64, repeats when V is small
    dy = rng.standard_normal((n, c), dtype=np.float32)    # (N, C)
    scatter = kernels.get("embedding_backward")

    def fresh(fn):
        # what the op does: a zeroed (V, C) gradient, then the scatter-add
        return lambda: fn(ids, dy, np.zeros((v, c), np.float32))

    def torch_bwd(torch):
        tw = torch.zeros((v, c), requires_grad=True)
        tids, tdy = torch.from_numpy(ids), torch.from_numpy(dy)
        ty = torch.nn.functional.embedding(tids, tw)
        return lambda: torch.autograd.grad(ty, (tw,), tdy, retain_graph=True)

    return Case(f"embedding bwd {n} ids V{v} C{c}", fresh(embedding_backward_numpy), fresh(scatter), torch_bwd)


def cases(quick: bool):
    rng = np.random.default_rng(0)
    rows = [1024, 4096] if quick else [1024, 2048, 4096]
    widths = [64, 192] if quick else [64, 128, 192, 768]
    for n in rows:
        for c in widths:
            yield from layer_norm_cases(n, c, rng)
        for c in widths:
            yield from gelu_cases(n, 4 * c, rng)
        for k in ([64, 256] if quick else [64, 128, 256]):
            yield softmax_case(n, k, rng)
        for v, c in ([(65, 128), (8192, 768)] if quick else [(65, 128), (512, 192), (8192, 768)]):
            yield embedding_case(n, v, c, rng)


def run(quick: bool = True, rounds: int = 7, calls: int = 5, use_torch: bool = True) -> list[dict]:
    if not kernels.ENABLED:
        sys.exit("MINIPT_NUMBA=0 is set: there are no kernels to time")
    torch = harness.try_torch(2) if use_torch else None
    rows = []
    todo = list(cases(quick))
    print(f"timing {len(todo)} cases ...", file=sys.stderr, flush=True)
    for case in todo:
        fns = {"kernel": case.kernel, "twin": case.twin}
        if torch is not None:
            fns["torch"] = case.torch(torch)
        t = harness.rounds_of(fns, rounds=rounds, calls=calls)
        rows.append(harness.row("kernels", case.name, "kernel", "twin", harness.Comparison(t["kernel"], t["twin"])))
        if torch is not None:
            rows.append(harness.row("kernels", case.name, "kernel", "torch",
                                    harness.Comparison(t["kernel"], t["torch"])))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7, help="alternating rounds")
    ap.add_argument("--calls", type=int, default=5, help="timed calls per side per round (median)")
    ap.add_argument("--quick", action="store_true", help="fewer sizes")
    ap.add_argument("--no-torch", action="store_true", help="skip torch even when it is installed")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error(f"--rounds must be at least 1, got {args.rounds}")
    rows = run(args.quick, args.rounds, args.calls, not args.no_torch)
    torch = None if args.no_torch else harness.try_torch(2)
    print(f"numpy {np.__version__}, numba {numba.__version__}, torch "
          f"{torch.__version__ + ' (2 threads)' if torch else 'not used'}; float32; ms per call; "
          f"B/A: median of {args.rounds} per-round ratios (> 1: the kernel is faster)")
    harness.print_rows(rows)


if __name__ == "__main__":
    main()
