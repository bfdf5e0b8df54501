"""Every matrix product a minipt training step sends to BLAS, timed in each layout that
gives the same result, against torch's product of the same shape in the same run.

    python benchmarks/bench_gemm.py [--models gpt,bert,t5] [--sizes S,M,L] [--rounds 7] [--calls 3]
                                    [--threads 2]

The products are found, not listed by hand: one step of each model (``bench_gpt.py``,
``bench_bert.py``, ``bench_t5.py`` at each size) runs under ``sys.setprofile``, and on
return from the ops that call NumPy's ``@`` their operands are read from the frame:
``ops/linear.py`` (forward ``x2 @ w.T``; backward ``dy2 @ w`` and ``dy2.T @ x2``) and
``ops/attention.py``'s NumPy path (``q @ k^T``, ``p @ v``; backward ``p^T @ dO``,
``dO @ v^T``, ``ds @ k``, ``ds^T @ q``). The fused attention kernel calls no BLAS and is
not listed. Products of the same shape and strides are measured once, with a count per
step for each model and size.

For a product C (m x n) = A (m x k) @ B (k x n) the layouts timed, NumPy on its BLAS:

* ``called``: A and B with exactly the shapes and strides minipt passed;
* ``A.B`` with A stored [m,k] or [k,m] (then passed transposed) and B stored [k,n] or
  [n,k]: the four BLAS transpose flags;
* ``(Bt.At)t``: the same four storages, computing C^T = B^T A^T, so C comes back as a
  transposed (Fortran-order) view. Free where the consumer accepts that (a weight
  gradient added into its buffer); a copy where it reshapes it (``linear_forward``'s
  ``y.reshape``), so the table also names the best layout with a C-order result;
* ``3-D``: for a product over the B*T rows of a (B, T, C) activation, the batched 3-D
  ``x @ W.T`` instead of the 2-D reshape.

torch's side is ``torch.mm`` (``torch.matmul`` for batched operands) on the operands as
minipt passed them (torch's own Linear uses the same layouts: ``addmm(x, W.t())``,
``dy @ W``, ``dy.t() @ x``). Both sides run on ``--threads`` threads (NumPy's BLAS
through threadpoolctl). All sides of a shape alternate in rounds
(harness.rounds_of); each call repeats the product to about 2 ms; ratios are the median
over rounds of torch's time over the layout's (> 1: NumPy faster), and the best layout
is the one with the highest such ratio. A shape is flagged when the layout minipt calls
is more than 10 % slower than torch. The closing table sums each model-size's products
(times their calls per step): as called, at the best layouts, and torch's.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

MODELS = ("gpt", "bert", "t5")


# -- what minipt calls ----------------------------------------------------------------------
def _linear_forward(f):
    return [("x@W.T", f["x2"], f["w"].T, f["x"].shape[:-1])]


def _linear_backward(f):
    return [("dy@W", f["dy2"], f["w"], f["shape"][:-1]), ("dy.T@x", f["dy2"].T, f["x2"], None)]


def _attention_forward(f):
    return [("q@k^T", f["q"], f["k"].swapaxes(-1, -2), None), ("p@v", f["pd"], f["v"], None)]


def _attention_backward(f):
    return [("p^T@dO", f["pd"].swapaxes(-1, -2), f["dout"], None), ("dO@v^T", f["dout"], f["v"].swapaxes(-1, -2), None),
            ("ds@k", f["ds"], f["k"], None), ("ds^T@q", f["ds"].swapaxes(-1, -2), f["q"], None)]


HOOKS = {  # (file, function) -> the products it computed, from its locals at return
    ("minipt/ops/linear.py", "linear_forward"): _linear_forward,
    ("minipt/ops/linear.py", "linear_backward"): _linear_backward,
    ("minipt/ops/attention.py", "attention_forward_numpy"): _attention_forward,
    ("minipt/ops/attention.py", "attention_backward_numpy"): _attention_backward,
}


def _layout(a: np.ndarray) -> tuple:
    """(shape, strides in elements): enough to rebuild an operand with the same layout."""
    return a.shape, tuple(s // a.itemsize for s in a.strides)


def traced_products(step) -> list[tuple]:
    """Run ``step`` once; (name, A layout, B layout, rows) of each product the HOOKS saw."""
    found = []

    def tracer(frame, event, arg):
        if event == "return":
            code = frame.f_code
            hook = HOOKS.get(("/".join(Path(code.co_filename).parts[-3:]), code.co_name))
            if hook:
                found.extend((name, _layout(a), _layout(b), rows) for name, a, b, rows in hook(frame.f_locals))

    sys.setprofile(tracer)
    try:
        step()
    finally:
        sys.setprofile(None)
    return found


def collect(models, sizes) -> dict:
    """{(name, A layout, B layout): {"rows": the (B, T) of a row block or None,
    "where": {model-size: calls per step}}}."""
    shapes: dict = {}
    for model in models:
        for size in sizes:
            for name, a, b, rows in traced_products(harness.model_step(model, size)):
                entry = shapes.setdefault((name, a, b), {"rows": None, "where": defaultdict(int)})
                entry["where"][f"{model}-{size}"] += 1
                if rows is not None and len(rows) > 1:
                    entry["rows"] = rows
    return shapes


# -- the layouts ---------------------------------------------------------------------------
def _strided(rng, shape, strides) -> np.ndarray:
    """A float32 array of ``shape`` with ``strides`` (elements) over a fresh random buffer."""
    extent = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    base = rng.standard_normal(extent, dtype=np.float32)
    return np.lib.stride_tricks.as_strided(base, shape, tuple(s * 4 for s in strides))


def _stored(rng, shape, transposed: bool) -> np.ndarray:
    """(..., r, c) contiguous, or (..., c, r) contiguous passed as its transposed view."""
    if not transposed:
        return rng.standard_normal(shape, dtype=np.float32)
    return rng.standard_normal((*shape[:-2], shape[-1], shape[-2]), dtype=np.float32).swapaxes(-1, -2)


def variants(a_layout, b_layout, rows, rng) -> dict:
    """({name: (callable computing the product once, is its result C-ordered)}, the
    operands as called)."""
    a_shape, b_shape = a_layout[0], b_layout[0]
    a, b = _strided(rng, *a_layout), _strided(rng, *b_layout)
    out = {"called": (lambda: a @ b, True)}
    for ta in (False, True):
        for tb in (False, True):
            x, y = _stored(rng, a_shape, ta), _stored(rng, b_shape, tb)
            where = f"A[{'km' if ta else 'mk'}] B[{'nk' if tb else 'kn'}]"
            out[f"A.B {where}"] = (lambda x=x, y=y: x @ y, True)
            xt, yt = x.swapaxes(-1, -2), y.swapaxes(-1, -2)
            out[f"(Bt.At)t {where}"] = (lambda xt=xt, yt=yt: (yt @ xt).swapaxes(-1, -2), False)
    if rows is not None and len(rows) > 1 and len(a_shape) == 2:        # a (B*T, k) block of a (B, T, k) activation
        x3 = rng.standard_normal((*rows, a_shape[1]), dtype=np.float32)
        out["3-D"] = (lambda: x3 @ b, True)
    return out, (a, b)


def measure(key, rows, torch, rounds: int, calls: int, rng) -> dict:
    """Times (ms per product, median over rounds) of each layout and of torch, and the
    per-round ratios torch / layout."""
    _, a_layout, b_layout = key
    sides, (a, b) = variants(a_layout, b_layout, rows, rng)
    m, k, n = a_layout[0][-2], a_layout[0][-1], b_layout[0][-1]
    batch = int(np.prod(a_layout[0][:-2], dtype=np.int64))
    flops = 2 * batch * m * k * n
    reps = max(1, int(2e-3 * 40e9 / flops))                              # about 2 ms a call at 40 GF/s
    fns = {name: (lambda fn=fn: [fn() for _ in range(reps)]) for name, (fn, _) in sides.items()}
    if torch is not None:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        mm = torch.mm if a.ndim == 2 else torch.matmul
        fns["torch"] = lambda: [mm(ta, tb) for _ in range(reps)]
    times = harness.rounds_of(fns, rounds=rounds, calls=calls, warmup=1)
    res = {"m": m, "k": k, "n": n, "batch": batch, "gflop": flops / 1e9,
           "ms": {name: 1e3 * statistics.median(t) / reps for name, t in times.items()},
           "c_order": {name: c for name, (_, c) in sides.items()}}
    if torch is not None:
        res["ratio"] = {name: statistics.median(tt / tv for tt, tv in zip(times["torch"], t))
                        for name, t in times.items() if name != "torch"}
    return res


# -- the report ----------------------------------------------------------------------------
def run(models=MODELS, sizes=("S", "M", "L"), rounds=7, calls=3, threads=2) -> dict:
    from threadpoolctl import threadpool_limits
    torch = harness.try_torch(threads)
    t0 = time.perf_counter()
    shapes = collect(models, sizes)
    print(f"torch {torch.__version__ if torch else 'not installed'}; float32; {len(shapes)} distinct products "
          f"found in one step of {','.join(models)} at {','.join(sizes)} ({time.perf_counter() - t0:.0f} s); "
          f"{harness.load_note()}; {threads} thread(s); {rounds} alternating rounds of {calls} calls; ratio = torch ms / NumPy ms (> 1: NumPy faster)",
          flush=True)
    print(f"{'product':<7} {'batch':>5} {'m x k x n':>16} {'called ms':>9} {'torch ms':>8} {'torch/called':>12}  "
          f"{'best layout':<24} {'torch/best':>10}  {'best C-order out':<22} {'ratio':>6}  where (calls/step)")
    rng = np.random.default_rng(0)
    results = []
    for key, entry in sorted(shapes.items(), key=lambda kv: (kv[0][0], kv[0][1][0], kv[0][2][0])):
        with threadpool_limits(limits=threads, user_api="blas"):
            r = measure(key, entry["rows"], torch, rounds, calls, rng)
        r.update(name=key[0], where=dict(entry["where"]), a=key[1], b=key[2])
        results.append(r)
        ms, ratio = r["ms"], r.get("ratio", {})
        # best: the highest median pair ratio against torch (the fastest median time without torch)
        score = {v: -x for v, x in ratio.items()}.get if ratio else ms.get
        best = min((v for v in ms if v != "torch"), key=score)
        best_c = min((v for v in ms if v != "torch" and r["c_order"][v]), key=score)
        r.update(best=best, best_c_order=best_c)
        fmt = {v: f"{x:.2f}x" for v, x in ratio.items()}
        flag = "  <- called >10 % slower than torch" if ratio and ratio["called"] < 1 / 1.1 else ""
        where = ", ".join(f"{w} x{c}" for w, c in r["where"].items())
        print(f"{r['name']:<7} {r['batch']:5d} {r['m']:>5}x{r['k']:>5}x{r['n']:>4} {ms['called']:9.3f} "
              f"{ms.get('torch', float('nan')):8.3f} {fmt.get('called', '-'):>12}  {best:<24} {fmt.get(best, '-'):>10}  "
              f"{best_c:<22} {fmt.get(best_c, '-'):>6}  {where}{flag}", flush=True)
    summary = step_totals(results, torch is not None)
    return {"torch": torch.__version__ if torch else None, "products": results, "per_step": summary}


def step_totals(results, with_torch: bool) -> dict:
    """GEMM ms per training step of each model-size: as called, at each product's best
    layout, at its best C-order layout, and torch's."""
    totals: dict = defaultdict(lambda: defaultdict(float))
    for r in results:
        for where, count in r["where"].items():
            t = totals[where]
            t["called"] += count * r["ms"]["called"]
            t["best"] += count * r["ms"][r["best"]]
            t["best_c_order"] += count * r["ms"][r["best_c_order"]]
            if with_torch:
                t["torch"] += count * r["ms"]["torch"]
    print(f"\nGEMM ms per step (sum over the products x calls): {'called':>8} {'best':>8} {'best C':>8} "
          f"{'torch':>8}")
    for where, t in totals.items():
        print(f"  {where:<47} {t['called']:8.2f} {t['best']:8.2f} {t['best_c_order']:8.2f} "
              f"{t['torch'] if with_torch else float('nan'):8.2f}")
    return {w: dict(t) for w, t in totals.items()}


def main() -> None:
    import json
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--sizes", default="S,M,L")
    ap.add_argument("--rounds", type=int, default=7, help="alternating rounds of all layouts and torch")
    ap.add_argument("--calls", type=int, default=3, help="timed calls per side per round (median)")
    ap.add_argument("--threads", type=int, default=2, help="BLAS threads of NumPy and torch")
    ap.add_argument("--json", type=Path, help="also write the results to this JSON file")
    args = ap.parse_args()
    models, sizes = args.models.split(","), args.sizes.split(",")
    for m in models:
        if m not in MODELS:
            ap.error(f"--models: expected names from {','.join(MODELS)}, got {m!r}")
    for s in sizes:
        if s not in ("S", "M", "L"):
            ap.error(f"--sizes: expected names from S,M,L, got {s!r}")
    if min(args.rounds, args.calls, args.threads) < 1:
        ap.error(f"--rounds, --calls and --threads must be >= 1, got {args.rounds}, {args.calls}, {args.threads}")
    out = run(models, sizes, args.rounds, args.calls, args.threads)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
