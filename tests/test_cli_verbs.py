"""The right command for each model, as a user meets them on a BERT, a T5, a BART, an
XLNet and an LSTM run: `sample`, `generate`, `fill` and `embed` each work or say in one line which
command does (the registry's `verbs`); `fill` lists the MLM's most probable fillers
(checked against an independent softmax of the model's scores, and against the toy
grammar); unknown words and truncation are one note line; the run folder survives a
second run, a resume with other settings and a damaged checkpoint byte for byte, and a
resume with the run's own settings goes on.

Each model gets a tiny `tiny` preset (1 layer, d 16-32, a few steps) and loss.png is a
stub, as in test_cli_runs.py; the runs stop by Ctrl-C at step 2 so that they can be resumed.
One BERT (`learnt`, 300 steps, about 10 s) is trained far enough to fill a noun."""
import dataclasses
import os
import shutil
import signal
from pathlib import Path

import numpy as np
import pytest

import minipt.train as loop
from minipt.cli import main
from minipt.models import registry
from minipt.models.registry import Preset
from minipt.recipes import encoder, recurrent, seq2seq, xlnet

BERT = Preset(model=dict(n_layer=1, n_head=2, d_model=32, d_ff=64, dropout=0.0), batch_size=16,
              train=dict(steps=6, lr=3e-3, min_lr=3e-4, warmup=1, weight_decay=0.01, eval_every=3, eval_batches=2,
                         grad_clip=1.0, betas=(0.9, 0.999)),
              data=dict(n_docs=60, vocab_size=120, max_length=24, n_instances={"train": 200, "val": 48}))
PRESETS = {
    "bert": BERT,
    "t5": Preset(model=dict(n_layer=1, n_head=2, d_model=16, d_ff=32, num_buckets=8, max_distance=16,
                            max_source_len=64, max_target_len=24), batch_size=8,      # pre-training: 64-token pieces
                 train=dict(steps=6, lr=1e-3, warmup=1, eval_every=3, eval_batches=1),
                 data=dict(sizes=(40, 8, 10), pretrain_steps=3)),
    "bart": Preset(model=dict(encoder_layers=1, decoder_layers=1, n_head=2, d_model=16, max_source_len=48,
                              max_target_len=24), batch_size=8,
                   train=dict(steps=6, lr=1e-3, warmup=1, eval_every=3, eval_batches=1),
                   data=dict(sizes=(40, 8, 10), pretrain_steps=3)),
    "xlnet": Preset(model=dict(n_layer=1, n_head=2, d_model=16, activation="gelu_tanh"), batch_size=4,
                    train=dict(steps=6, lr=3e-3, warmup=1, eval_every=3, eval_batches=1),
                    data=dict(n_tokens=4000, block_size=16, K=4)),
    "lstm": Preset(model=dict(d_model=16, hidden=16, n_layer=1, dropout=0.0), batch_size=4,
                   train=dict(steps=6, lr=1e-2, warmup=1, eval_every=3, eval_batches=1),
                   data=dict(n_tokens=4000, block_size=16)),
}
LEARNT = dataclasses.replace(BERT, train={**BERT.train, "steps": 300, "eval_every": 300},
                             data=dict(n_docs=200, vocab_size=250, max_length=24,
                                       n_instances={"train": 800, "val": 64}))
RECIPE_MODULES = {"bert": encoder, "t5": seq2seq, "bart": seq2seq, "xlnet": xlnet, "lstm": recurrent}
MODELS = list(PRESETS)
FIXTURES = Path(__file__).parent / "interop" / "fixtures"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """{name: a tiny run stopped at step 2 of 6} and "learnt": a BERT trained 300 steps."""
    mp = pytest.MonkeyPatch()
    mp.setattr(loop, "plot_history", lambda history, path, oracle=None: path.write_bytes(b"\x89PNG stub") and path)
    root = tmp_path_factory.mktemp("verbs")
    found = {}
    for name, preset in PRESETS.items():
        mp.setitem(registry.get(name).presets, "tiny", preset)
        module = RECIPE_MODULES[name]
        real = module.train

        def stop_at_2(*args, real=real, **kw):
            theirs = kw.get("callback")

            def callback(step, record):
                if theirs:
                    theirs(step, record)
                if step == 2:
                    os.kill(os.getpid(), signal.SIGINT)
            return real(*args, **{**kw, "callback": callback})
        mp.setattr(module, "train", stop_at_2)
        assert main(["train", name, "--preset", "tiny", "--out", str(root / name)]) == 130
        mp.setattr(module, "train", real)
        found[name] = root / name
    mp.setitem(registry.get("bert").presets, "learnt", LEARNT)
    assert main(["train", "bert", "--preset", "learnt", "--out", str(root / "learnt")]) == 0
    found["learnt"] = root / "learnt"
    yield found
    mp.undo()


