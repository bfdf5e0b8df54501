"""T5's study of unsupervised objectives at equal compute (Raffel et al. 2020, Sec. 3.3,
Tables 4-7), at toy scale, with the encoder-decoder (``models/seq2seq/transformer.py``).

Every pre-training arm trains the same Transformer (same initialisation) for the same
number of steps and batch size on the plain texts of the text-to-text tasks' training
inputs (``text_to_text.plain_text``), packed to ``piece`` tokens: T5's "equal compute"
(``experiments/protocol.py``). Then every arm, the one without pre-training included,
fine-tunes on the text-to-text mixture for the same steps on its own fresh schedule and
optimiser state, and is scored on held-out pairs with greedy decoding
(``recipes.seq2seq.evaluate``).

Arms (``objectives/t5_objectives.py``, ``objectives/t5_span.py``):

- **no pre-training**: the same fine-tuning from the random initialisation;
- **prefix LM**, **BERT-style** (15 %, the whole piece reconstructed): Table 4;
- **i.i.d. 15 %**: each token noise with probability 0.15, each run of noise one
  sentinel ("replace corrupted spans", Table 5);
- **spans, mean 3**: span corruption, 15 % noise in spans of mean length 3 (Table 7).

Metrics per arm: ``score``, the mean over the four tasks of the held-out score
(``items``: one 0/1 per test pair, the tasks' equal-sized test splits together, so
their mean is the score); and ``target length``, the mean tokens per pre-training
target (``</s>`` included), what the decoder pays per example (Sec. 3.3.2, 3.3.4),
counted on the same ``LENGTH_PIECES`` packed pieces for every objective (paired items).
Floors: ``commonest answer`` (each task's commonest training answer given to every test
input, ``recipes.seq2seq.majority_scores``, averaged over the tasks) and ``whole
piece`` (the target length of reconstructing the whole piece: ``piece`` + 1).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ..data import text_to_text as t2t
from ..models.registry import Preset
from ..models.seq2seq.transformer import Transformer, TransformerConfig
from ..objectives.spans import pack_pieces
from ..objectives.t5_objectives import bert_style, iid_sentinel_masking, prefix_lm_pair
from ..objectives.t5_span import span_corruption
from ..recipes.seq2seq import Seq2SeqHooks, _Batches, evaluate, majority_scores
from ..tokenizers.special import BOS, EOS, MASK, PAD, t5_sentinels
from ..train import train
from .protocol import Budget

N_SENTINELS = 24
SMALL = dict(n_encoder_layers=1, n_decoder_layers=1, n_head=2, d_model=16)
TOY = dict(n_encoder_layers=2, n_decoder_layers=2, n_head=4, d_model=64)
# piece: pre-training texts are packed to this many tokens (T5 packs its C4 texts too)
BUDGETS = {"tiny": dict(pretrain=2, finetune=2, sizes=(40, 4, 2), piece=40, model=SMALL),       # seconds
           "quick": dict(pretrain=200, finetune=400, sizes=(2000, 100, 100), piece=40, model=TOY),
           "full": dict(pretrain=400, finetune=1000, sizes=(2000, 100, 200), piece=40, model=TOY)}
BATCH, LENGTH_PIECES = 32, 400
MAX_SOURCE, MAX_TARGET = 44, 44      # BERT-style targets are the whole piece + </s>
# each phase: its own warm-up and cosine decay (protocol.Budget), gradients clipped at norm 1
ARMS = ("no pre-training", "prefix LM", "BERT-style", "i.i.d. 15 %", "spans, mean 3")
SETTINGS = dict(lr=2e-3, min_lr=2e-4, warmup=60, weight_decay=0.01, grad_clip=1.0, eval_every=0)


def variants(tok) -> dict[str, object]:
    """arm -> f(ids, rng) -> (input, target), or None for no pre-training."""
    sentinels = [tok.token_to_id(s) for s in t5_sentinels(N_SENTINELS)]
    specials = [tok.token_to_id(s) for s in (PAD, BOS, EOS, t2t.UNK, MASK, *t5_sentinels(N_SENTINELS))]
    return dict(zip(ARMS, (None, prefix_lm_pair,
                            partial(bert_style, mask_id=tok.token_to_id(MASK), vocab_size=tok.vocab_size,
                                    special_ids=specials, rate=0.15),
                            partial(iid_sentinel_masking, sentinel_ids=sentinels, rate=0.15),
                            partial(span_corruption, sentinel_ids=sentinels, noise_density=0.15, mean_span=3.0))))


def objective_batch(objective, piece: int, tok, texts, batch_size: int, rng: np.random.Generator):
    """``batch_size`` packed pieces (``spans.pack_pieces``) -> (source (B, S), target_in (B, T),
    targets (B, T)): source = the objective's input, targets = its target + ``</s>``,
    target_in = ``<s>`` + the target; padded with PAD (IGNORE in targets)."""
    pairs = [objective(pack_pieces(texts, piece, rng, tok.encode), rng) for _ in range(batch_size)]
    eos, bos, pad = tok.token_to_id(EOS), tok.token_to_id(BOS), tok.token_to_id(PAD)
    S, T = max(len(x) for x, _ in pairs), max(len(y) for _, y in pairs) + 1
    if S > MAX_SOURCE or T > MAX_TARGET:
        raise ValueError(f"an objective's pair is too long: input {S} (max {MAX_SOURCE}), target {T} (max {MAX_TARGET})")
    source = np.full((batch_size, S), pad, dtype=np.int64)                     # (B, S)
    target_in = np.full((batch_size, T), pad, dtype=np.int64)                  # (B, T)
    targets = np.full((batch_size, T), -100, dtype=np.int64)                   # (B, T)
    for b, (x, y) in enumerate(pairs):
        source[b, :len(x)] = x
        target_in[b, :len(y) + 1] = [bos, *y]
        targets[b, :len(y) + 1] = [*y, eos]
    return source, target_in, targets


def target_lengths(objective, pieces: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """Tokens per target of ``objective`` (``</s>`` included), one per piece (n,)."""
    return np.array([len(objective(p, rng)[1]) + 1 for p in pieces], dtype=np.float64)


def test_items(model, tok, test: list[dict]) -> np.ndarray:
    """One 0/1 exact-match score per test pair (greedy answers), in the order of ``test``."""
    _, answers = evaluate(model, tok, test, BOS, MAX_SOURCE)
    seen: dict[str, int] = {}
    out = []
    for e in test:
        k = seen[e["task"]] = seen.get(e["task"], -1) + 1
        out.append(t2t.score(e["task"], [answers[e["task"]][k]], [e["target"]]))
    return np.array(out)


def check_only(only, names=ARMS) -> None:
    """``only``: None (every arm) or some of ``names``; each arm's run depends only on the
    seed, so arms run apart (one process each) give the figures of one run."""
    unknown = [a for a in (only or ()) if a not in names]
    if unknown or (only is not None and not only):
        raise ValueError(f"unknown arm(s) {unknown or '(none given)'}; choose from {', '.join(names)}")


def run(budget: str = "quick", *, seed: int = 0, progress: bool = True, only=None) -> dict:
    """-> {"rows", "arms": {arm: {"score", "target length", <task scores>}}, "floors":
    {"commonest answer", "whole piece"}, "items": {arm: {"score", "target length"}}, ...}."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    check_only(only)
    b = BUDGETS[budget]
    data = t2t.text_to_text(b["sizes"], seed=seed)
    tok = t2t.build_tokenizer(data, (MASK, *t5_sentinels(N_SENTINELS)))
    preset = Preset(model=dict(max_source_len=MAX_SOURCE, max_target_len=MAX_TARGET), batch_size=BATCH,
                    train={}, data=dict(limit=None, pretrain_steps=b["pretrain"]))
    test = [e for t in data.values() for e in t["test"]]
    texts = [t2t.plain_text(e["input"]) for t in data.values() for e in t["train"]]
    rng = np.random.default_rng(seed)
    pieces = [pack_pieces(texts, b["piece"], rng, tok.encode) for _ in range(LENGTH_PIECES)]
    arms, items = {}, {}
    for name, objective in variants(tok).items():
        if only is not None and name not in only:
            continue
        hooks = Seq2SeqHooks(pretrain_batch=None if objective is None else partial(objective_batch, objective, b["piece"]))
        model = Transformer(TransformerConfig(vocab_size=tok.vocab_size, pad_id=tok.token_to_id(PAD),
                                              max_source_len=MAX_SOURCE, max_target_len=MAX_TARGET, prenorm=True,
                                              **b["model"]), rng=np.random.default_rng(100 + seed))
        batches = _Batches(tok, data, preset, hooks, 0)
        phases = Budget(b["pretrain"], b["finetune"], BATCH)
        config = (phases if objective is not None else phases.scratch()).train_config(**SETTINGS, seed=seed,
                                                                                      progress=progress)
        train(model, batches, config, callback=batches.callback)
        scores = test_items(model, tok, test)
        lengths = np.zeros(len(pieces)) if objective is None else \
            target_lengths(objective, pieces, np.random.default_rng(seed + 1))
        items[name] = {"score": scores.tolist(), "target length": lengths.tolist()}
        arms[name] = {"score": float(scores.mean()), "target length": float(lengths.mean()),
                      **{task: float(np.mean([s for s, e in zip(scores, test) if e["task"] == task])) for task in data}}
    floors = {"commonest answer": float(np.mean(list(majority_scores(data).values()))),
              "whole piece": float(b["piece"] + 1)}
    rows = [{"objective": k, "mean score": v["score"], **{t: v[t] for t in data}, "target length": v["target length"]}
            for k, v in arms.items()]
    return {"rows": rows, "arms": arms, "floors": floors, "items": items, "budget": budget,
            "pretrain steps": b["pretrain"], "finetune steps": b["finetune"], "batch": BATCH,
            "test pairs per task": b["sizes"][2], "piece tokens": b["piece"], "parameters": model.num_parameters()}
