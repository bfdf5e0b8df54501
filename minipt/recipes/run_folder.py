"""The one rule for an ``--out`` folder, shared by every recipe: never clobber a run.

A folder that already holds a run's files is refused unless the user says
``--resume`` (continue it) or ``--overwrite`` (replace those files; anything else in the
folder stays). ``check_out`` runs before anything is read or written;
``clear_run_files`` only once every other check has passed. ``train_generated`` is the
whole run of a recipe on generated data (ERNIE, the VL models, UniLM, prefix LM, GLM):
those rules, the saved settings a ``--resume`` must match, training and the report.
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path

from ..train import TrainConfig, train
from . import with_steps


def check_out(out: Path, files: tuple[str, ...], *, resume: bool, overwrite: bool, can_resume: bool = True) -> None:
    """Refuse conflicting flags, a resume of what cannot be resumed, and a held run."""
    if resume and overwrite:
        raise ValueError("--resume continues the run in --out and --overwrite replaces it: give one of them")
    if resume and not can_resume:
        raise ValueError("--resume: this model trains in one short pass; there is nothing to resume "
                         "(use --overwrite to train it again into the same --out)")
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"--out {out} is a file; --out names the folder of a run")
    held = [f for f in files if (out / f).exists()]
    if held and not (resume or overwrite):
        raise FileExistsError(f"--out {out} already holds a run ({', '.join(held)}); continue it with --resume, "
                              "replace it with --overwrite, or give another --out")


def clear_run_files(out: Path, files: tuple[str, ...]) -> None:
    """Remove the old run's ``files`` (and nothing else) before a new run is written."""
    for f in files:
        (out / f).unlink(missing_ok=True)


GENERATED_RUN_FILES = ("run.json", "checkpoint.npz", "metrics.jsonl", "loss.png", "report.json")


def _saved(entry, out: Path) -> dict:
    """The settings in ``out/run.json``, checked: a damaged file, or the run of another
    model, is a ValueError naming it."""
    path = out / "run.json"
    if not path.is_file():
        raise FileNotFoundError(f"--resume: {out} holds no run.json, so there is no run of this model to continue")
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is damaged: not JSON text ({e})") from None
    kinds = {"preset": (str,), "steps": (int, type(None)), "seed": (int,)}
    if not isinstance(saved, dict) or any(not isinstance(saved.get(k), t) or isinstance(saved.get(k), bool)
                                          for k, t in kinds.items()):
        raise ValueError(f"{path} is damaged: it does not hold the run's preset, steps and seed")
    model = saved.get("model", entry.name)                  # runs before the name was saved: trust --model
    if model != entry.name:
        raise ValueError(f"--resume: the run in {out} trains {model!r}, not {entry.name!r}; continue it with "
                         f"`minipt train {model} --out {shlex.quote(str(out))} --resume`, or give another --out")
    if saved["preset"] not in entry.presets:
        raise ValueError(f"{path} is damaged: {entry.name} has no preset {saved['preset']!r}")
    return saved


def run_settings(entry, out: Path, resume: bool, preset, steps, seed) -> tuple[str, int | None, int]:
    """(preset, steps, seed) for this run: given (or defaults) for a new run; the saved
    ones for a resume, where a different value given is refused by name. ``steps`` None
    means the preset's own; a resume given that number agrees with it."""
    if not resume:
        return preset or "toy", steps, 0 if seed is None else seed
    saved = _saved(entry, out)
    total = saved["steps"] if saved["steps"] is not None else entry.presets[saved["preset"]].train.get("steps")
    for name, given, had in (("preset", preset, saved["preset"]), ("steps", steps, total), ("seed", seed, saved["seed"])):
        if given is not None and given != had:
            raise ValueError(f"--resume: the run in {out} has {name} {had}, not {given}; a resumed run keeps its "
                             f"settings: leave --{name} out, or give another --out for a new run")
    return saved["preset"], saved["steps"], saved["seed"]


