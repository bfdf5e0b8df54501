"""The recipe behind ``minipt train t5`` (Raffel et al. 2020): span-corruption
pre-training with sentinels on the toy language (Sec. 3.1.4; ``objectives/t5_span.py``),
then multi-task text-to-text fine-tuning on the mixture of ``data/text_to_text.py``
(``translate toy:``, ``summarize:``, ``sentiment:``, ``similarity sentence1: ...``), all
through the shared encoder-decoder recipe (``recipes/seq2seq.py``) with T5's hooks:

- the decoder starts from the pad token (T5's ``decoder_start_token_id``);
- the tokenizer reserves ``N_SENTINELS`` sentinels ``<extra_id_0>`` ...;
- for the first ``data["pretrain_steps"]`` steps a batch is span corruption of the
  training inputs' texts (prefixes removed), packed into pieces of ``PIECE`` (64)
  tokens as T5 packs its texts (``objectives/spans.pack_pieces``): 10 noise tokens
  (15 %) in 3 spans of mean length 3.3, placed at random, each span replaced by one
  sentinel in the source, <extra_id_0> first; the target lists each sentinel and its
  span, a final sentinel, then ``</s>``. (Unpacked, a toy text of 6-12 tokens held one
  span of 1-2 tokens.)
- the mixture then runs on a fresh warm-up + cosine schedule with a fresh optimiser
  state (``experiments/protocol.py``): the pre-trained run and ``toy-scratch`` fine-tune
  for the same steps on the same schedule.

Presets: ``toy`` pre-trains 500 steps then fine-tunes 1500; ``toy-scratch`` fine-tunes
the same 1500 steps from a random init (the "no pre-training" baseline). Each reports
held-out greedy scores per task (exact match; accuracy for sentiment).

Measured (seeds 0 and 1, 200 test pairs per task, on 2 shared cores): translate 0.915 /
0.900 pre-trained against 0.955 / 0.960 from scratch, summarize 0.240 / 0.445 against
0.315 / 0.500, sentiment 1.000 everywhere, similarity 0.625 / 0.605 against 0.595 /
0.615 (the commonest answers score 0.000, 0.000, 0.545 and 0.420 / 0.440). At equal
fine-tuning budget pre-training still does not help here, and costs about 0.05 on
translate in both seeds: it speeds the start of fine-tuning (mixture loss 1.95 against
2.44 over fine-tuning steps 50-100, seed 0) but the arms meet by step 250 and scratch
ends lower (0.119 against 0.137). The pre-training texts are the tasks' own inputs, so
span corruption teaches nothing the mixture does not, and it never shows the toy
language that translation writes. Summaries are T5's weak task
here (the Transformer of ``minipt train transformer`` gets 0.995). A likely reason, not
tested by an ablation here: T5 has no absolute positions and its cross-attention no
position bias, so copying a long source with deletions must align by content, and the toy sentences repeat their words ("the cat
sleeps . the queen reigns ."): the model writes the right short sentences, not always in
the source's order, or with subjects swapped.

An unknown task prefix at inference is not an error: the model answers (see
``data/text_to_text.py``); there is no reference to score it against.
"""
from __future__ import annotations

import numpy as np

from ..models.protocol import IGNORE
from ..models.registry import Preset
from ..objectives.spans import pack_pieces
from ..objectives.t5_span import span_corruption
from ..tokenizers.special import EOS, PAD, t5_sentinels
from .seq2seq import Seq2SeqHooks, make_recipe

N_SENTINELS = 20
PIECE = 64                  # tokens per pre-training input: 10 of noise in 3 spans (the task inputs: 6-40)
MODEL = dict(n_layer=2, n_head=4, d_model=64, d_ff=256, num_buckets=16, max_distance=32, max_source_len=PIECE,
             max_target_len=24)
TRAIN = dict(lr=2e-3, min_lr=2e-4, warmup=100, weight_decay=0.01, eval_every=250, eval_batches=4, grad_clip=1.0)
SIZES = (2000, 100, 200)


def span_corruption_batch(tok, texts: list[str], batch_size: int, rng: np.random.Generator, *,
                          noise_density: float = 0.15, mean_span: float = 3.0, piece: int = PIECE,
                          max_target_len: int | None = None):
    """``batch_size`` pieces of ``piece`` tokens packed from random ``texts``
    (``spans.pack_pieces``), span-corrupted -> (source (B, S) padded with PAD, target_in
    (B, T) = PAD y_1 .. y_n, targets (B, T) = y_1 .. y_n </s>, IGNORE at padding). The
    k-th span from the left is <extra_id_k>. Too many spans for the tokenizer's sentinels:
    ValueError (from ``span_corruption``)."""
    if not texts:
        raise ValueError("span corruption needs at least one text")
    pad, eos = tok.token_to_id(PAD), tok.token_to_id(EOS)
    n = sum(s.startswith("<extra_id_") for s in tok.special_tokens)
    sentinels = [tok.token_to_id(s) for s in t5_sentinels(n)]               # by number: <extra_id_k> is k-th
    src, tgt = [], []
    for _ in range(batch_size):
        s, t = span_corruption(pack_pieces(texts, piece, rng, tok.encode), rng, sentinels, noise_density, mean_span)
        if max_target_len is not None and len(t) + 1 > max_target_len:
            raise ValueError(f"span-corruption target of {len(t) + 1} tokens exceeds max_target_len {max_target_len}")
        src.append(s)
        tgt.append(list(t) + [eos])
    S, T = max(map(len, src)), max(map(len, tgt))
    source = np.full((batch_size, S), pad, dtype=np.int64)
    target_in = np.full((batch_size, T), pad, dtype=np.int64)
    targets = np.full((batch_size, T), IGNORE, dtype=np.int64)
    for b, (s, t) in enumerate(zip(src, tgt)):
        source[b, :len(s)] = s
        targets[b, :len(t)] = t
        target_in[b, 1:len(t)] = t[:-1]                                   # target_in[:, 0] = PAD, the start
    return source, target_in, targets


def _pretrain(tok, texts, batch_size, rng):
    return span_corruption_batch(tok, texts, batch_size, rng, max_target_len=MODEL["max_target_len"])


HOOKS = Seq2SeqHooks(start_token=PAD, extra_specials=tuple(t5_sentinels(N_SENTINELS)), pretrain_batch=_pretrain)
train_t5 = make_recipe(HOOKS)

PRESETS = {
    "toy": Preset(model=MODEL, batch_size=32, train=dict(steps=2000, **TRAIN),
                  data=dict(sizes=SIZES, limit=None, pretrain_steps=500),
                  expected="500 span-corruption steps on 64-token pieces, then 1500 on the mixture on a fresh "
                           "schedule: held-out greedy answers translate exact match 0.915, summarize 0.240, "
                           "sentiment accuracy 1.000, similarity exact match 0.625 (commonest answer 0.000, 0.000, "
                           "0.545, 0.420); without pre-training (toy-scratch) 0.955, 0.315, 1.000, 0.595; 837 s on "
                           "2 cores shared with other jobs (load 9-14)"),
    "toy-scratch": Preset(model=MODEL, batch_size=32, train=dict(steps=1500, **TRAIN),
                          data=dict(sizes=SIZES, limit=None, pretrain_steps=0),
                          expected="1500 steps on the mixture from a random init: held-out greedy answers translate "
                                   "exact match 0.955, summarize 0.315, sentiment accuracy 1.000, similarity exact "
                                   "match 0.595 (commonest answer 0.000, 0.000, 0.545, 0.420); 507 s on 2 cores "
                                   "shared with other jobs (load 9-14)"),
}