def snapshot(folder) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


VERB_ARGV = {"sample": ["sample", "--max-new-tokens", "3", "--prompt", "the "],
             "generate": ["generate", "translate toy: the cat sleeps ."],
             "fill": ["fill", "the [MASK] sleeps ."],
             "embed": ["embed", "the cat sleeps ."]}


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("verb", list(VERB_ARGV))
def test_each_command_works_or_names_the_one_that_does(runs, capsys, name, verb):
    capsys.readouterr()
    code = main([*VERB_ARGV[verb], "--checkpoint", str(runs[name])])
    got = capsys.readouterr()
    entry = registry.get(name)
    if verb in entry.verbs:
        assert code == 0 and got.out.strip(), got.err
        return
    assert code == 2 and got.out == ""
    line = one_line(got.err)
    assert f"`minipt {verb}` does not serve" in line and entry.title in line
    assert all(f"use `minipt {v}`" in line or f"or `minipt {v}`" in line for v in entry.verbs), line
    assert "unexpected keyword" not in line


def test_verbs_come_from_the_registry():
    verbs = {e.name: e.verbs for e in registry.entries()}
    assert verbs["gpt"] == verbs["xlnet"] == ("sample",)            # language models: the default
    assert verbs["bert"] == ("fill", "embed") and verbs["t5"] == verbs["bart"] == ("generate",)
    assert verbs["word2vec"] == () and verbs["gpt1-finetune"] == ()
    with pytest.raises(ValueError, match="unknown verbs"):
        dataclasses.replace(registry.get("gpt"), verbs=("chat",))


def _fill_lines(out: str) -> list[tuple[float, str, str]]:
    rows = []
    for line in out.splitlines():
        if line.startswith("mask "):
            continue
        p, token, sequence = line.split(maxsplit=2)
        rows.append((float(p), token, sequence))
    return rows


def test_fill_lists_the_softmax_of_the_mlm_scores_sorted(runs, capsys):
    from minipt.recipes.char_lm import load_trained
    model, tok = load_trained(runs["learnt"])
    model.eval()
    words = "the old [MASK] sees his [MASK] .".split()
    ids = [tok.token_to_id("[CLS]")] + [i for w in words for i in tok.encode(w)] + [tok.token_to_id("[SEP]")]
    _, logits = model(np.array([ids]))                                   # (1, T, V)
    assert main(["fill", "--checkpoint", str(runs["learnt"]), "--top-k", "4", " ".join(words)]) == 0
    rows = _fill_lines(capsys.readouterr().out)
    assert len(rows) == 8                                                # 2 masks x top 4
    for m, t in enumerate(np.flatnonzero(np.array(ids) == tok.token_to_id("[MASK]"))):
        z = logits[0, t].astype(np.float64)
        p = np.array([1.0 / np.sum(np.exp(z - z[v])) for v in range(len(z))])   # softmax, written apart
        best = sorted(range(len(z)), key=lambda v: -p[v])[:4]
        for (prob, token, sequence), v in zip(rows[4 * m:4 * m + 4], best):
            assert token == tok.id_to_token(v) and abs(prob - p[v]) < 6e-5
            filled = list(words)
            at = [i for i, w in enumerate(words) if w == "[MASK]"][m]
            filled[at] = token
            assert sequence == " ".join(filled)
        assert [r[0] for r in rows[4 * m:4 * m + 4]] == sorted([r[0] for r in rows[4 * m:4 * m + 4]], reverse=True)


