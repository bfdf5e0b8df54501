"""UniLM's four masks in one network against the same network trained with the seq2seq
mask only, at equal steps (Dong et al. 2019, "Unified Language Model Pre-training for
Natural Language Understanding and Generation", Sec. 1 and 2.3: the one network is
"jointly optimized for different language modeling objectives", which makes its
representations "more general" and "mitigates overfitting to any single LM task", and it
serves understanding (a bidirectional encoder) and generation (seq2seq) alike).

One UniLM shape (BERT's encoder, 2 layers, d 64, the recipe's toy preset) is built three
times from the same initialisation:

- **UniLM**: pre-trained on toy sentence pairs (B about A's subject,
  ``recipes.unified.reply_pairs``) with a mode drawn per example from the paper's mix
  (1/3 bidirectional with NSP, 1/3 seq2seq, 1/6 left-to-right, 1/6 right-to-left), cloze
  on 15 % of the tokens;
- **seq2seq only**: the same pairs, steps and batch, every example under the seq2seq
  mask (cloze on 15 % of the target tokens, as UniLM's seq2seq rows);
- **no pre-training**: the initial weights (the generation floor).

Equal compute: the same pre-training steps at the same batch of the same pairs, so the
same examples and input tokens (``protocol.Budget``); the mix predicts more tokens per
example (15 % of all, not of the target only), as the paper's objectives do.

Understanding (the paper fine-tunes UniLM as a bidirectional encoder for it): a copy of
each arm is fine-tuned for the same steps on its own fresh schedule as a bidirectional
encoder (cloze under the bidirectional mask on the pre-training pairs), then scored by
held-out **cloze accuracy** (masked tokens anywhere in both sentences, each seeing both
sides); floor: always the commonest word of the pre-training pairs. The record also
keeps each arm's cloze in every mode right after pre-training (``..., no fine-tuning``:
the seq2seq-only network, which never predicted a source token, scores below the floor
under the bidirectional mask there). Generation: every arm is then fine-tuned for the same steps on its own fresh schedule (``protocol``) for the toy
translation (seq2seq mask, half of the target tokens masked, as ``recipes.unified``),
and its test sources are decoded greedily with the KV cache: **token accuracy** (the
share of each target's tokens right at their places; beside it exact match); floor:
the commonest target word at every place. Beside it, the model fine-tuned from its
initial weights for the same steps (``no pre-training``) shows what pre-training adds.
"""
from __future__ import annotations

import copy

import numpy as np

from ..core.module import eval_mode
from ..data.toy_text_tasks import translation
from ..models import registry
from ..objectives.common import IGNORE
from ..objectives.unified import UNILM_MODES, unilm_example
from ..recipes import unified as R
from ..train import train
from .protocol import Budget, pretrain_then_finetune

BUDGETS = {"tiny": dict(pairs=40, held=16, pretrain=3, finetune=3, understand=2, task_sizes=(40, 10, 10)),
           "quick": dict(pairs=4000, held=300, pretrain=400, finetune=300, understand=100,
                         task_sizes=(2000, 100, 200)),
           "full": dict(pairs=4000, held=400, pretrain=1000, finetune=500, understand=200,
                        task_sizes=(2000, 100, 400))}
ARMS = ("UniLM", "seq2seq only")
FLOOR = "no pre-training"                                  # fine-tuned from the initial weights
BATCH, MASK_PROB, FINETUNE_MASK_PROB = 32, 0.15, 0.5
SETTINGS = dict(lr=2e-3, min_lr=2e-4, weight_decay=0.01, grad_clip=1.0, eval_every=0)


def pretraining(pairs, arm: str):
    """``get_batch(split, rng)`` -> (ids, segments, mask, labels, nsp) of the arm's objective."""
    mode = None if arm == "UniLM" else "seq2seq"                        # None: the paper's mix
    return lambda split, rng: R.unilm_batch(pairs, rng, BATCH, MASK_PROB, mode)


def cloze_items(model, held, seed: int) -> dict[str, list[float]]:
    """{mode: 1.0 / 0.0 per masked held-out token}: every pair once, the same masks in
    every mode and for every model (the seed), no NSP swaps."""
    sp = dict(sos_id=R.tokenizer().token_to_id(R.SOS), eos_id=R.tokenizer().token_to_id(R.EOS),
              mask_id=R.tokenizer().token_to_id(R.MASK))
    out = {}
    with eval_mode(model):
        for mode in UNILM_MODES:
            rng = np.random.default_rng(seed)
            rows = [unilm_example(a, b, rng, **sp, vocab_size=R.tokenizer().vocab_size, special_ids=(0,),
                                  mask_prob=MASK_PROB, mode=mode) for a, b in held]
            ids, seg, mask, labels = R.pad_batch(rows, ("ids", "segments", "mask", "targets"))
            right = []
            for s in range(0, len(rows), 128):
                logits = model(ids[s:s + 128], seg[s:s + 128], mask[s:s + 128])[1]        # (b, N, V)
                keep = labels[s:s + 128] != IGNORE
                right += (logits.argmax(-1)[keep] == labels[s:s + 128][keep]).astype(float).tolist()
            out[mode] = right
    return out


def commonest_word(pairs, held, seed: int) -> float:
    """Cloze accuracy of always the commonest word of the pre-training pairs (bidirectional
    rows, the same masked tokens as ``cloze_items``)."""
    common = np.bincount(np.concatenate([np.concatenate(p) for p in pairs])).argmax()
    tok, rng = R.tokenizer(), np.random.default_rng(seed)
    sp = dict(sos_id=tok.token_to_id(R.SOS), eos_id=tok.token_to_id(R.EOS), mask_id=tok.token_to_id(R.MASK))
    labels = np.concatenate([unilm_example(a, b, rng, **sp, vocab_size=tok.vocab_size, special_ids=(0,),
                                           mask_prob=MASK_PROB, mode="bidirectional")["targets"] for a, b in held])
    return float((labels[labels != IGNORE] == common).mean())


