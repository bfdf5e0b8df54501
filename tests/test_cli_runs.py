"""`minipt train/sample/export` as a user meets them: a run is never clobbered, a refused
resume changes no byte, a resume keeps the run's settings, Ctrl-C saves and says how to
continue, export --overwrite touches only export files, bad numbers are refused by flag.

The CLI's `gpt` entry is given a tiny `toy` preset here (1 layer, d 16, the toy language
at 6,000 characters) and loss.png is a stub, so each run takes well under a second."""
import dataclasses
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from minipt.cli import main
from minipt.core.checkpoint import load_checkpoint
from minipt.models import registry
from minipt.models.registry import Preset
from minipt.recipes import char_lm

TINY = Preset(model=dict(block_size=16, n_layer=1, n_head=2, d_model=16), batch_size=4,
              train=dict(steps=8, lr=3e-3, min_lr=3e-4, warmup=2, weight_decay=0.1, eval_every=4, eval_batches=2,
                         grad_clip=1.0), data=dict(n_tokens=6000))
RUN_FILES = ["checkpoint.npz", "loss.png", "metrics.jsonl", "report.json", "tokenizer.json"]


@pytest.fixture
def tiny(monkeypatch):
    import minipt.train as loop  # the plot is tested on its own below; here it costs seconds
    monkeypatch.setattr(loop, "plot_history", lambda history, path, oracle=None: path.write_bytes(b"\x89PNG stub") and path)
    for name in ("gpt", "llama"):
        entry = registry.get(name)
        monkeypatch.setitem(registry._REGISTRY, name, dataclasses.replace(
            entry, presets={"toy": TINY, "wide": dataclasses.replace(TINY, model={**TINY.model, "d_model": 24})}))


def interrupt_at(monkeypatch, at: int):
    """Make the recipe's training loop receive a real SIGINT after step ``at``."""
    real = char_lm.train

    def train(*args, **kw):
        def ctrl_c(step, record):
            if step == at:
                os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **{**kw, "callback": ctrl_c})
    monkeypatch.setattr(char_lm, "train", train)
    return real


