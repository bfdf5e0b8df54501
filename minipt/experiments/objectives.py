"""T5's study of unsupervised objectives at equal compute (Raffel et al. 2020, Sec. 3.3,
Tables 4-7), at toy scale, with the encoder-decoder (``models/seq2seq/transformer.py``).

Every variant pre-trains the same Transformer for the same number of steps and batch
size (T5's "equal compute" is the same number of pre-training steps) on the plain texts
of the text-to-text tasks' training inputs (``text_to_text.plain_text``), packed to
``piece`` tokens, then fine-tunes on the text-to-text mixture for the same number of
steps (``recipes/seq2seq``'s batches) on a fresh schedule and optimiser state, as the
no-pre-training row does (``experiments/protocol.py``), and is scored on held-out pairs
with greedy decoding (``recipes.seq2seq.evaluate``).

Variants (``objectives/t5_objectives.py`` and ``objectives/t5_span.py``):

- none: no pre-training (the baseline);
- prefix LM, BERT-style (15 %, the whole input reconstructed), deshuffling;
- i.i.d. masking with sentinels ("replace corrupted spans") at 10 / 15 / 25 / 50 %
  (T5's Table 6 varies the rate on this objective);
- span corruption at 15 % with mean span lengths 2 / 3 / 5 / 10 (Table 7).

Reported per variant: the mean score over the four tasks, each task's score, and the
mean target length per pre-training example in tokens (``</s>`` included): what the
decoder pays per step, the cost T5 points at (Sec. 3.3.2, 3.3.4).

Budgets: ``tiny`` (seconds, tests) and ``quick`` run every variant once; ``full`` runs
every variant with three seeds.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ..data import text_to_text as t2t
from ..models.registry import Preset
from ..models.seq2seq.transformer import Transformer, TransformerConfig
from ..objectives.spans import pack_pieces
from ..objectives.t5_objectives import (
    bert_style,
    deshuffling,
    iid_sentinel_masking,
    prefix_lm_pair,
)
from ..objectives.t5_span import span_corruption
from ..recipes.seq2seq import Seq2SeqHooks, _Batches, evaluate
from ..tokenizers.special import BOS, EOS, MASK, PAD, t5_sentinels
from ..train import train
from .protocol import Budget

N_SENTINELS = 24
SMALL = dict(n_encoder_layers=1, n_decoder_layers=1, n_head=2, d_model=16)
TOY = dict(n_encoder_layers=2, n_decoder_layers=2, n_head=4, d_model=64)
# piece: pre-training texts are packed to this many tokens (T5 packs its C4 texts too)
BUDGETS = {"tiny": dict(pretrain=2, finetune=2, sizes=(40, 4, 2), seeds=(0,), piece=40, model=SMALL),  # seconds
           "quick": dict(pretrain=200, finetune=250, sizes=(1000, 50, 50), seeds=(0,), piece=40, model=TOY),
           "full": dict(pretrain=600, finetune=600, sizes=(2000, 100, 200), seeds=(0, 1, 2), piece=40, model=TOY)}
BATCH = 32
MAX_SOURCE, MAX_TARGET = 44, 44      # BERT-style and deshuffling targets are the whole piece + </s>


def variants(tok) -> dict[str, object]:
    """name -> f(ids, rng) -> (input, target), or None for no pre-training."""
    sentinels = [tok.token_to_id(s) for s in t5_sentinels(N_SENTINELS)]
    specials = [tok.token_to_id(s) for s in (PAD, BOS, EOS, t2t.UNK, MASK, *t5_sentinels(N_SENTINELS))]
    out = {"none": None, "prefix LM": prefix_lm_pair,
           "BERT-style 15%": partial(bert_style, mask_id=tok.token_to_id(MASK), vocab_size=tok.vocab_size,
                                     special_ids=specials, rate=0.15),
           "deshuffling": deshuffling}
    for rate in (0.10, 0.15, 0.25, 0.50):
        out[f"i.i.d. sentinels {rate:.0%}"] = partial(iid_sentinel_masking, sentinel_ids=sentinels, rate=rate)
    for span in (2, 3, 5, 10):
        out[f"spans 15%, mean length {span}"] = partial(span_corruption, sentinel_ids=sentinels,
                                                        noise_density=0.15, mean_span=span)
    return out


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


def mean_target_length(objective, piece: int, tok, texts, rng: np.random.Generator, n: int = 400) -> float:
    """Mean tokens per target of ``objective`` (``</s>`` included) over ``n`` packed pieces."""
    return float(np.mean([len(objective(pack_pieces(texts, piece, rng, tok.encode), rng)[1]) + 1 for _ in range(n)]))


SETTINGS = dict(lr=2e-3, min_lr=2e-4, warmup=25, weight_decay=0.01, eval_every=0)   # each phase


def run(budget: str = "quick", *, seed: int = 0, progress: bool = True) -> dict:
    """-> {"rows": [{"objective", "mean score", <task scores>, "target length"}], ...}."""
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {sorted(BUDGETS)}, got {budget!r}")
    b = BUDGETS[budget]
    data = t2t.text_to_text(b["sizes"], seed=seed)
    tok = t2t.build_tokenizer(data, (MASK, *t5_sentinels(N_SENTINELS)))
    preset = Preset(model=dict(max_source_len=MAX_SOURCE, max_target_len=MAX_TARGET), batch_size=BATCH,
                    train={}, data=dict(limit=None, pretrain_steps=b["pretrain"]))
    test = [e for t in data.values() for e in t["test"]]
    rows = []
    for name, objective in variants(tok).items():
        hooks = Seq2SeqHooks(pretrain_batch=None if objective is None else partial(objective_batch, objective, b["piece"]))
        scores = []
        for s in b["seeds"]:
            model = Transformer(TransformerConfig(vocab_size=tok.vocab_size, pad_id=tok.token_to_id(PAD),
                                                  max_source_len=MAX_SOURCE, max_target_len=MAX_TARGET, prenorm=True,
                                                  **b["model"]),
                                rng=np.random.default_rng(100 + s))
            batches = _Batches(tok, data, preset, hooks, 0)
            budget = Budget(b["pretrain"] if objective is not None else 0, b["finetune"], BATCH)
            config = budget.train_config(**SETTINGS, seed=seed + s, progress=progress)
            train(model, batches, config, callback=batches.callback)
            scores.append(evaluate(model, tok, test, BOS, MAX_SOURCE)[0])
        row = {"objective": name, "mean score": float(np.mean([np.mean(list(sc.values())) for sc in scores]))}
        row.update({task: float(np.mean([sc[task] for sc in scores])) for task in data})
        row["target length"] = 0.0 if objective is None else \
            mean_target_length(objective, b["piece"], tok, batches.texts["train"], np.random.default_rng(seed))
        rows.append(row)
    return {"rows": rows, "budget": budget, "pretrain steps": b["pretrain"], "finetune steps": b["finetune"],
            "batch": BATCH, "seeds": len(b["seeds"]), "test pairs per task": b["sizes"][2],
            "piece tokens": b["piece"],
            "parameters": model.num_parameters()}
