"""Command line: ``minipt train MODEL`` (any registered model), ``minipt models``,
``minipt sample`` (from a run or, with ``--hf``, a Hugging Face transformers folder),
``minipt export``, ``minipt gradcheck``."""
from __future__ import annotations

import argparse
import sys
import time


def cmd_gradcheck(args: argparse.Namespace) -> int:
    from .core.gradcheck import TOLERANCE
    from .selfcheck import all_cases

    cases = [c for c in all_cases() if not args.only or args.only in c.name]
    if not cases:
        print(f"no gradcheck case matches {args.only!r}", file=sys.stderr)
        return 2
    print(f"{'name':<28} {'shapes':<34} {'inputs':>9} {'params':>9}  result")
    failed = 0
    start = time.perf_counter()
    for case in cases:
        res = case.run()
        fmt = lambda k: f"{res.max_error(k):9.1e}" if any(a.kind == k for a in res.arrays) else f"{'-':>9}"
        ok = "pass" if res.passed else "FAIL"
        failed += not res.passed
        print(f"{case.name:<28} {case.shapes:<34} {fmt('input')} {fmt('param')}  {ok}")
        if not res.passed:
            w = res.worst
            print(f"    worst: {w.name}{list(w.where)} analytic {w.analytic:.6g} numeric {w.numeric:.6g}")
    took = time.perf_counter() - start
    print(f"\n{len(cases) - failed}/{len(cases)} passed (max relative error < {TOLERANCE:g}"
          f" in float64, random upstream gradient) in {took:.1f}s")
    return 1 if failed else 0


def cmd_train(args: argparse.Namespace) -> int:
    from .models import registry

    entry = registry.get(args.model)
    report = entry.recipe(entry, args.preset, corpus=args.corpus, steps=args.steps, out_dir=args.out,
                          seed=args.seed, resume=args.resume, progress=True)
    print()
    for line in report["summary"]:
        print(line)
    print("wrote " + ", ".join(report["files"]))
    if report.get("interrupted"):
        print(f"interrupted: continue with `minipt train {entry.name} --preset {args.preset} --out {args.out} --resume`")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from .models import registry

    for e in registry.entries():
        print(f"{e.name:<14} {e.title} ({e.paper})")
        print(f"{'':<14} file {e.file}; objective: {e.objective}; lesson {e.lesson or '-'}")
        for name, p in e.presets.items():
            print(f"{'':<14} preset {name}" + (f": {p.expected}" if p.expected else ""))
    return 0


def cmd_sample(args: argparse.Namespace) -> int:
    import numpy as np

    from .inference.decoding import SamplingConfig, generate

    if args.hf is not None:
        from .interop.cli_commands import load_hf_for_sampling
        model, tok = load_hf_for_sampling(args.hf)
    else:
        from .recipes.char_lm import load_trained
        model, tok = load_trained(args.checkpoint)
    if tok is None:                   # a transformers folder without tokenizer files: ids in, ids out
        try:
            prompt = np.array([int(t) for t in args.prompt.split()], dtype=np.int64)
        except ValueError:
            raise ValueError(f"{args.hf} has no tokenizer files (vocab.json + merges.txt, tokenizer.json or "
                             "minipt_tokenizer.json); pass --prompt as space-separated token ids") from None
    else:
        prompt = tok.encode_array(args.prompt)
    new = generate(model, prompt, SamplingConfig(args.max_new_tokens, args.temperature, args.top_k, args.top_p),
                   np.random.default_rng(args.seed))
    print(" ".join(map(str, [*prompt.tolist(), *new.tolist()])) if tok is None else args.prompt + tok.decode(new))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .interop.cli_commands import export_checkpoint

    out, note = export_checkpoint(args.checkpoint, args.to, overwrite=args.overwrite)
    print(f"wrote {out}: {note}")
    return 0


def main(argv: list[str] | None = None) -> int:
    from . import __version__
    from .models import registry

    fmt = argparse.ArgumentDefaultsHelpFormatter
    parser = argparse.ArgumentParser(prog="minipt", description=__doc__)
    parser.add_argument("--version", action="version", version=f"minipt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("models", help="list every model: paper, file, objective, lesson, presets")
    p.set_defaults(func=cmd_models)
    p = sub.add_parser("gradcheck", help="check every op's and module's backward against central differences", formatter_class=fmt)
    p.add_argument("--only", default="", help="run only cases whose name contains this text")
    p.set_defaults(func=cmd_gradcheck)
    trainable = registry.trainable()
    listing = "; ".join(f"{e.name} ({e.title}: presets {', '.join(e.presets)})" for e in trainable)
    p = sub.add_parser("train", help="train a model (the main job: `minipt train gpt`)", formatter_class=fmt,
                       description=f"Models: {listing}.")
    p.add_argument("model", choices=[e.name for e in trainable], help="what to train (`minipt models` lists them)")
    p.add_argument("--preset", default="toy", help="the model's preset (see the list above)")
    p.add_argument("--corpus", default=None, help="train on this UTF-8 text file instead")
    p.add_argument("--steps", type=int, default=None, help="override the preset's number of steps")
    p.add_argument("--out", default="runs/gpt", help="folder for checkpoint, metrics, plot, report")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--resume", action="store_true", help="continue the run saved in --out")
    p.set_defaults(func=cmd_train)
    p = sub.add_parser("sample", help="continue a prompt with a trained model", formatter_class=fmt)
    p.add_argument("--checkpoint", default="runs/gpt", help="the --out folder of a training run")
    p.add_argument("--hf", default=None, metavar="FOLDER",
                   help="sample from a Hugging Face transformers folder (GPT-2 or LLaMA layout) instead of a run")
    p.add_argument("--prompt", default="the ")
    p.add_argument("--max-new-tokens", type=int, default=200)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_sample)
    p = sub.add_parser("export", help="write a trained model as a Hugging Face transformers folder", formatter_class=fmt)
    p.add_argument("--checkpoint", default="runs/gpt", help="the --out folder of a training run (or its checkpoint.npz)")
    p.add_argument("--to", required=True, metavar="FOLDER", help="the folder to write (config.json, model.safetensors)")
    p.add_argument("--overwrite", action="store_true", help="replace FOLDER if it exists and is not empty")
    p.set_defaults(func=cmd_export)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, IndexError, KeyError, FileNotFoundError, FileExistsError, ImportError,
            FloatingPointError) as e:
        print(f"minipt {args.command}: error: {e}", file=sys.stderr)   # bad input: a message, no traceback
        return 2


if __name__ == "__main__":
    sys.exit(main())