def test_a_trained_bert_fills_a_word_the_toy_grammar_allows(runs, capsys):
    from minipt.data.encoder_corpus import story_documents
    sentences = [s for doc in story_documents(2000, np.random.default_rng(5)) for s in doc]
    allowed = {s[i + 1] for s in sentences for i in range(len(s) - 2) if s[i] == "the" and s[i + 2] == "sleeps"}
    assert main(["fill", "--checkpoint", str(runs["learnt"]), "the [MASK] sleeps ."]) == 0
    prob, token, sequence = _fill_lines(capsys.readouterr().out)[0]
    assert token in allowed and sequence == f"the {token} sleeps ." and prob > 0.05, (token, sorted(allowed))


@pytest.mark.parametrize("text, message", [
    ("the cat sleeps .", "has no [MASK] token"),
    ("   ", "the text is empty"),
    ("[MASK] " + "the cat " * 40, None),                   # cut to the context, the mask kept: a note
    ("the cat " * 40 + "[MASK]", "lie past the 24 tokens"),
])
def test_fill_bad_or_long_text_is_one_line(runs, capsys, text, message):
    code = main(["fill", "--checkpoint", str(runs["learnt"]), text])
    got = capsys.readouterr()
    line = one_line(got.err)
    if message is None:
        assert code == 0 and "note: kept the first 22 of 81 word pieces" in line
    else:
        assert code == 2 and message in line and got.out == ""


