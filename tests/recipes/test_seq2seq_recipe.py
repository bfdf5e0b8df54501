"""minipt train transformer: a short run on the text-to-text mixture writes its run files
and reports per-task scores of greedy answers to held-out pairs; the run-folder rules
(second run refused, --overwrite, Ctrl-C then --resume equal to an uninterrupted run);
the pre-training hook T5, BART and MASS use runs first, then the mixture."""
import json
import os
import shlex
import signal

import numpy as np
import pytest

from minipt.cli import main
from minipt.data import text_to_text as t2t
from minipt.models import registry
from minipt.models.registry import Preset
from minipt.recipes import seq2seq

TINY = Preset(model=dict(n_encoder_layers=1, n_decoder_layers=1, n_head=2, d_model=16, max_source_len=40,
                         max_target_len=24), batch_size=8,
              train=dict(steps=6, lr=1e-3, warmup=1, eval_every=3, eval_batches=1),
              data=dict(sizes=(40, 8, 10), pretrain_steps=0))


@pytest.fixture
def tiny_preset(monkeypatch):
    monkeypatch.setitem(registry.get("transformer").presets, "tiny", TINY)


@pytest.mark.slow
def test_short_run_reports_per_task_scores_and_holds_its_folder(tmp_path, capsys, tiny_preset):
    out = tmp_path / "tr"
    assert main(["train", "transformer", "--preset", "tiny", "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["steps"] == 6 and set(report["test_scores"]) == set(t2t.TASKS)
    assert all(0.0 <= s <= 1.0 for s in report["test_scores"].values())
    printed = capsys.readouterr().out
    assert "held-out greedy answers: translate exact match" in printed and "sentiment accuracy" in printed
    assert json.loads((out / "run.json").read_text())["start_token"] == "<s>"
    for f in seq2seq.RUN_FILES:
        assert (out / f).exists(), f
    tok = (out / "tokenizer.json").read_bytes()
    assert main(["train", "transformer", "--preset", "tiny", "--out", str(out)]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert (out / "tokenizer.json").read_bytes() == tok
    assert main(["train", "transformer", "--preset", "tiny", "--out", str(out), "--overwrite", "--seed", "1"]) == 0
    assert json.loads((out / "run.json").read_text())["seed"] == 1


def test_the_held_out_scores_are_the_greedy_answers_scored(tmp_path, tiny_preset):
    out = tmp_path / "tr"
    report = seq2seq.train_seq2seq(registry.get("transformer"), "tiny", out_dir=str(out), progress=False)
    model, tok, start, end = seq2seq.load_text_to_text(out)
    data = t2t.text_to_text(TINY.data["sizes"], seed=0)
    from minipt.inference.seq2seq_decoding import greedy
    for task, d in data.items():
        src, _, _ = t2t.encode_pairs(tok, d["test"], 40, 24)
        preds = [t2t.answer_text(tok, o) for o in greedy(model, src, start_id=start, eos_id=end)]
        assert report["test_scores"][task] == t2t.score(task, preds, [e["target"] for e in d["test"]])
        assert report["test_examples"][task] == {"input": d["test"][0]["input"], "target": d["test"][0]["target"],
                                                 "answer": preds[0]}


@pytest.mark.slow
def test_ctrl_c_then_resume_matches_an_uninterrupted_run(tmp_path, monkeypatch, capsys, tiny_preset):
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert main(["train", "transformer", "--preset", "tiny", "--out", str(whole)]) == 0
    real = seq2seq.train

    def interrupted(*args, **kw):
        keep = kw["callback"]

        def ctrl_c(step, record):
            keep(step, record)
            if step == 4:
                os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **{**kw, "callback": ctrl_c})
    monkeypatch.setattr(seq2seq, "train", interrupted)
    assert main(["train", "transformer", "--preset", "tiny", "--out", str(part)]) == 130
    command = capsys.readouterr().out.split("continue with `")[1].split("`")[0]
    monkeypatch.setattr(seq2seq, "train", real)
    assert main(["train", "transformer", "--out", str(part), "--resume", "--seed", "3"]) == 2
    assert "has seed 0, not 3" in capsys.readouterr().err
    assert main(shlex.split(command)[1:]) == 0
    a, b = (json.loads((d / "report.json").read_text()) for d in (whole, part))
    assert a["train_loss"] == b["train_loss"] and a["test_scores"] == b["test_scores"]


def test_pretraining_hook_runs_first_then_the_mixture(tmp_path, monkeypatch):
    calls = []

    def copy_text(tok, texts, batch_size, rng):           # a stand-in objective: reconstruct the text
        calls.append(len(texts))
        picked = [texts[int(i)] for i in rng.integers(len(texts), size=batch_size)]
        return t2t.encode_pairs(tok, [{"input": t, "target": t.split(" . ")[0]} for t in picked], 40, 24)

    entry = registry.get("transformer")
    monkeypatch.setitem(entry.presets, "pre", Preset(**{**TINY.__dict__, "data": {**TINY.data, "pretrain_steps": 2}}))
    seen = []
    real = seq2seq.train

    def spy(model, get_batch, config, **kw):
        def watch(split, rng):
            batch = get_batch(split, rng)
            seen.append((get_batch.step, len(calls)))
            return batch
        return real(model, watch, config, **kw)
    monkeypatch.setattr(seq2seq, "train", spy)
    recipe = seq2seq.make_recipe(seq2seq.Seq2SeqHooks(pretrain_batch=copy_text, extra_specials=("<extra_id_0>",)))
    recipe(entry, "pre", out_dir=str(tmp_path / "p"), progress=False)
    train_calls = [c for s, c in seen if s < 2]
    assert len(calls) >= 2 and train_calls[0] == 1                   # step 0 drew a pre-training batch
    later = [c for s, c in seen if s >= 2]
    assert later and all(c == later[0] for c in later)               # from step 2 on: the mixture only
    tok = seq2seq.load_text_to_text(tmp_path / "p")[1]
    assert "<extra_id_0>" in tok.special_tokens


def test_corpus_and_unknown_presets_are_refused(tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("some text " * 100)
    assert main(["train", "transformer", "--corpus", str(text), "--out", str(tmp_path / "e")]) == 2
    assert "--corpus is not supported" in capsys.readouterr().err
    assert main(["train", "transformer", "--preset", "huge", "--out", str(tmp_path / "e")]) == 2
    assert "unknown preset 'huge'" in capsys.readouterr().err
    assert not (tmp_path / "e").exists()


def test_evaluate_scores_the_greedy_answers_per_task():
    """On a model whose answers depend on the input: answers equal greedy decoding by hand,
    and the score counts exactly the pairs whose reference is that answer."""
    from minipt.inference.seq2seq_decoding import greedy
    from minipt.models.decoder.gpt import perturbed
    data = t2t.text_to_text((30, 4, 6))
    tok = t2t.build_tokenizer(data)
    model = perturbed(registry.get("transformer").build(
        rng=np.random.default_rng(0), vocab_size=tok.vocab_size, n_encoder_layers=1, n_decoder_layers=1, n_head=2,
        d_model=16, max_source_len=40, max_target_len=12), scale=1.0)
    pairs = [e for d in data.values() for e in d["test"]]
    src = t2t.encode_sources(tok, [e["input"] for e in pairs], 40)
    by_hand = [t2t.answer_text(tok, o) for o in greedy(model, src, start_id=1, eos_id=2)]
    assert len(set(by_hand)) > 3
    pairs = [{**e, "target": a if i % 3 == 0 else e["target"]} for i, (e, a) in enumerate(zip(pairs, by_hand))]
    scores, answers = seq2seq.evaluate(model, tok, pairs, "<s>", 40, batch_size=7)
    for task in t2t.TASKS:
        idx = [i for i, e in enumerate(pairs) if e["task"] == task]
        assert answers[task] == [by_hand[i] for i in idx]
        want = np.mean([pairs[i]["target"].split() == by_hand[i].split() or i % 3 == 0 for i in idx])
        assert scores[task] == pytest.approx(want)


def test_majority_scores_give_each_task_its_commonest_training_answer():
    pos, neg = {"target": "positive"}, {"target": "negative"}
    data = {"sentiment": {"train": [pos, pos, neg], "test": [pos, neg, pos, pos]},
            "translate": {"train": [{"target": "le chat dort ."}, {"target": "la reine ."}, {"target": "la reine ."}],
                          "test": [{"target": "la reine ."}, {"target": "le chat dort ."}]}}
    assert seq2seq.majority_scores(data) == {"sentiment": 0.75, "translate": 0.5}