def run_corpus(out: Path, resume: bool, corpus: str | None) -> str | None:
    """The ``--corpus`` of this run, as an absolute path (None: the preset's own data): the
    given one for a new run; the saved one for a resume, where another is refused."""
    given = str(Path(corpus).resolve()) if corpus else None
    if not resume:
        return given
    saved = json.loads((out / "run.json").read_text(encoding="utf-8")).get("corpus")   # checked by run_settings
    if given is not None and given != saved:
        raise ValueError(f"--resume: the run in {out} was trained on {saved or 'the preset data'}, not {given}; a "
                         "resumed run keeps its data: leave --corpus out, or give another --out for a new run")
    return saved


def check_tokenizer(out: Path, tok) -> None:
    """A resume rebuilds the tokenizer from the run's data: it must equal the saved
    ``tokenizer.json`` (else that file was damaged or the data changed since)."""
    from ..tokenizers.base import Tokenizer
    path = out / "tokenizer.json"
    saved = Tokenizer.load(path)
    vocab = lambda t: [t.id_to_token(i) for i in range(t.vocab_size)]
    if type(saved) is not type(tok) or vocab(saved) != vocab(tok):
        raise ValueError(f"--resume: {path} is not the vocabulary this run's data gives: it was changed or damaged "
                         "since training (or the data changed); give another --out for a new run")


def write_settings(entry, out: Path, preset: str, steps: int | None, seed: int, **extra) -> None:
    """``out/run.json``: what a ``--resume`` reads back (``run_settings``), and ``extra``."""
    (out / "run.json").write_text(json.dumps({"model": entry.name, "preset": preset, "steps": steps, "seed": seed,
                                              **extra}))


def train_generated(entry, make, preset: str | None, *, why_no_corpus: str, corpus: str | None = None,
                    steps: int | None = None, out_dir: str | None = None, seed: int | None = None,
                    resume: bool = False, overwrite: bool = False, progress: bool = True) -> dict:
    """The run of a recipe on generated data with known truth (ERNIE, the VL models, UniLM,
    the prefix LM, GLM): folder rules, saved settings for ``--resume``, training, the
    report. ``make(entry, preset, seed, steps)`` -> (model, get_batch, evaluate, source),
    ``evaluate(model)`` -> (summary lines, figures); ``--corpus`` is refused with
    ``why_no_corpus``."""
    if corpus:
        raise ValueError(f"minipt train {entry.name} {why_no_corpus}; --corpus is not supported")
    out = Path(out_dir or f"runs/{entry.name}")
    check_out(out, GENERATED_RUN_FILES, resume=resume, overwrite=overwrite)
    preset, steps, seed = run_settings(entry, out, resume, preset, steps, seed)
    if preset not in entry.presets:
        raise ValueError(f"unknown preset {preset!r} for {entry.name}; choose one of {sorted(entry.presets)}")
    p = entry.presets[preset]
    if overwrite:
        clear_run_files(out, GENERATED_RUN_FILES)
    out.mkdir(parents=True, exist_ok=True)
    model, get_batch, evaluate, source = make(entry, p, seed, steps)
    if progress:
        print(f"minipt train {entry.name}: {entry.title}, preset {preset}, {model.num_parameters():,} parameters, "
              f"{source}")
    tc = TrainConfig(**with_steps(p.train, steps), seed=seed, out_dir=str(out), progress=progress)
    if not resume:
        write_settings(entry, out, preset, steps, seed)
    result = train(model, get_batch, tc, model_config=model.spec(), resume=resume)
    val = "" if result.val_loss is None else f", validation loss {result.val_loss:.3f}"
    summary = [f"pre-trained {result.step} steps in {result.seconds:.0f}s, final training loss "
               f"{result.train_loss:.3f}{val}"]
    report = {"model": entry.name, "preset": preset, "steps": result.step, "total_steps": tc.steps,
              "train_loss": result.train_loss, "val_loss": result.val_loss, "seconds": round(result.seconds, 1),
              "checkpoint": str(result.checkpoint), "plot": str(result.plot), "interrupted": result.interrupted}
    if result.interrupted:
        report["resume_command"] = f"minipt train {entry.name} --out {shlex.quote(str(out))} --resume"
    else:
        lines, found = evaluate(model)
        summary += lines
        report.update(found)
    report["summary"] = summary
    (out / "report.json").write_text(json.dumps(report, indent=2))
    report["files"] = [str(q) for q in (out / "run.json", result.checkpoint, out / "metrics.jsonl", result.plot,
                                         out / "report.json") if q is not None]
    return report
