"""Every benchmark, one table, one JSON file.

    python benchmarks/run_all.py [--full] [--only gpt,block,...] [--json benchmarks/results.json]

Quick settings by default (fewer rounds and sizes, a few minutes on 2 cores); ``--full``
runs each benchmark at its own defaults, and bench_gpt's ``--busy 1`` as well;
``--batch-parts`` as in the training benchmarks (minipt's stacks in 2 parts by default). Each row
is side A against side B timed in alternating rounds (benchmarks/harness.py): median ms
per call of each, the median per-round ratio B/A (> 1: A is faster) with min..max, and
extras (MFU, peak memory, throughput). The JSON file holds the rows and the machine.
Run it under ``flock /tmp/minipt-cpu.lock`` on a shared machine.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import harness  # noqa: E402


def gpt_rows(full: bool) -> list[dict]:
    import bench_gpt
    out = bench_gpt.run(("S", "M", "L"), rounds=15 if full else 3, calls=3 if full else 2, busy=1 if full else 0,
                        profile_steps=5 if full else 2)
    rows = []
    for q in out["quiet"]:
        c = q["config"]
        r = {"bench": "gpt", "case": f"{q['size']} train step V{c['V']} L{c['L']} d{c['d']} T{c['T']} B{c['B']}",
             "a": "minipt", "b": "torch" if "torch_tok_s" in q else None,
             "a_ms": 1e3 * c["B"] * c["T"] / q["minipt_tok_s"], "rounds": q.get("rounds")}
        if "torch_tok_s" in q:
            r.update(b_ms=1e3 * c["B"] * c["T"] / q["torch_tok_s"], ratio=q["ratio"], ratio_min=q["ratio_min"],
                     ratio_max=q["ratio_max"], ratio_iqr=list(q["ratio_iqr"]))
        r.update({k: q[k] for k in ("minipt_tok_s", "torch_tok_s", "minipt_mfu", "torch_mfu", "sgemm_peak_gflops",
                                    "minipt_peak_mb", "minipt_slowdown", "torch_slowdown") if k in q})
        rows.append(r)
    return rows


def block_rows(full: bool) -> list[dict]:
    import bench_block
    return bench_block.run(quick=not full, show_profile=False)


def attention_rows(full: bool) -> list[dict]:
    import bench_attention
    return bench_attention.run(quick=not full)


def kernels_rows(full: bool) -> list[dict]:
    import bench_kernels
    return bench_kernels.run(quick=not full, rounds=7 if full else 3, calls=5 if full else 3)


def tokenizers_rows(full: bool) -> list[dict]:
    import bench_tokenizers
    return bench_tokenizers.run(quick=not full)


def ngram_rows(full: bool) -> list[dict]:
    import bench_ngram
    return bench_ngram.run(quick=not full)


def word2vec_rows(full: bool) -> list[dict]:
    import bench_word2vec
    return bench_word2vec.run(quick=not full)


def lstm_rows(full: bool) -> list[dict]:
    import bench_lstm
    return bench_lstm.run(quick=not full)


def training_rows(module: str, full: bool) -> list[dict]:
    """Rows of a whole-model training benchmark whose ``run`` gives per-size tokens/s and
    ratios (bench_bert, bench_t5)."""
    bench = __import__(module)
    out = bench.run(("S", "M", "L") if full else ("S", "M"), rounds=15 if full else 3, calls=3 if full else 2,
                    profile_steps=5 if full else 2)
    rows = []
    for q in out["rows"]:
        c = " ".join(f"{k}{v}" for k, v in q["config"].items())
        tokens = bench.tokens_per_step(q["config"])
        r = {"bench": module.removeprefix("bench_"), "case": f"{q['size']} train step {c}", "a": "minipt",
             "b": "torch" if "torch_tok_s" in q else None, "a_ms": 1e3 * tokens / q["minipt_tok_s"],
             "minipt_tok_s": q["minipt_tok_s"]}
        if "torch_tok_s" in q:
            r.update(b_ms=1e3 * tokens / q["torch_tok_s"], torch_tok_s=q["torch_tok_s"], ratio=q["ratio"], ratio_min=q["ratio_min"], ratio_max=q["ratio_max"],
                     rounds=q["rounds"])
        rows.append(r)
    return rows


BENCHES = {"gpt": gpt_rows, "block": block_rows, "attention": attention_rows, "kernels": kernels_rows,
           "tokenizers": tokenizers_rows, "ngram": ngram_rows, "word2vec": word2vec_rows, "lstm": lstm_rows,
           "bert": lambda full: training_rows("bench_bert", full), "t5": lambda full: training_rows("bench_t5", full)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="each benchmark at its own defaults (slow)")
    ap.add_argument("--only", default=",".join(BENCHES), help=f"a subset of {','.join(BENCHES)}")
    ap.add_argument("--json", type=Path, default=HERE / "results.json")
    harness.add_batch_parts_option(ap)
    args = ap.parse_args()
    harness.set_batch_parts(args.batch_parts, args.part_workers)
    names = args.only.split(",")
    for n in names:
        if n not in BENCHES:
            ap.error(f"--only: expected names from {','.join(BENCHES)}, got {n!r}")
    import numpy as np
    torch = harness.try_torch(2)
    meta = {"when": time.strftime("%Y-%m-%d %H:%M:%S"), "full": args.full, "machine": platform.machine(),
            "cpus_available": len(os.sched_getaffinity(0)), "python": platform.python_version(),
            "numpy": np.__version__, "torch": torch.__version__ if torch else None,
            "load_average_at_start": os.getloadavg(), "batch_parts": args.batch_parts}
    rows, seconds = [], {}
    for n in names:
        print(f"\n== {n} ==", flush=True)
        t0 = time.perf_counter()
        rows += BENCHES[n](args.full)
        seconds[n] = round(time.perf_counter() - t0, 1)
    meta.update(seconds=seconds, load_average_at_end=os.getloadavg())
    print(f"\n== all benchmarks ({'full' if args.full else 'quick'}; {meta['when']}; torch {meta['torch']}; "
          f"load average {meta['load_average_at_start'][0]:.1f} -> {meta['load_average_at_end'][0]:.1f}) ==")
    harness.print_rows(rows)
    args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1, default=str) + "\n")
    print(f"written to {args.json}")


if __name__ == "__main__":
    main()
