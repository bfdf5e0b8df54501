"""minipt train t5: span-corruption batches (sentinels, reconstruction, too many spans for
the sentinels), a short run that pre-trains then fine-tunes and starts its decoder from
the pad, and an unknown task prefix at inference (answered, not scored)."""
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
                         max_source_len=40, max_target_len=24), batch_size=8,
              train=dict(steps=6, lr=1e-3, warmup=1, eval_every=3, eval_batches=1),
              data=dict(sizes=(40, 8, 10), pretrain_steps=3))


def _tok(n_sentinels=20):
    data = t2t.text_to_text((40, 8, 10), seed=0)
    texts = [t2t.plain_text(e["input"]) for t in data.values() for e in t["train"]]
    return t2t.build_tokenizer(data, t5_sentinels(n_sentinels)), texts


def test_span_corruption_batches_put_the_text_back_together():
    tok, texts = _tok()
    rng = np.random.default_rng(0)
    src, tin, tgt = span_corruption_batch(tok, texts, 16, rng)
    pad, eos = tok.token_to_id(PAD), tok.token_to_id(EOS)
    sentinel = {tok.token_to_id(s): s for s in t5_sentinels(20)}
    rng = np.random.default_rng(0)                                        # the same draws, by hand
    for b, k in enumerate(rng.integers(len(texts), size=16)):
        original = tok.encode(texts[int(k)])
        s = [int(i) for i in src[b] if i != pad]
        t = [int(i) for i in tgt[b] if i != IGNORE]
        assert t[-1] == eos and t[-2] in sentinel and tin[b, 0] == pad
        np.testing.assert_array_equal(tin[b, 1:len(t)], t[:-1])
        spans, cur = {}, None                                             # target: sentinel, its span, ...
        for i in t[:-2]:
            if i in sentinel:
                cur = i
                spans[cur] = []
            else:
                spans[cur].append(i)
        filled = [x for i in s for x in (spans[i] if i in sentinel else [i])]
        assert filled == list(original)
        used = [i for i in s if i in sentinel]
        assert used == sorted(used) and len(used) >= 1                    # <extra_id_0>, <extra_id_1>, ...


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