def snapshot(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def run(tmp_path, *extra, name="run"):
    out = tmp_path / name
    assert main(["train", "gpt", "--out", str(out), *extra]) == 0
    return out


def test_out_holding_a_run_is_refused_and_overwrite_replaces_it(tiny, tmp_path, capsys):
    out = run(tmp_path, "--steps", "3")
    before = snapshot(out)
    capsys.readouterr()
    assert main(["train", "gpt", "--steps", "3", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--resume" in err and "--overwrite" in err and str(out) in err
    assert snapshot(out) == before
    (out / "notes.txt").write_text("mine")
    assert main(["train", "gpt", "--steps", "2", "--out", str(out), "--overwrite"]) == 0
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2           # one run's log, not two
    assert (out / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("change,flag", [
    (["--corpus", "OTHER"], "--corpus"),
    (["--preset", "wide"], "--preset"),
    (["--steps", "12"], "--steps"),
    (["--seed", "5"], "--seed"),
    (["--model", "llama"], "llama"),
])
def test_a_refused_resume_leaves_every_byte(tiny, monkeypatch, tmp_path, capsys, change, flag):
    corpus = tmp_path / "a.txt"
    corpus.write_text("the old king sees his gold near the river . " * 40)
    other = tmp_path / "b.txt"
    other.write_text("a quick brown fox jumps over the lazy dog ; " * 40)
    base = ["--corpus", str(corpus)] if change[0] == "--corpus" else []
    interrupt_at(monkeypatch, 2)
    out = tmp_path / "run"
    assert main(["train", "gpt", "--out", str(out), *base]) == 130
    before = snapshot(out)
    model = "gpt"
    if change[0] == "--model":
        model, change = change[1], []
    change = [str(other) if c == "OTHER" else c for c in change]
    capsys.readouterr()
    assert main(["train", model, "--out", str(out), "--resume", *change]) == 2
    err = capsys.readouterr().err
    assert flag in err and "Traceback" not in err
    assert snapshot(out) == before


def test_resume_where_there_is_no_run_writes_nothing(tiny, tmp_path, capsys):
    assert main(["train", "gpt", "--out", str(tmp_path / "none"), "--resume"]) == 2
    assert "no run to continue" in capsys.readouterr().err and not (tmp_path / "none").exists()


def test_ctrl_c_saves_evaluates_and_prints_a_resume_command_that_works_as_typed(tiny, monkeypatch, tmp_path, capsys):
    full = run(tmp_path, "--steps", "10", name="full")
    real = interrupt_at(monkeypatch, 3)               # before the first evaluation (step 4)
    out = tmp_path / "part"
    capsys.readouterr()
    assert main(["train", "gpt", "--steps", "10", "--out", str(out)]) == 130
    text = capsys.readouterr().out
    assert "validation loss" in text and "at step 3 of 10" in text
    record = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert record["step"] == 3 and "val_loss" in record                          # evaluated once, at step 3
    assert load_checkpoint(out / "checkpoint.npz").extra["step"] == 3
    assert "wrote" in text and "metrics.jsonl" in text
    command = text.split("continue with `")[1].split("`")[0]
    assert "--steps" not in command                                                # the run remembers them
    monkeypatch.setattr(char_lm, "train", real)
    argv = shlex.split(command)
    assert argv[0] == "minipt" and main(argv[1:]) == 0
    assert "from step 3 of 10" in capsys.readouterr().out
    losses = lambda p: [(r["step"], r["loss"], r["lr"]) for r in map(json.loads, (p / "metrics.jsonl").read_text().splitlines())]
    assert losses(out) == losses(full)                                             # same schedule, same batches
    a, b = load_checkpoint(full / "checkpoint.npz").params, load_checkpoint(out / "checkpoint.npz").params
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_ctrl_c_with_evaluation_off_says_so(tiny, monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(registry._REGISTRY, "gpt", dataclasses.replace(
        registry.get("gpt"), presets={"toy": dataclasses.replace(TINY, train={**TINY.train, "eval_every": 0})}))
    interrupt_at(monkeypatch, 2)
    assert main(["train", "gpt", "--out", str(tmp_path / "r")]) == 130
    out = capsys.readouterr().out
    assert "no evaluation was made" in out and "--resume`" in out


def _part_workers_of(pid: int) -> set[int]:
    """Pids of the batch-part worker processes whose parent is ``pid``."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            cmd = (entry / "cmdline").read_bytes()
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and b"minipt.nn.part_processes import main" in cmd:
            found.add(int(entry.name))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("parts", [1, 2], ids=["whole", "2 batch parts"])
def test_real_ctrl_c_in_a_subprocess_before_any_evaluation(tmp_path, parts):
    """Ctrl-C in a terminal reaches the whole process group: with the batch in parts, the
    worker process too, which leaves it to the run and ends with it."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("the old king sees his gold near the river . " * 200)
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1]), "MINIPT_PART_WORKERS": "processes",
           "MINIPT_THREADS": "2"}                         # not the test session's one thread: parts side by side
    proc = subprocess.Popen([sys.executable, "-m", "minipt.cli", "train", "gpt", "--corpus", str(corpus),
                             "--steps", "5000", "--out", str(out), "--batch-parts", str(parts)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    metrics = out / "metrics.jsonl"
    while not (metrics.exists() and metrics.read_text().count("\n") >= 2):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    workers = _part_workers_of(proc.pid)
    if len(os.sched_getaffinity(0)) > 1:
        assert len(workers) == parts - 1
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "Warning" not in stderr and "validation loss" in stdout
    assert f"`minipt train gpt --out {out} --resume{' --batch-parts 2' if parts == 2 else ''}`" in stdout
    for _ in range(100):                                   # the worker ends with its run
        if not any(Path(f"/proc/{w}").exists() for w in workers):
            break
        time.sleep(0.05)
    assert not any(Path(f"/proc/{w}").exists() for w in workers)


def test_export_overwrite_replaces_only_export_files(tiny, tmp_path, capsys, monkeypatch):
    out = run(tmp_path, "--steps", "2")
    to = tmp_path / "hf"
    to.mkdir()
    (to / "notes.txt").write_text("mine")
    (to / "sub").mkdir()
    (to / "sub" / "data.txt").write_text("keep")
    (to / "vocab.json").write_text("{}")                  # a stale file of an earlier BPE export
    capsys.readouterr()
    assert main(["export", "--checkpoint", str(out), "--to", str(to)]) == 2
    err = capsys.readouterr().err
    assert "--overwrite" in err and "overwrite=True" not in err
    assert main(["export", "--checkpoint", str(out), "--to", str(to), "--overwrite"]) == 0
    assert sorted(p.name for p in to.iterdir()) == ["config.json", "minipt_tokenizer.json", "model.safetensors",
                                                    "notes.txt", "sub", "tokenizer.json", "tokenizer_config.json"]
    assert (to / "sub" / "data.txt").read_text() == "keep"
    monkeypatch.chdir(tmp_path)                          # the current folder and the run's parent survive
    before = snapshot(out)
    assert main(["export", "--checkpoint", "run", "--to", ".", "--overwrite"]) == 0
    capsys.readouterr()
    for overwrite in ([], ["--overwrite"]):                        # said first: --overwrite would not help
        assert main(["export", "--checkpoint", "run/checkpoint.npz", "--to", "run", *overwrite]) == 2
        assert "holds a training run" in capsys.readouterr().err  # its tokenizer.json would be replaced
    assert tmp_path.is_dir() and snapshot(out) == before


def test_batch_parts_reach_the_run_and_its_resume_command(tiny, monkeypatch, tmp_path, capsys):
    """--batch-parts N cuts the stacks' batch (minipt.nn.batch_parts); a run remembers it, its
    resume command asks for it, and a resume without it is refused before any file changes."""
    from minipt.nn.batch_parts import set_batch_parts
    monkeypatch.setattr("minipt.nn.batch_parts._setting", {"parts": None, "workers": None})   # the CLI sets it
    full = run(tmp_path, "--steps", "10", "--batch-parts", "2", name="full")
    assert load_checkpoint(full / "checkpoint.npz").extra["batch_parts"] == 2
    real = interrupt_at(monkeypatch, 3)
    out = tmp_path / "part"
    assert main(["train", "gpt", "--steps", "10", "--out", str(out), "--batch-parts", "2"]) == 130
    command = capsys.readouterr().out.split("continue with `")[1].split("`")[0]
    assert command.endswith("--resume --batch-parts 2")
    monkeypatch.setattr(char_lm, "train", real)
    set_batch_parts(None)
    before = snapshot(out)
    assert main(["train", "gpt", "--out", str(out), "--resume"]) == 2
    assert "MINIPT_BATCH_PARTS=2" in capsys.readouterr().err and snapshot(out) == before
    assert main(shlex.split(command)[1:]) == 0
    losses = lambda p: [r["loss"] for r in map(json.loads, (p / "metrics.jsonl").read_text().splitlines())]
    assert losses(out) == losses(full)


@pytest.mark.parametrize("argv,flag", [
    (["train", "gpt", "--steps", "0"], "--steps"),
    (["train", "gpt", "--steps", "-3"], "--steps"),
    (["train", "gpt", "--seed", "-1"], "--seed"),
    (["train", "gpt", "--steps", "x"], "--steps"),
    (["train", "gpt", "--batch-parts", "0"], "--batch-parts"),
    (["sample", "--max-new-tokens", "0"], "--max-new-tokens"),
    (["sample", "--top-p", "1.5"], "--top-p"),
    (["sample", "--top-k", "0"], "--top-k"),
    (["sample", "--temperature", "-1"], "--temperature"),
    (["sample", "--seed", "-2"], "--seed"),
])
def test_bad_numbers_are_refused_by_flag_before_any_file_is_written(tmp_path, capsys, monkeypatch, argv, flag):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        main([*argv, "--out", "r"] if argv[0] == "train" else [*argv, "--checkpoint", "r"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_sample_takes_the_folder_or_the_checkpoint_file(tiny, tmp_path, capsys):
    out = run(tmp_path, "--steps", "2")
    capsys.readouterr()
    outputs = []
    for where in (out, out / "checkpoint.npz"):
        assert main(["sample", "--checkpoint", str(where), "--max-new-tokens", "5", "--temperature", "0"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]


def test_a_prompt_longer_than_the_context_is_one_plain_sentence(tiny, tmp_path, capsys):
    out = run(tmp_path, "--steps", "2")
    capsys.readouterr()
    assert main(["sample", "--checkpoint", str(out), "--prompt", "the king " * 5, "--max-new-tokens", "3"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Warning" not in err[0] and "warn(" not in err[0]
    assert "45 tokens" in err[0] and "last 16" in err[0]


def test_the_summary_names_both_entropy_figures_and_every_file(tiny, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "gpt", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    report = json.loads((out / "report.json").read_text())
    assert f"oracle loss of this validation text {report['oracle_loss']:.4f}" in text
    assert f"entropy rate of the toy language {report['entropy_rate']:.3f}" in text
    wrote = next(line for line in text.splitlines() if line.startswith("wrote "))
    assert sorted(Path(p).name for p in wrote[len("wrote "):].split(", ")) == RUN_FILES
    assert sorted(p.name for p in out.iterdir()) == RUN_FILES


def test_loss_plot_draws_the_oracle_and_a_log_gap_axis():
    from minipt.train import loss_figure
    history = [{"step": s, "loss": 0.43 + 2 / s, "grad_norm": 1.0, **({"val_loss": 0.44 + 2 / s} if s % 5 == 0 else {})}
               for s in range(1, 41)]
    fig = loss_figure(history, oracle_loss=0.43)
    losses, gap, _ = fig.axes
    assert any(np.allclose(line.get_ydata(), 0.43) for line in losses.get_lines())
    assert gap.get_yscale() == "log"
    top = max(np.max(line.get_ydata()) for line in gap.get_lines())
    low = min(np.min(line.get_ydata()) for line in gap.get_lines())
    assert low < 0.06 and top / low > 10                      # the last 0.05 nats span a decade or more


def test_the_loss_plot_keeps_a_notebooks_backend():
    """A lesson that trains (and so draws loss.png) must keep showing its own figures: the
    loss plot picks Agg only when pyplot has not been set up yet (a script, the CLI)."""
    import subprocess
    import sys
    code = ("import matplotlib\n{pre}from minipt.train import loss_figure\n"
            "loss_figure([{{'step': 1, 'loss': 1.0, 'grad_norm': 1.0}}, {{'step': 2, 'loss': 0.5, 'grad_norm': 1.0}}])\n"
            "print(matplotlib.get_backend().lower())")
    run = lambda pre: subprocess.run([sys.executable, "-c", code.format(pre=pre)], capture_output=True, text=True,
                                     check=True, env={**os.environ, "MPLBACKEND": ""}).stdout.split()[-1]
    assert run("matplotlib.use('svg')\nimport matplotlib.pyplot\n") == "svg"
    assert run("") == "agg"


def test_a_second_ctrl_c_stops_at_once_and_names_the_last_checkpoint(tiny, monkeypatch, tmp_path, capsys):
    real = char_lm.train

    def train(*args, **kw):
        def stop_now(step, record):
            if step == 6:
                raise KeyboardInterrupt                  # what the second Ctrl-C raises inside a step
        return real(*args, **{**kw, "callback": stop_now})
    monkeypatch.setattr(char_lm, "train", train)
    out = tmp_path / "run"
    assert main(["train", "gpt", "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and "is at step 4" in err and f"`minipt train gpt --out {out} --resume`" in err
