"""GPT-2-style training throughput: forward, backward and AdamW, float32, minipt against
the same model in torch eager (if installed), in alternating rounds (benchmarks/harness.py).

    python benchmarks/bench_gpt.py [--sizes S,M,L] [--rounds 15] [--calls 3] [--profile-steps 15]
                                   [--busy N] [--busy-threads 1|2]

Each side first runs until its tokens/s stops rising (harness.warm_up; each window is
printed: torch's eager steps were seen speeding up over their first rounds), then the
sides alternate. Prints each round's tokens/s; a per-part table of a step (matmuls,
attention, norms, activations, loss, optimiser, embedding, glue: minipt under cProfile,
torch under torch.profiler, benchmarks/parts.py); tokens/s of each side (median per-step
time over the rounds), the median of the per-round ratios minipt/torch (> 1: minipt is
faster) with its min..max, the MFU of each side (6N + 12 L T d FLOPs per token) against
the float32 GEMM peak measured in this run on the model's projection shapes with 2
threads, and minipt's peak traced memory.
With ``--busy N`` the same comparison runs again beside N background processes that each
keep ``--busy-threads`` cores busy with BLAS work, and each side's slowdown is printed.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

from minipt.models.decoder.gpt import GPT, GPTConfig  # noqa: E402
from minipt.nn.batch_parts import batch_parts, part_workers  # noqa: E402
from minipt.optim import AdamW  # noqa: E402

SIZES = {  # V, L, H, d, T, B
    "S": (65, 2, 4, 64, 64, 16),
    "M": (65, 4, 4, 128, 128, 16),
    "L": (512, 6, 6, 192, 256, 8),
}


def batches(V, T, B, n=4, seed=1):
    rng = np.random.default_rng(seed)
    return [(rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))) for _ in range(n)]   # (B, T) each


def minipt_model(V, L, H, d, T):
    return GPT(GPTConfig.gpt2(vocab_size=V, block_size=T, n_layer=L, n_head=H, d_model=d),
               rng=np.random.default_rng(0))


def minipt_step(V, L, H, d, T, B):
    """A closure running one training step (zero_grad, forward, backward, AdamW)."""
    model = minipt_model(V, L, H, d, T)
    opt = AdamW(model, lr=1e-4, weight_decay=0.1)
    data, i = batches(V, T, B), [0]

    def step():
        x, y = data[i[0] % len(data)]
        i[0] += 1
        opt.zero_grad()
        model(x, y)
        model.backward()
        opt.step()
    return step, model


def weight_params(model) -> int:
    """Parameters that multiply activations: all but the position table."""
    return sum(p.size for name, p in model.named_parameters() if not name.startswith("wpe"))


def torch_step(torch, V, L, H, d, T, B):
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
    data, i = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in batches(V, T, B)], [0]

    def step():
        x, y = data[i[0] % len(data)]
        i[0] += 1
        opt.zero_grad(set_to_none=True)
        model(x, y).backward()
        opt.step()
    return step


def measure(sizes, rounds, calls, torch, memory=True, profile_steps=0, separate=False, busy=False):
    """One row per size: tokens/s of both sides, the pair ratios, MFU, memory, and with
    ``profile_steps`` the per-part split of a step (parts.py); ``separate``: each side
    timed in its own process (separate.py), ``busy``: beside busy load (the thread policy stays on)."""
    rows = []
    for name in sizes:
        V, L, H, d, T, B = SIZES[name]
        mp, model = minipt_step(V, L, H, d, T, B)
        ref = torch_step(torch, V, L, H, d, T, B) if torch else None
        cmp, split = harness.training_pair(torch, mp, ref, B * T, rounds, calls, profile_steps, name,
                                           ("bench_gpt", SIZES[name], busy) if separate else None)
        peak, shape = harness.sgemm_peak(harness.gpt_projection_shapes(B * T, d))
        flops = harness.gpt_flops_per_token(weight_params(model), L, T, d)
        row = {"size": name, "config": dict(zip("V L H d T B".split(), SIZES[name])),
               "minipt_tok_s": B * T / cmp.a_median, "sgemm_peak_gflops": peak, "sgemm_shape": shape,
               "flops_per_token": flops}
        row["minipt_mfu"] = row["minipt_tok_s"] * flops / (peak * 1e9)
        if ref:
            lo, hi = cmp.spread()
            row.update(torch_tok_s=B * T / cmp.b_median, ratio=cmp.ratio, ratio_min=lo, ratio_max=hi,
                       ratio_iqr=cmp.iqr(), rounds=rounds)
            row["torch_mfu"] = row["torch_tok_s"] * flops / (peak * 1e9)
        if split:
            row["parts"] = split
        if memory:
            row["minipt_peak_mb"] = harness.peak_memory_mb(mp)
        rows.append(row)
    return rows


def print_rows(rows, title):
    print(title)
    print(f"{'size':<5} {'minipt tok/s':>12} {'torch tok/s':>12} {'ratio (min..max)':>19} "
          f"{'MFU minipt':>10} {'MFU torch':>9} {'sgemm GF/s':>10} {'peak MB':>8}")
    for r in rows:
        ratio = f"{r['ratio']:.2f}x ({r['ratio_min']:.2f}..{r['ratio_max']:.2f})" if "ratio" in r else "-"
        tmfu = f"{100 * r['torch_mfu']:8.0f}%" if "torch_mfu" in r else f"{'-':>9}"
        mem = f"{r['minipt_peak_mb']:8.1f}" if "minipt_peak_mb" in r else f"{'-':>8}"
        print(f"{r['size']:<5} {r['minipt_tok_s']:12,.0f} {harness.fmt_rate(r.get('torch_tok_s'), 12)} "
              f"{ratio:>19} {100 * r['minipt_mfu']:9.0f}% {tmfu} {r['sgemm_peak_gflops']:10.0f} {mem}")


def run(sizes=("S", "M", "L"), rounds=15, calls=3, busy=0, busy_threads=1, quiet=True, profile_steps=15,
        separate=False):
    """All measurements as a dict (what run_all.py stores); prints the tables as it goes."""
    torch = harness.try_torch(2)
    print(f"torch {torch.__version__ if torch else 'not installed'}; float32; a training step "
          f"(fwd + bwd + AdamW); warm-up until tok/s stops rising, then {rounds} alternating rounds of "
          f"{calls} steps per side{', each side in its own process' if separate else ''}{harness.sides_note()}; "
          f"ratio > 1: minipt faster; MFU: 6N + 12 L T d FLOPs/token vs the sgemm peak measured "
          f"now (projection shapes, 2 threads); peak MB: tracemalloc, minipt's own process only (not its part workers); {harness.load_note()}\n"
          f"{harness.isa_note()}", flush=True)
    out = {"quiet": None, "busy": None, "busy_procs": busy, "busy_threads": busy_threads,
           "batch_parts": batch_parts(), "part_workers": part_workers(), "isa": harness.isa_info()}
    if quiet or not busy:
        out["quiet"] = measure(sizes, rounds, calls, torch, profile_steps=profile_steps, separate=separate)
        print_rows(out["quiet"], "no background load added (whatever else runs on the machine still does)")
    if busy:
        with harness.busy(busy, busy_threads):
            out["busy"] = measure(sizes, rounds, calls, torch, memory=False, separate=separate, busy=True)
        print_rows(out["busy"], f"\nbusy: {busy} background BLAS process(es) of {busy_threads} thread(s) each")
        if out["quiet"]:
            print("slowdown (quiet tok/s / busy tok/s):")
            for q, b in zip(out["quiet"], out["busy"]):
                q["minipt_slowdown"] = q["minipt_tok_s"] / b["minipt_tok_s"]
                t = ""
                if "torch_tok_s" in q:
                    q["torch_slowdown"] = q["torch_tok_s"] / b["torch_tok_s"]
                    t = f"   torch {q['torch_slowdown']:.2f}x"
                print(f"  {q['size']:<3} minipt {q['minipt_slowdown']:.2f}x{t}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="S,M,L")
    ap.add_argument("--rounds", type=int, default=15, help="alternating rounds (pairs of ratios)")
    ap.add_argument("--calls", type=int, default=3, help="timed steps per side per round (median)")
    ap.add_argument("--profile-steps", type=int, default=15, help="profiled steps per side for the per-part "
                    "table, in rounds of 3 (0: no table)")
    ap.add_argument("--busy", type=int, default=0, metavar="N", help="also measure beside N busy processes")
    ap.add_argument("--busy-threads", type=int, default=1, choices=(1, 2),
                    help="BLAS threads of each busy process (1: one core each)")
    ap.add_argument("--busy-only", action="store_true", help="skip the quiet measurement")
    ap.add_argument("--separate", action="store_true", help="time each side in its own process (separate.py)")
    ap.add_argument("--threads", type=int, default=0, help="both sides on this many threads (0: torch on 2, "
                    "minipt's thread policy)")
    harness.add_batch_parts_option(ap)
    harness.add_isa_option(ap)
    ap.add_argument("--json", type=Path, help="also write the results to this JSON file")
    args = ap.parse_args()
    harness.apply_isa(args.isa)
    harness.set_bench_threads(args.threads)
    harness.set_batch_parts(args.batch_parts, args.part_workers)
    sizes = args.sizes.split(",")
    for s in sizes:
        if s not in SIZES:
            ap.error(f"--sizes: expected names from {sorted(SIZES)}, got {s!r}")
    if args.profile_steps < 0:
        ap.error(f"--profile-steps must be >= 0, got {args.profile_steps}")
    out = run(sizes, args.rounds, args.calls, args.busy, args.busy_threads, quiet=not args.busy_only,
              profile_steps=args.profile_steps, separate=args.separate)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