def test_unknown_words_are_one_note(runs, capsys):
    assert main(["fill", "--checkpoint", str(runs["learnt"]), "the zebra [MASK] qqq ."]) == 0
    line = one_line(capsys.readouterr().err)
    assert line == 'minipt fill: note: 2 unknown words replaced by [UNK]: "zebra", "qqq"'
    assert main(["generate", "--checkpoint", str(runs["t5"]), "translate toy: the zebra sleeps ."]) == 0
    assert 'note: 1 unknown word replaced by <unk>: "zebra"' in one_line(capsys.readouterr().err)
    assert main(["generate", "--checkpoint", str(runs["t5"]), "zebra quux zebra"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "no word of the prompt is in the model's vocabulary" in line and '"quux"' in line


def test_embed_is_a_mean_pooled_unit_vector_with_a_short_label(runs, capsys):
    from minipt.recipes.char_lm import load_trained
    model, tok = load_trained(runs["learnt"])
    model.eval()
    long = " ".join(["the cat sleeps ."] * 1250)                         # 5,000 words
    assert main(["embed", "--checkpoint", str(runs["learnt"]), "the cat sleeps .", long]) == 0
    got = capsys.readouterr()
    assert one_line(got.err) == "minipt embed: note: text 2: kept the first 22 of 5,000 word pieces (the model " \
                                "reads 24 tokens at a time)"
    lines = got.out.splitlines()
    assert len(lines) == 2 and len(lines[1].split("\t")[0]) <= 60
    for line, words in zip(lines, (["the", "cat", "sleeps", "."], long.split()[:22])):
        ids = [tok.token_to_id("[CLS]")] + [i for w in words for i in tok.encode(w)] + [tok.token_to_id("[SEP]")]
        h = model.encoder(np.array([ids]))[0]                           # (T, C)
        want = h.sum(axis=0) / len(ids)
        want = want / np.sqrt((want ** 2).sum())
        got_vec = np.array(line.split("\t")[1].split(), dtype=float)
        assert np.abs(got_vec - want).max() < 2e-6
    assert main(["embed", "--checkpoint", str(runs["learnt"]), "the cat", ""]) == 2
    assert "text 2 is empty" in one_line(capsys.readouterr().err)


@pytest.mark.parametrize("name", MODELS)
def test_a_second_run_or_other_settings_are_refused_and_change_no_byte(runs, capsys, name):
    out = runs[name]
    before = snapshot(out)
    for extra, flag in ([["--preset", "tiny"], "--resume"], [["--resume", "--seed", "7"], "seed"],
                        [["--resume", "--steps", "9"], "steps"], [["--resume", "--preset", "toy"], "preset"]):
        capsys.readouterr()
        assert main(["train", name, "--out", str(out), *extra]) == 2
        line = one_line(capsys.readouterr().err)
        assert flag in line and str(out) in line
        assert snapshot(out) == before
    other = "t5" if name != "t5" else "bert"
    assert main(["train", other, "--out", str(out), "--resume"]) == 2
    assert f"trains {name!r}" in one_line(capsys.readouterr().err) and snapshot(out) == before


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("how", ["truncate", "flip", "run.json", "tokenizer.json"])
def test_a_damaged_run_is_one_line_naming_the_file_and_nothing_changes(runs, tmp_path, capsys, name, how):
    folder = tmp_path / name
    shutil.copytree(runs[name], folder)
    victim = folder / (how if how.endswith(".json") else "checkpoint.npz")
    data = bytearray(victim.read_bytes())
    if how == "truncate":
        data = data[:len(data) // 2]
    elif how == "flip":
        data[len(data) // 2] ^= 0x5A
    elif how == "run.json":
        data = bytearray(b'{"preset": "tiny", "steps": "six"}')
    else:
        data = data[:len(data) // 3]
    victim.write_bytes(bytes(data))
    before = snapshot(folder)
    capsys.readouterr()
    assert main(["train", name, "--out", str(folder), "--resume"]) == 2
    line = one_line(capsys.readouterr().err)
    assert victim.name in line and "damaged" in line, line
    assert snapshot(folder) == before


@pytest.mark.parametrize("name", MODELS)
def test_a_resume_with_the_runs_own_settings_goes_on(runs, tmp_path, capsys, name):
    folder = tmp_path / name
    shutil.copytree(runs[name], folder)
    assert main(["train", name, "--out", str(folder), "--resume", "--preset", "tiny", "--steps", "6",
                 "--seed", "0"]) == 0
    from minipt.core.checkpoint import load_checkpoint
    assert load_checkpoint(folder / "checkpoint.npz").extra["step"] == 6


def _hf_bert(tmp_path):
    """The BertForPreTraining fixture folder with a vocab.txt of its 40 ids."""
    folder = tmp_path / "bert"
    shutil.copytree(FIXTURES / "bert", folder)
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + (
        "the a cat dog king queen sleeps reigns sees his her old . , river stone gold near by in on at under man "
        "woman prince princess castle field garden bat ball round quick fish").split()
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    return folder


def test_fill_hf_folder_equals_the_transformers_fill_mask_pipeline(tmp_path, capsys):
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    folder = _hf_bert(tmp_path)
    text = "the old [MASK] sees his gold ."
    assert main(["fill", "--hf", str(folder), "--top-k", "4", text]) == 0
    rows = _fill_lines(capsys.readouterr().out)
    theirs = transformers.pipeline("fill-mask", model=str(folder), top_k=4)(text)
    assert [r[1] for r in rows] == [t["token_str"] for t in theirs]
    assert np.allclose([r[0] for r in rows], [t["score"] for t in theirs], atol=6e-5)
    capsys.readouterr()                                                   # transformers' load report
    assert main(["sample", "--hf", str(folder)]) == 2
    assert "use `minipt fill`" in one_line(capsys.readouterr().err)


def test_fill_hf_folder_without_a_vocabulary_is_one_line(capsys):
    assert main(["fill", "--hf", str(FIXTURES / "bert"), "the [MASK] ."]) == 2
    assert "has no vocab.txt" in one_line(capsys.readouterr().err)


def test_models_says_which_have_no_preset_and_why(capsys):
    trainable = {e.name for e in registry.trainable()}
    untrained = [e for e in registry.entries() if e.name not in trainable]
    assert untrained and all(e.no_preset for e in untrained)
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for e in untrained:
        assert f"no preset (`minipt train` does not offer it): {e.no_preset}" in out
    assert out.count("no preset (") == len(untrained)
    assert f"{len(registry.entries())} models; `minipt train` offers the {len(trainable)} with a preset" in out
    assert main(["train", "bert-qa", "--out", "nowhere"]) == 2
    assert one_line(capsys.readouterr().err) == f"minipt train: error: bert-qa has no preset to train: " \
                                                f"{registry.get('bert-qa').no_preset}"


@pytest.fixture
def nnlm_run(tmp_path, monkeypatch):
    """A 4-step NNLM run (a tiny preset, loss.png a stub) in tmp_path / "nnlm"."""
    monkeypatch.setattr(loop, "plot_history", lambda history, path, oracle=None: path.write_bytes(b"\x89PNG") and path)
    monkeypatch.setitem(registry.get("nnlm").presets, "tiny", Preset(
        model=dict(order=3, dim=8, hidden=8, direct=True), batch_size=4,
        train=dict(steps=4, lr=1e-2, warmup=1, eval_every=2, eval_batches=1), data=dict(n_words=3000, block_size=8)))
    out = tmp_path / "nnlm"
    assert main(["train", "nnlm", "--preset", "tiny", "--out", str(out)]) == 0
    return out


def test_an_nnlm_run_keeps_its_settings_too(nnlm_run, capsys):
    out = nnlm_run
    before = snapshot(out)
    for extra, said in ((["--seed", "7"], "has seed 0, not 7"), (["--steps", "9"], "has steps 4, not 9"),
                        (["--steps", "4"], "the run is finished")):
        capsys.readouterr()
        assert main(["train", "nnlm", "--out", str(out), "--resume", *extra]) == 2
        assert said in one_line(capsys.readouterr().err) and snapshot(out) == before


def test_an_nnlm_run_samples_words_and_an_ngram_run_says_which_lesson_runs_it(nnlm_run, tmp_path, capsys):
    """The NNLM's run keeps its words as tokenizer.json (ids equal to the training
    vocabulary's), so `sample` continues a prompt word by word, a space before the first
    new word; a counted n-gram run has no checkpoint and `sample` says so in one line."""
    out = nnlm_run
    from minipt.models.classic.ngram import NGramVocab
    from minipt.recipes.char_lm import load_trained
    from minipt.recipes.classic import word_splits
    model, tok = load_trained(out)
    vocab = NGramVocab([word_splits(3000, None, 0)[0]])
    assert tok.vocab_size == len(vocab) == model.spec()["vocab_size"]
    words = [w for w in vocab.words[3:40] if w != "<nl>"]     # the document end is not typed in a prompt
    assert tok.encode(" ".join(words)) == vocab.encode(words).tolist()
    capsys.readouterr()
    assert main(["sample", "--checkpoint", str(out), "--prompt", "the king", "--max-new-tokens", "6"]) == 0
    said = capsys.readouterr().out.strip()
    assert said.startswith("the king ") and len(said.split()) == 2 + 6
    assert all(w in vocab.index for w in said.split())
    assert main(["train", "ngram", "--out", str(tmp_path / "ngram")]) == 0
    capsys.readouterr()
    assert main(["sample", "--checkpoint", str(tmp_path / "ngram")]) == 2
    assert "no minipt command runs it (lesson 04_ngram" in one_line(capsys.readouterr().err)


def test_models_prints_each_presets_measured_result_from_its_committed_report(capsys, monkeypatch):
    """No hand-typed figure: a preset's line is its report's result and time, and a
    preset without a report says it is not measured (GloVe's report is held back here:
    every preset has one committed, so the case would otherwise rest on what other tests
    registered before this one)."""
    from minipt import measured
    from minipt.measured import result_text, time_text
    reports = {k: v for k, v in measured.load_reports().items() if k != "glove"}
    monkeypatch.setattr(measured, "load_reports", lambda *a, **k: reports)
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert f"preset toy: {result_text(reports['gpt'])}. Took {time_text(reports['gpt'])}\n" in out
    assert "1.818 nats/word" in result_text(reports["ngram"]) and "1.818 nats/word" in out
    unmeasured = [(e.name, p) for e in registry.trainable() for p in e.presets
                  if (e.name if p == "toy" else f"{e.name}-{p}") not in reports]
    assert out.count("not measured (benchmarks/bench_presets.py)") == len(unmeasured) > 0
