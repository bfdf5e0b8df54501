"""Which corruption teaches an encoder-decoder most? BART's noises and MASS's fragment
lengths, compared on one downstream task at equal compute.

BART (Lewis et al. 2020, Sec. 4 and Table 1) pre-trains one model per noise and fine-
tunes each on the same tasks: text infilling is the strongest single noise, and
infilling + sentence permutation the best combination. MASS (Song et al. 2019, Sec. 4.4,
Fig. 3) varies the fragment length k from 1 (BERT-like) to m (GPT-like) and finds the
middle (about m/2) best. Here, at toy scale, on the texts of the toy language
(``recipes/bart_mass.py``: the toy tasks' inputs, 1-3 sentences):

1. one BART per noise of ``recipes.bart_mass.NOISE_NAMES`` (the five noises, the
   identity ``none``, and ``infilling+permutation``) and one MASS per fragment length
   (k = 1, m/2, m) pre-train for ``pretrain`` steps; a ``no pre-training`` row starts
   fine-tuning from the initial weights;
2. each model is fine-tuned for ``finetune`` steps on the toy summarisation task
   (``summarize: <2-3 sentences>`` -> the sentences without adjectives and place
   phrases, ``data/toy_text_tasks.compression``), every model with the same data, batch
   size, steps and learning rate, on a fresh schedule and optimiser state
   (``experiments/protocol.py``), the same initial weights (seed) for every variant;
3. reported on held-out pairs: the teacher-forced test loss (nats per target token) and
   the exact match of greedy outputs, plus the last pre-training loss.

Whichever way it comes out is what the table says; the toy language is small and the
budget short, so read differences below a few hundredths of a nat with care (one seed).
"""
from __future__ import annotations

import numpy as np

from ..core.module import eval_mode
from ..data import text_to_text as t2t
from ..inference.seq2seq_decoding import greedy
from ..models.protocol import IGNORE
from ..models.seq2seq.bart import Bart, BartConfig
from ..models.seq2seq.mass import MASS, MASSConfig
from ..recipes.bart_mass import (
    NOISE_NAMES,
    denoising_batch,
    mass_pretrain_batch,
    pretraining_texts,
)
from ..tokenizers.special import EOS, MASK, PAD
from .protocol import Budget, pretrain_then_finetune

MASS_K = {"k = 1 (BERT-like)": 0.0, "k = m/2": 0.5, "k = m (GPT-like)": 1.0}
BUDGETS = {"tiny": dict(pretrain=3, finetune=3, sizes=(40, 10, 10), d_model=16, batch=8),        # for tests
           "quick": dict(pretrain=150, finetune=150, sizes=(600, 50, 100), d_model=32, batch=16),
           "full": dict(pretrain=600, finetune=400, sizes=(2000, 100, 200), d_model=48, batch=16)}
MAX_SOURCE, MAX_TARGET = 48, 24
SETTINGS = dict(lr=2e-3, min_lr=2e-4, weight_decay=0.01, eval_every=0)   # each phase, on its own schedule


def _variants() -> list[tuple[str, str, object]]:
    """(row name, kind, setting): BART noises, MASS fragments, no pre-training."""
    rows = [(f"BART {n}", "bart", n) for n in NOISE_NAMES]
    rows += [(f"MASS {name}", "mass", f) for name, f in MASS_K.items()]
    return rows + [("no pre-training", "none", None)]


def _model(kind: str, tok, b: dict, seed: int):
    common = dict(vocab_size=tok.vocab_size, max_positions=MAX_SOURCE, encoder_layers=2, decoder_layers=2, n_head=4,
                  d_model=b["d_model"], pad_id=tok.token_to_id(PAD), eos_id=tok.token_to_id(EOS))
    rng = np.random.default_rng(seed)
    if kind == "mass":
        return MASS(MASSConfig(**common, mask_id=tok.token_to_id(MASK)), rng=rng)
    return Bart(BartConfig(**common, decoder_start_id=tok.token_to_id(EOS)), rng=rng)


def _finetune_batches(tok, pairs: dict, start: int, batch: int):
    def get(split, rng):
        rows = pairs[split]
        chosen = [rows[i] for i in rng.integers(0, len(rows), batch)]
        src, tin, tgt = t2t.encode_pairs(tok, chosen, MAX_SOURCE, MAX_TARGET)
        tin[:, 0] = start
        return src, tin, tgt
    return get


def evaluate(model, tok, test: list[dict], start: int) -> tuple[float, float]:
    """(teacher-forced nats per target token, greedy exact match) on ``test`` pairs."""
    src, tin, tgt = t2t.encode_pairs(tok, test, MAX_SOURCE, MAX_TARGET)
    tin[:, 0] = start
    with eval_mode(model):
        loss, _ = model(src, tin, tgt)
    outs = greedy(model, src, start_id=start, eos_id=tok.token_to_id(EOS), max_new_tokens=MAX_TARGET)
    exact = t2t.score("summarize", [t2t.answer_text(tok, o) for o in outs], [e["target"] for e in test])
    return float(loss), exact


def run(budget: str = "quick", *, seed: int = 0, progress: bool = True) -> dict:
    """-> {"rows": [{"model", "objective", "pre-training loss", "test loss", "exact match"}], ...}."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    b = BUDGETS[budget]
    data = t2t.text_to_text(b["sizes"], seed=seed)
    tok = t2t.build_tokenizer(data, (MASK,))
    texts = pretraining_texts(data, "train")
    pairs = {s: data["summarize"][s] for s in ("train", "val", "test")}
    rows = []
    for name, kind, setting in _variants():
        model = _model(kind, tok, b, seed)
        start = tok.token_to_id(MASK if kind == "mass" else EOS)
        make = None
        if kind == "bart":
            make = lambda s, r, n=setting: denoising_batch(tok, texts, b["batch"], r, n)
        elif kind == "mass":
            make = lambda s, r, f=setting: mass_pretrain_batch(tok, texts, b["batch"], r, f)
        budget = Budget(b["pretrain"] if make else 0, b["finetune"], b["batch"])
        result = pretrain_then_finetune(model, make, _finetune_batches(tok, pairs, start, b["batch"]), budget,
                                        {**SETTINGS, "warmup": b["finetune"] // 10}, seed=seed, progress=progress)
        pre_loss = result.history[budget.pretrain_steps - 1]["loss"] if make else None
        loss, exact = evaluate(model, tok, pairs["test"], start)
        rows.append({"model": name, "objective": "MASS" if kind == "mass" else ("BART" if kind == "bart" else "-"),
                     "pre-training loss": pre_loss if pre_loss is not None else float("nan"),
                     "test loss": loss, "exact match": exact})
        if progress:
            print(f"{name}: test loss {loss:.3f} nats/token, exact match {exact:.3f}")
    n_targets = sum(int((t2t.encode_pairs(tok, [e], MAX_SOURCE, MAX_TARGET)[2] != IGNORE).sum())
                    for e in pairs["test"])
    return {"rows": rows, "budget": budget, "downstream": "summarize (toy compression)",
            "test pairs": len(pairs["test"]), "test target tokens": n_targets,
            "pretrain steps": b["pretrain"], "finetune steps": b["finetune"], "batch": b["batch"]}
