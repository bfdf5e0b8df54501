"""Which corruption teaches an encoder-decoder most? BART's noises and MASS's fragment
lengths, compared on one downstream task at equal compute.

BART (Lewis et al. 2020, Sec. 4 and Table 1) pre-trains one model per noise and fine-
tunes each on the same tasks: text infilling is the strongest single noise. MASS (Song
et al. 2019, Sec. 4.4, Fig. 3) varies the fragment length k from 1 (BERT-like) to m
(GPT-like) and finds the middle (k = m/2) best. Here, at toy scale, on the texts of the
toy language (``recipes/bart_mass.py``: the toy tasks' training inputs, 1-3 sentences):

1. one BART per noise of ``NOISES`` (token masking, token deletion, text infilling;
   sentence permutation and document rotation are left out: the toy texts' sentences
   are drawn independently, so their order holds nothing to learn) and one MASS per
   fragment length of ``MASS_K`` pre-train on the same texts; a ``no pre-training`` arm
   starts fine-tuning from the same initial weights (the floor: pre-training that does
   not beat it taught nothing);
2. each model is fine-tuned on the toy summarisation task (``summarize: <2-3
   sentences>`` -> the sentences without adjectives and place phrases,
   ``data/toy_text_tasks.compression``) from a few pairs (``pairs``, few beside the
   thousands of pre-training texts: the regime in which pre-training can help), every
   model with the same pairs, batch size, steps and learning rate, on a fresh schedule
   and optimiser state (``experiments/protocol.py``), from the same initial weights;
3. scored on held-out pairs: the teacher-forced test loss (each test pair's nats per
   target token, averaged over pairs; ``items`` keeps the per-pair values) and the exact
   match of greedy outputs.

**Equal compute** (``protocol.py``): every pre-trained arm reads the same number of
pre-training texts (steps x batch). Between BART's noises the decoder rebuilds the same
whole text, so each step costs the same up to the encoder's shorter input under
deletion; between MASS's fragment lengths both sides hold all m positions, so each step
costs the same and only the number of predicted tokens differs (k per text), as in the
paper. The two families are not compared with each other.
"""
from __future__ import annotations

import numpy as np

from ..core.module import eval_mode
from ..data import text_to_text as t2t
from ..inference.seq2seq_decoding import greedy
from ..models.protocol import IGNORE
from ..models.seq2seq.bart import Bart, BartConfig
from ..models.seq2seq.mass import MASS, MASSConfig
from ..recipes.bart_mass import denoising_batch, mass_pretrain_batch, pretraining_texts
from ..tokenizers.special import EOS, MASK, PAD
from .protocol import Budget, pretrain_then_finetune

NOISES = ("masking", "deletion", "infilling")                           # BART arms, named as the noises
MASS_K = {"MASS k = 1": 0.0, "MASS k = m/2": 0.5, "MASS k = m": 1.0}     # fragment share of each text
SCRATCH = "no pre-training"
BUDGETS = {"tiny": dict(pretrain=3, finetune=3, sizes=(40, 10, 10), pairs=20, d_model=16),        # for tests
           "quick": dict(pretrain=300, finetune=150, sizes=(1000, 10, 100), pairs=100, d_model=32),
           "full": dict(pretrain=800, finetune=300, sizes=(2000, 10, 300), pairs=100, d_model=48)}
BATCH = 16
MAX_SOURCE, MAX_TARGET = 48, 24
SETTINGS = dict(lr=2e-3, min_lr=2e-4, weight_decay=0.01, eval_every=0)   # each phase, on its own schedule


def arm_names() -> list[str]:
    """Every arm in the order run: BART's noises, MASS's fragment lengths, no pre-training."""
    return [*NOISES, *MASS_K, SCRATCH]


def _model(kind: str, tok, d_model: int, seed: int):
    common = dict(vocab_size=tok.vocab_size, max_positions=MAX_SOURCE, encoder_layers=2, decoder_layers=2, n_head=4,
                  d_model=d_model, dropout=0.1, pad_id=tok.token_to_id(PAD), eos_id=tok.token_to_id(EOS))
    rng = np.random.default_rng(seed)                                       # the same initial weights per arm
    if kind == "mass":
        return MASS(MASSConfig(**common, mask_id=tok.token_to_id(MASK)), rng=rng)
    return Bart(BartConfig(**common, decoder_start_id=tok.token_to_id(EOS)), rng=rng)


