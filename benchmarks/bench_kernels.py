"""Each Numba kernel against its NumPy twin (and torch when installed), float32.

    python benchmarks/bench_kernels.py [--repeat 7] [--quick]

Prints milliseconds (median of repeats, after a warm-up call that pays for JIT) and
the speed-up kernel vs twin (and kernel vs torch: > 1 means minipt is faster).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median_ms, try_torch  # noqa: E402

from minipt import kernels  # noqa: E402
from minipt.ops import activations as A  # noqa: E402
from minipt.ops import embedding as E  # noqa: E402
from minipt.ops import norms as N  # noqa: E402
from minipt.ops import softmax as S  # noqa: E402


def cases(quick: bool):
    rng = np.random.default_rng(0)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)
    rows = [1024, 4096] if quick else [1024, 2048, 4096]
    for n in rows:
        for c in (64, 192, 768):
            x, dy, g, b = f32(n, c), f32(n, c), f32(c), f32(c)
            y, mean, rstd = N.layer_norm_forward_numpy(x, g, b, 1e-5)
            yield (f"layer_norm fwd+bwd {n}x{c}",
                   lambda: N.layer_norm_backward_numpy(dy, x, *N.layer_norm_forward_numpy(x, g, b, 1e-5)[1:], g),
                   lambda: kernels.get("layer_norm_backward")(dy, x, *kernels.get("layer_norm_forward")(x, g, b, 1e-5)[1:], g),
                   ("layer_norm", x, g, b))
        h = f32(n * 4 * 128)
        dh = f32(n * 4 * 128)
        yield (f"gelu_tanh fwd+bwd {n}x512",
               lambda: (A.gelu_tanh_forward_numpy(h), A.gelu_tanh_backward_numpy(dh, h)),
               lambda: (kernels.get("gelu_tanh_forward")(h), kernels.get("gelu_tanh_backward")(dh, h)),
               ("gelu", h))
        for k in (64, 256):
            z = f32(n * 4, k)
            p = np.exp(z - z.max(1, keepdims=True)); p /= p.sum(1, keepdims=True)
            dp = f32(n * 4, k)
            yield (f"softmax bwd {n * 4}x{k}", lambda: S.softmax_backward_numpy(dp, p),
                   lambda: kernels.get("softmax_backward")(dp, p), ("softmax", z))
        for v in (65, 8192):
            ids = rng.integers(0, v, n).astype(np.int64)
            de = f32(n, 128)
            dw = np.zeros((v, 128), np.float32)
            yield (f"embedding bwd {n} ids V{v} C128", lambda: E.embedding_backward_numpy(ids, de, dw),
                   lambda: kernels.get("embedding_backward")(ids, de, dw), None)


def torch_fn(torch, spec):
    if spec is None or torch is None:
        return None
    kind, *arrays = spec
    ts = [torch.from_numpy(a.copy()).requires_grad_(True) for a in arrays]
    if kind == "layer_norm":
        x, g, b = ts
        def run():
            y = torch.nn.functional.layer_norm(x, (x.shape[-1],), g, b, 1e-5)
            y.backward(torch.ones_like(y))
    elif kind == "gelu":
        (x,) = ts
        def run():
            y = torch.nn.functional.gelu(x, approximate="tanh")
            y.backward(torch.ones_like(y))
    else:
        (x,) = ts
        def run():
            y = torch.softmax(x, dim=-1)
            y.backward(torch.ones_like(y))
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-torch", action="store_true",
                    help="skip torch (its OpenMP threads keep spinning and slow the other columns)")
    args = ap.parse_args()
    if not kernels.ENABLED:
        sys.exit("MINIPT_NUMBA=0 is set: nothing to compare")
    torch = None if args.no_torch else try_torch()
    print(f"numpy {np.__version__}, torch {torch.__version__ if torch else 'not installed'}; float32, "
          f"median of {args.repeat}; ms")
    print(f"{'case':<34} {'twin':>8} {'kernel':>8} {'speed-up':>9} {'torch':>8} {'vs torch':>9}")
    for name, twin, kern, spec in cases(args.quick):
        t_twin, t_kern = median_ms(twin, args.repeat), median_ms(kern, args.repeat)
        tf = torch_fn(torch, spec)
        t_torch = median_ms(tf, args.repeat) if tf else None
        torch_cols = f"{t_torch:8.3f} {t_torch / t_kern:8.2f}x" if t_torch else f"{'-':>8} {'-':>9}"
        print(f"{name:<34} {t_twin:8.3f} {t_kern:8.3f} {t_twin / t_kern:8.1f}x {torch_cols}")


if __name__ == "__main__":
    main()
