"""Recipes behind ``minipt train unilm``, ``minipt train prefixlm`` and ``minipt train glm``:
word-level pre-training on the toy language (nothing downloaded), then a report measured
against what the language makes true.

- ``unilm``: pairs (A, B) where B picks up A's subject (``toy_text_tasks.reply_about``);
  each example draws its mode from UniLM's mix; bidirectional rows get NSP (half of
  them with a random B). Reported on held-out pairs: cloze accuracy per mode and NSP
  accuracy; then fine-tuning for generation (seq2seq mask, target tokens masked) on the
  toy translation task and greedy, KV-cached decoding of its test sources: exact match
  and token accuracy.
- ``prefixlm``: windows of the toy word stream, each with a uniform split point
  (``objectives.unified.prefix_lm``): the prefix fully visible, loss on the rest.
  Reported: the loss on held-out windows with their prefixes, and the same windows read
  left to right (no prefix).
- ``glm``: toy sentences with spans blanked (``objectives.permutation.glm_blank_infilling``).
  Reported: the held-out loss, and how often greedy blank filling of held-out sentences
  gives a sentence the toy language can produce (oracle probability > 0), against
  random words of the same lengths.

The run folder holds ``run.json`` (preset, steps, seed: ``--resume`` takes them from
there), ``checkpoint.npz``, ``metrics.jsonl``, ``loss.png`` and ``report.json``, as the
knowledge recipes (``recipes/knowledge.py``); the held-out evaluation runs only on a
finished run. ``--corpus`` does not apply (the reports need the toy language's truth).
"""
from __future__ import annotations

import json
import shlex
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..core.module import eval_mode
from ..models.registry import Preset
from ..objectives.common import IGNORE
from ..train import TrainConfig, train
from . import with_steps
from .knowledge import _settings
from .run_folder import check_out, clear_run_files

PAD, SOS, EOS, MASK, START, END = "[PAD]", "[SOS]", "[EOS]", "[MASK]", "[START]", "[END]"
RUN_FILES = ("run.json", "checkpoint.npz", "metrics.jsonl", "loss.png", "report.json")

UNILM_PRESETS = {
    "toy": Preset(model=dict(max_position=32, n_layer=2, n_head=4, d_model=64, d_ff=256, dropout=0.0),
                  batch_size=32, train=dict(steps=600, lr=2e-3, min_lr=2e-4, warmup=50, weight_decay=0.01,
                                            eval_every=100, eval_batches=4, grad_clip=1.0),
                  data=dict(pairs=4000, mask_prob=0.15, finetune_steps=400, finetune_mask_prob=0.5,
                            task_sizes=(2000, 100, 200)),
                  expected=""),
}


# -- vocabulary and padding ----------------------------------------------------------------
@lru_cache(maxsize=1)
def tokenizer():
    """Word ids for the toy language, its translation's words and the specials of UniLM
    ([SOS], [EOS], [MASK]) and GLM ([START], [END]); ``[PAD]`` is id 0."""
    from ..data.toy_grammar import END_WORD
    from ..data.toy_tasks import language
    from ..data.toy_text_tasks import lexicon
    from ..tokenizers.word import WordTokenizer
    words = [w for w in language().vocab if w != END_WORD] + sorted(set(lexicon().values()))
    return WordTokenizer(specials=[PAD, SOS, EOS, MASK, START, END]).fit(" ".join(dict.fromkeys(words)))


def ids(words) -> np.ndarray:
    text = words if isinstance(words, str) else " ".join(words)
    return tokenizer().encode_array(text).astype(np.int64)


def pad_batch(rows: list[dict], keys: tuple[str, ...]) -> list[np.ndarray]:
    """Examples of different lengths -> one array per key: 1-D entries padded at the end
    (ids with [PAD] = 0, ``targets`` with IGNORE), (N, N) masks with False (padding is
    never seen and sees nothing), (2, N) positions with 0."""
    N = max(len(r["ids"]) for r in rows)
    out = []
    for key in keys:
        first = np.asarray(rows[0][key])
        if first.ndim == 2 and first.shape[0] == first.shape[1]:                # a mask (N_i, N_i)
            arr = np.zeros((len(rows), N, N), dtype=bool)
            for b, r in enumerate(rows):
                n = len(r["ids"])
                arr[b, :n, :n] = r[key]
        else:
            fill = IGNORE if key == "targets" else 0
            arr = np.full((len(rows),) + first.shape[:-1] + (N,), fill, dtype=np.int64)
            for b, r in enumerate(rows):
                v = np.asarray(r[key])
                arr[b, ..., :v.shape[-1]] = v
        out.append(arr)
    return out


# -- UniLM ----------------------------------------------------------------------------------
def reply_pairs(n: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(A, B) sentence pairs: B is a new sentence about A's subject."""
    from ..data.toy_tasks import sentence
    from ..data.toy_text_tasks import reply_about
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n):
        a = sentence(rng)
        pairs.append((ids(a[0]), ids(reply_about(*a, rng)[0])))
    return pairs


def unilm_batch(pairs, rng: np.random.Generator, B: int, mask_prob: float, mode: str | None = None):
    """(ids, segments, mask (B, N, N), mlm_labels, nsp_labels) from B random pairs, each
    with a drawn mode (or ``mode``); bidirectional rows carry NSP, half of them NotNext."""
    from ..objectives.unified import unilm_example, unilm_mode
    tok = tokenizer()
    sp = {k: tok.token_to_id(t) for k, t in (("sos_id", SOS), ("eos_id", EOS), ("mask_id", MASK))}
    rows, nsp = [], []
    for k in rng.integers(0, len(pairs), B):
        m = mode or unilm_mode(rng)
        a, b = pairs[k]
        label = IGNORE
        if m == "bidirectional":
            label = int(rng.random() < 0.5)
            if not label:
                b = pairs[int(rng.integers(len(pairs)))][1]
        rows.append(unilm_example(a, b, rng, **sp, vocab_size=tok.vocab_size, special_ids=(0,),
                                  mask_prob=mask_prob, mode=m))
        nsp.append(label)
    return (*pad_batch(rows, ("ids", "segments", "mask", "targets")), np.array(nsp))


