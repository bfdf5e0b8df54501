"""minipt train t5: span-corruption batches (texts packed to 64 tokens, reconstruction,
sentinels numbered by position, too many spans for the sentinels), a short run that
pre-trains then fine-tunes on a fresh schedule and starts its decoder from the pad, and
an unknown task prefix at inference (answered, not scored)."""
import json

import numpy as np
import pytest

from minipt.cli import main
from minipt.data import text_to_text as t2t
from minipt.inference.seq2seq_decoding import greedy
from minipt.models import registry
from minipt.models.protocol import IGNORE
from minipt.models.registry import Preset
from minipt.recipes import seq2seq
from minipt.recipes.t5 import span_corruption_batch
from minipt.tokenizers.special import EOS, PAD, t5_sentinels

TINY = Preset(model=dict(n_layer=1, n_head=2, d_model=16, d_ff=32, num_buckets=8, max_distance=16,
                         max_source_len=64, max_target_len=24), batch_size=8,
              train=dict(steps=6, lr=1e-3, warmup=1, eval_every=3, eval_batches=1),
              data=dict(sizes=(40, 8, 10), pretrain_steps=3))


def _tok(n_sentinels=20):
    data = t2t.text_to_text((40, 8, 10), seed=0)
    texts = [t2t.plain_text(e["input"]) for t in data.values() for e in t["train"]]
    return t2t.build_tokenizer(data, t5_sentinels(n_sentinels)), texts


def _unpack(tok, src_row, tgt_row):
    """(source without padding, target without padding, the source with each sentinel
    replaced by its span, the sentinels' names in the source, in the target)."""
    pad, eos = tok.token_to_id(PAD), tok.token_to_id(EOS)
    s = [int(i) for i in src_row if i != pad]
    t = [int(i) for i in tgt_row if i != IGNORE]
    assert t[-1] == eos
    name = lambda i: tok.id_to_token(i)
    spans, cur = {}, None                                                 # target: sentinel, its span, ...
    for i in t[:-2]:
        if name(i).startswith("<extra_id_"):
            cur = i
            spans[cur] = []
        else:
            spans[cur].append(i)
    filled = [x for i in s for x in (spans[i] if i in spans else [i])]
    return s, t, filled, [name(i) for i in s if i in spans], [name(i) for i in t if name(i).startswith("<extra_id_")]


def test_span_corruption_batches_put_packed_texts_back_together():
    """Each source, its spans put back, is 64 tokens of whole texts joined (the last one
    cut); the decoder reads the target shifted right after the pad."""
    tok, texts = _tok()
    encoded = [tok.encode(x) for x in texts]
    src, tin, tgt = span_corruption_batch(tok, texts, 16, np.random.default_rng(0))
    for b in range(16):
        s, t, filled, _, _ = _unpack(tok, src[b], tgt[b])
        assert tin[b, 0] == tok.token_to_id(PAD)
        np.testing.assert_array_equal(tin[b, 1:len(t)], t[:-1])
        assert len(filled) == 64
        i = 0
        while i < 64:
            i += len(next(e for e in encoded if filled[i:i + len(e)] == e[:64 - i]))


def test_sentinels_are_numbered_by_span_position():
    """The k-th span from the left is <extra_id_k> in the source and in the target, which
    ends with <extra_id_n> (n spans). Sentinels taken in name order would put
    <extra_id_10> third, and sorted ids would not see it."""
    tok, texts = _tok()
    src, _, tgt = span_corruption_batch(tok, texts, 32, np.random.default_rng(1))
    for b in range(32):
        _, _, _, in_source, in_target = _unpack(tok, src[b], tgt[b])
        n = len(in_source)
        assert n == 3                                                      # 10 of 64 tokens, 3 spans
        assert in_source == t5_sentinels(n) and in_target == t5_sentinels(n + 1)


def test_too_many_spans_for_the_sentinels_is_refused():
    tok, texts = _tok(n_sentinels=1)
    with pytest.raises(ValueError, match="spans need .* sentinel ids, got 1"):
        span_corruption_batch(tok, texts, 8, np.random.default_rng(0), noise_density=0.5, mean_span=1.0)
    with pytest.raises(ValueError, match="at least one text"):
        span_corruption_batch(tok, [], 8, np.random.default_rng(0))


@pytest.mark.slow
def test_short_run_pretrains_then_fine_tunes(tmp_path, monkeypatch):
    monkeypatch.setitem(registry.get("t5").presets, "tiny", TINY)
    out = tmp_path / "t5"
    assert main(["train", "t5", "--preset", "tiny", "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["steps"] == 6 and set(report["test_scores"]) == set(t2t.TASKS)
    assert (report["pretrain_steps"], report["finetune_steps"]) == (3, 3)
    lrs = [json.loads(line)["lr"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert lrs[3] == lrs[0] == 1e-3 > lrs[2]                  # fine-tuning warms up again from its own start
    run = json.loads((out / "run.json").read_text())
    assert run["start_token"] == PAD
    model, tok, start, end = seq2seq.load_text_to_text(out)
    assert start == tok.token_to_id(PAD) == model.config.pad_id and "<extra_id_19>" in tok.special_tokens
    assert main(["train", "t5", "--preset", "tiny", "--out", str(out)]) == 2     # a second run is refused


def test_an_unknown_prefix_is_answered_not_scored():
    """Documented behaviour: no error at inference; the words are encoded (unseen ones as
    <unk>) and the model answers; scoring such a task is refused by name."""
    tok, _ = _tok()
    model = registry.get("t5").build(rng=np.random.default_rng(0), vocab_size=tok.vocab_size, d_model=16, d_ff=32,
                                     n_layer=1, n_head=2, max_target_len=6)
    prompt = "paraphrase: the old king sleeps ."
    assert t2t.task_of(prompt) is None
    src = t2t.encode_sources(tok, [prompt], 40)
    assert tok.token_to_id(t2t.UNK) in src                                # "paraphrase" is unseen
    out = greedy(model, src, start_id=tok.token_to_id(PAD), eos_id=tok.token_to_id(EOS))
    assert len(out) == 1 and len(out[0]) <= 6
    with pytest.raises(ValueError, match="no scorer for task 'paraphrase'"):
        t2t.score("paraphrase", ["x"], ["y"])


@pytest.mark.slow
def test_fine_tuning_schedule_equals_the_scratch_runs_with_steps_given(tmp_path, monkeypatch):
    """Equal fine-tuning budget: with --steps, the pre-trained run's fine-tuning phase gets
    the learning rates, step by step, of a run from scratch as long as that phase."""
    warm = Preset(model=TINY.model, batch_size=8, train={**TINY.train, "warmup": 10, "eval_every": 0},
                  data=dict(sizes=(40, 8, 10), pretrain_steps=30))
    monkeypatch.setitem(registry.get("t5").presets, "warm", warm)
    monkeypatch.setitem(registry.get("t5").presets, "warm-scratch",
                        Preset(model=warm.model, batch_size=8, train=warm.train, data={**warm.data, "pretrain_steps": 0}))
    lrs = {}
    for name, steps in (("warm", 50), ("warm-scratch", 20)):          # warm-up 2 in both, not 50 // 10
        assert main(["train", "t5", "--preset", name, "--steps", str(steps), "--out", str(tmp_path / name)]) == 0
        lrs[name] = [json.loads(line)["lr"] for line in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
    assert lrs["warm"][30:] == lrs["warm-scratch"] and lrs["warm"][30] > lrs["warm"][29]   # not the decayed tail