def _finetune_batches(tok, pairs: list[dict], start: int):
    def get(split, rng):
        chosen = [pairs[i] for i in rng.integers(0, len(pairs), BATCH)]
        src, tin, tgt = t2t.encode_pairs(tok, chosen, MAX_SOURCE, MAX_TARGET)
        tin[:, 0] = start
        return src, tin, tgt
    return get


def pair_losses(model, src: np.ndarray, target_in: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Teacher-forced nats per target token of each pair: (B,) from src (B, S), target_in
    and targets (B, T) (IGNORE off the target)."""
    with eval_mode(model):
        _, logits = model(src, target_in)                                   # (B, T, V)
    z = logits.astype(np.float64)
    logp = z - z.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))                     # (B, T, V) log-softmax
    real = targets != IGNORE                                                # (B, T)
    picked = np.take_along_axis(logp, np.where(real, targets, 0)[..., None], -1)[..., 0]   # (B, T)
    return -(picked * real).sum(1) / real.sum(1)


def evaluate(model, tok, test: list[dict], start: int) -> dict[str, np.ndarray]:
    """Per test pair: {"test loss": nats per target token, "exact match": 1.0 or 0.0}."""
    src, tin, tgt = t2t.encode_pairs(tok, test, MAX_SOURCE, MAX_TARGET)
    tin[:, 0] = start
    outs = greedy(model, src, start_id=start, eos_id=tok.token_to_id(EOS), max_new_tokens=MAX_TARGET)
    exact = [t2t.score("summarize", [t2t.answer_text(tok, o)], [e["target"]]) for o, e in zip(outs, test)]
    return {"test loss": pair_losses(model, src, tin, tgt), "exact match": np.array(exact)}


def _pretraining(kind: str, setting, tok, texts: list[str]):
    if kind == "bart":
        return lambda split, rng: denoising_batch(tok, texts, BATCH, rng, setting)
    if kind == "mass":
        return lambda split, rng: mass_pretrain_batch(tok, texts, BATCH, rng, setting)
    return None


def run(budget: str = "quick", *, seed: int = 0, progress: bool = True) -> dict:
    """-> {"rows": [{"arm", "objective", "pre-training loss", "test loss", "exact match"}],
    "arms": {arm: {"test loss", "exact match"}}, "floors": {"no pre-training"}, "items", ...}."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    b = BUDGETS[budget]
    data = t2t.text_to_text(b["sizes"], seed=seed)
    tok = t2t.build_tokenizer(data, (MASK,))
    texts = pretraining_texts(data, "train")
    finetune, test = data["summarize"]["train"][:b["pairs"]], data["summarize"]["test"]
    kinds = [("bart", n) for n in NOISES] + [("mass", f) for f in MASS_K.values()] + [("none", None)]
    rows, arms, items, curves = [], {}, {}, {}
    for name, (kind, setting) in zip(arm_names(), kinds):
        model = _model(kind, tok, b["d_model"], seed)
        start = tok.token_to_id(MASK if kind == "mass" else EOS)
        make = _pretraining(kind, setting, tok, texts)
        steps = Budget(b["pretrain"] if make else 0, b["finetune"], BATCH)
        result = pretrain_then_finetune(model, make, _finetune_batches(tok, finetune, start), steps,
                                        {**SETTINGS, "warmup": b["finetune"] // 10}, seed=seed, progress=progress)
        curves[name] = [float(h["loss"]) for h in result.history]
        items[name] = {k: v.tolist() for k, v in evaluate(model, tok, test, start).items()}
        arms[name] = {k: float(np.mean(v)) for k, v in items[name].items()}
        pre = curves[name][steps.pretrain_steps - 1] if make else float("nan")
        rows.append({"arm": name, "objective": kind.upper() if make else "-", "pre-training loss": pre, **arms[name]})
        if progress:
            print(f"{name}: test loss {arms[name]['test loss']:.3f} nats/token, "
                  f"exact match {arms[name]['exact match']:.3f}")
    return {"rows": rows, "arms": arms, "floors": {SCRATCH: arms[SCRATCH]["test loss"]}, "items": items,
            "curves": curves, "downstream": "summarize (toy compression)", "fine-tuning pairs": len(finetune),
            "pre-training texts": len(texts), "test pairs": len(test), "pretrain steps": b["pretrain"],
            "finetune steps": b["finetune"], "batch": BATCH,
            "equal compute": f"{b['pretrain'] * BATCH} pre-training texts per arm ({b['pretrain']} steps x {BATCH})"}