def understand(model, pairs, held, steps: int, seed: int) -> list[float]:
    """A copy of ``model`` fine-tuned as a bidirectional encoder (cloze under the
    bidirectional mask on the pre-training pairs) for ``steps`` on a fresh schedule ->
    its held-out bidirectional cloze items; ``model`` itself is left as it was."""
    probe = copy.deepcopy(model)
    tune = lambda split, rng: R.unilm_batch(pairs, rng, BATCH, MASK_PROB, "bidirectional")[:4]
    pretrain_then_finetune(probe, None, tune, Budget(0, steps, BATCH), {**SETTINGS, "warmup": max(steps // 10, 1)},
                           seed=seed)
    return cloze_items(probe, held, seed + 1)["bidirectional"]


def commonest_target_word(task) -> float:
    """Token accuracy of answering every test target with the commonest word of the
    training targets at every place (the mean over test sentences, as ``decode``)."""
    common = np.bincount(np.concatenate([R.ids(e["target"]) for e in task.train])).argmax()
    return float(np.mean([np.mean(R.ids(e["target"]) == common) for e in task.test]))


def fine_tune(model, task, equal: Budget, seed: int, eval_every: int = 0):
    """Fine-tune ``model`` for the toy translation on a fresh schedule and optimiser (the
    seq2seq mask, half of the target tokens masked) -> the ``TrainResult``."""
    pairs = {split: [(R.ids(e["source"]), R.ids(e["target"])) for e in getattr(task, split)]
             for split in ("train", "val")}
    tune = lambda split, rng: R.unilm_batch(pairs[split], rng, BATCH, FINETUNE_MASK_PROB, "seq2seq")[:4]
    return pretrain_then_finetune(model, None, tune, equal.scratch(),           # the fine-tuning phase only
                                  {**SETTINGS, "warmup": max(equal.finetune_steps // 10, 1), "eval_every": eval_every},
                                  seed=seed)


def decode(model, test) -> dict[str, list[float]]:
    """Greedy KV-cached decoding of the test sources -> {"exact match", "token accuracy"}:
    one score per test sentence."""
    tok = R.tokenizer()
    sp = dict(sos_id=tok.token_to_id(R.SOS), eos_id=tok.token_to_id(R.EOS), mask_id=tok.token_to_id(R.MASK))
    exact, tokens = [], []
    for e in test:
        want, source = R.ids(e["target"]).tolist(), R.ids(e["source"])
        got = model.generate(source, **sp, max_len=min(len(want) + 4, model.block_size - len(source) - 3))
        exact.append(float(got == want))
        tokens.append(sum(g == w for g, w in zip(got, want)) / len(want))
    return {"exact match": exact, "token accuracy": tokens}


def run(budget: str = "quick", *, seed: int = 0, progress: bool = False) -> dict:
    """-> {"rows", "arms": {arm: {"cloze accuracy", "token accuracy", ...}},
    "floors": {"commonest word", "no pre-training", ...}, "items"}."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    b = BUDGETS[budget]
    entry = registry.get("unilm")
    pairs, held = R.reply_pairs(b["pairs"], seed), R.reply_pairs(b["held"], seed + 1000)
    task = translation(sizes=tuple(b["task_sizes"]), seed=seed)
    equal = Budget(b["pretrain"], b["finetune"], BATCH)                  # the same for both arms
    items: dict[str, dict[str, list[float]]] = {}
    for arm in (*ARMS, FLOOR):
        model = entry.build(rng=np.random.default_rng(seed), vocab_size=R.tokenizer().vocab_size,
                            **entry.presets["toy"].model)                # the same initialisation
        items[arm] = {}
        if arm != FLOOR:
            pre = Budget(equal.pretrain_steps, 0, BATCH)                  # its own schedule, fine-tuning's next
            train(model, pretraining(pairs, arm), pre.train_config(**SETTINGS, warmup=max(b["pretrain"] // 10, 1),
                                                                   seed=seed, progress=progress))
            items[arm] = {f"cloze accuracy {m}, no fine-tuning": v for m, v in cloze_items(model, held, seed + 1).items()}
        items[arm]["cloze accuracy"] = understand(model, pairs, held, b["understand"], seed)
        fine_tune(model, task, equal, seed)
        items[arm].update(decode(model, task.test))
    arms = {arm: {k: float(np.mean(v)) for k, v in items[arm].items()} for arm in ARMS}
    floors = {"commonest word": commonest_word(pairs, held, seed + 1),
              "commonest target word": commonest_target_word(task),
              f"{FLOOR}, cloze accuracy": float(np.mean(items[FLOOR]["cloze accuracy"])), FLOOR: float(np.mean(items[FLOOR]["token accuracy"])),
              f"{FLOOR}, exact match": float(np.mean(items[FLOOR]["exact match"]))}
    found = {**arms, FLOOR: {k: float(np.mean(v)) for k, v in items[FLOOR].items()},
             "commonest word (floor)": {"cloze accuracy": floors["commonest word"]},
             "commonest target word (floor)": {"token accuracy": floors["commonest target word"]}}
    rows = [{"arm": k, **{m: v.get(m, float("nan")) for m in arms[ARMS[0]]}} for k, v in found.items()]
    return {"rows": rows, "arms": arms, "floors": floors, "items": {arm: items[arm] for arm in ARMS},
            "pretrain steps": b["pretrain"], "finetune steps": b["finetune"], "batch": BATCH,
            "test sentences": len(task.test), "held-out pairs": len(held)}