def _accuracy(logits: np.ndarray, targets: np.ndarray) -> float:
    keep = targets != IGNORE
    return float((logits.argmax(-1)[keep] == targets[keep]).mean()) if keep.any() else float("nan")


def cloze_by_mode(model, pairs, seed: int, n: int = 256, mask_prob: float = 0.15) -> dict:
    """Held-out cloze loss and accuracy per mode (the same pairs and masks in every mode)."""
    from ..objectives.unified import UNILM_MODES
    found = {}
    with eval_mode(model):
        for mode in UNILM_MODES:
            ids_, seg, mask, labels, _ = unilm_batch(pairs, np.random.default_rng(seed), n, mask_prob, mode)
            loss, logits = model(ids_, seg, mask, labels)
            found[mode] = {"loss": float(loss), "accuracy": _accuracy(logits, labels)}
    return found


def finetune_and_decode(model, p, seed: int, progress: bool = False) -> dict:
    """Fine-tune for generation on the toy translation, then decode its test sources."""
    from ..data.toy_text_tasks import translation
    task = translation(sizes=tuple(p.data["task_sizes"]), seed=seed)
    pairs = [(ids(e["source"]), ids(e["target"])) for e in task.train]
    steps = p.data["finetune_steps"]
    tc = TrainConfig(**{**p.train, "steps": steps, "warmup": steps // 10, "eval_every": 0}, seed=seed,
                     progress=progress)
    mp = p.data["finetune_mask_prob"]
    train(model, lambda split, rng: unilm_batch(pairs, rng, p.batch_size, mp, "seq2seq")[:4], tc)
    tok = tokenizer()
    sp = dict(sos_id=tok.token_to_id(SOS), eos_id=tok.token_to_id(EOS), mask_id=tok.token_to_id(MASK))
    exact = right = total = 0
    for e in task.test:
        want = list(ids(e["target"]))
        got = model.generate(ids(e["source"]), **sp, max_len=len(want) + 4)
        exact += got == want
        right += sum(g == w for g, w in zip(got, want))
        total += len(want)
    return {"exact match": exact / len(task.test), "token accuracy": right / total}


def _unilm(entry, p, seed):
    pairs = reply_pairs(p.data["pairs"], seed)
    held = reply_pairs(500, seed + 1000)
    model = entry.build(rng=np.random.default_rng(seed), vocab_size=tokenizer().vocab_size, **p.model)

    def get(split, rng):
        return unilm_batch(pairs if split == "train" else held, rng, p.batch_size, p.data["mask_prob"])

    def evaluate(model):
        found = {}
        for mode, r in cloze_by_mode(model, held, seed + 1, mask_prob=p.data["mask_prob"]).items():
            found[f"cloze accuracy {mode}"] = r["accuracy"]
        ids_, seg, mask, labels, nsp = unilm_batch(held, np.random.default_rng(seed + 2), 256, 0.15, "bidirectional")
        with eval_mode(model):
            found["NSP accuracy"] = float((model.nsp_logits(model.encode(ids_, seg, mask)).argmax(-1) == nsp).mean())
        found.update({f"translation {k}": v for k, v in finetune_and_decode(model, p, seed).items()})
        return [f"{k} {v:.3f}" for k, v in found.items()], found
    return model, get, evaluate, f"{len(pairs)} toy sentence pairs (the second about the first's subject)"


MAKERS = {"unilm": _unilm}


def train_unified(entry, preset: str | None = None, *, corpus: str | None = None, steps: int | None = None,
                  out_dir: str | None = None, seed: int | None = None, resume: bool = False,
                  overwrite: bool = False, progress: bool = True) -> dict:
    if corpus:
        raise ValueError(f"minipt train {entry.name} trains on the toy language, whose truth the report needs; "
                         "--corpus is not supported")
    out = Path(out_dir or f"runs/{entry.name}")
    check_out(out, RUN_FILES, resume=resume, overwrite=overwrite)
    preset, steps, seed = _settings(out, resume, preset, steps, seed)
    if preset not in entry.presets:
        raise ValueError(f"unknown preset {preset!r} for {entry.name}; choose one of {sorted(entry.presets)}")
    p = entry.presets[preset]
    if overwrite:
        clear_run_files(out, RUN_FILES)
    out.mkdir(parents=True, exist_ok=True)
    model, get_batch, evaluate, source = MAKERS[entry.name](entry, p, seed)
    if progress:
        print(f"minipt train {entry.name}: {entry.title}, preset {preset}, {model.num_parameters():,} parameters, "
              f"{source}")
    tc = TrainConfig(**with_steps(p.train, steps), seed=seed, out_dir=str(out), progress=progress)
    if not resume:
        (out / "run.json").write_text(json.dumps({"preset": preset, "steps": steps, "seed": seed}))
    result = train(model, get_batch, tc, model_config=model.spec(), resume=resume)
    val = f"{result.val_loss:.3f}" if result.val_loss is not None else "not evaluated"
    summary = [f"pre-trained {result.step} steps in {result.seconds:.0f}s, final training loss "
               f"{result.train_loss:.3f}, validation loss {val}"]
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


train_unilm = train_unified
