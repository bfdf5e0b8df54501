"""Damaged files never end in a traceback: every file a training run writes (and every file
an export writes) is flipped at a random byte, truncated at a random point, emptied or
swapped for a foreign file, then read by `sample`, `export`, `train --resume` and
`sample --hf`. (A transformers folder carries no checksum, so a flipped byte inside its
tensors or numbers cannot be told from a trained value: its files are only truncated,
emptied or swapped; a run's files are also flipped, which the CRC-32 of every member of
checkpoint.npz and the tokenizer's SHA-256 saved in it catch.) Each command either refuses with exit 2 and one line naming the damaged
file, or (when the damage is harmless: a zip timestamp, a file the command does not read)
succeeds with exactly the output of the undamaged run. Seeded; a few seconds of work.

The CLI's `gpt` entry gets a tiny `toy` preset (1 layer, d 16), as in test_cli_runs.py."""
import dataclasses
import json
import os
import pickle
import shutil
import signal

import numpy as np
import pytest

from minipt import train as train_module
from minipt.cli import main
from minipt.core.checkpoint import load_checkpoint
from minipt.models import registry
from minipt.models.registry import Preset
from minipt.recipes import char_lm

TINY = Preset(model=dict(block_size=16, n_layer=1, n_head=2, d_model=16), batch_size=4,
              train=dict(steps=6, lr=3e-3, min_lr=3e-4, warmup=1, weight_decay=0.1, eval_every=3, eval_batches=2,
                         grad_clip=1.0), data=dict(n_tokens=4000))
RUN_FILES = ("checkpoint.npz", "tokenizer.json", "metrics.jsonl", "report.json", "loss.png")
EXPORT_FILES = ("config.json", "model.safetensors", "minipt_tokenizer.json")
SAMPLE = ["--prompt", "the ", "--max-new-tokens", "6", "--temperature", "0"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A tiny run stopped by Ctrl-C at step 2 of 6 (so it can be resumed), its export,
    and what sample, export and resume give when nothing is damaged."""
    mp = pytest.MonkeyPatch()
    entry = registry.get("gpt")
    mp.setitem(registry._REGISTRY, "gpt", dataclasses.replace(entry, presets={"toy": TINY}))
    mp.setattr(train_module, "plot_history", lambda history, path, oracle=None: path.write_bytes(b"\x89PNG fake") and path)
    root = tmp_path_factory.mktemp("damage")
    run, hf = root / "run", root / "hf"
    real = char_lm.train
    mp.setattr(char_lm, "train", lambda *a, **kw: real(*a, **{**kw, "callback": lambda s, r: s == 2 and os.kill(
        os.getpid(), signal.SIGINT)}))
    assert main(["train", "gpt", "--out", str(run)]) == 130
    mp.setattr(char_lm, "train", real)
    assert main(["export", "--checkpoint", str(run), "--to", str(hf)]) == 0
    base = {"sample": outcome(["sample", "--checkpoint", str(run), *SAMPLE], run),
            "hf": outcome(["sample", "--hf", str(hf), *SAMPLE], hf),
            "export": outcome(["export", "--checkpoint", str(run), "--to", str(root / "hf0")], root / "hf0")}
    copy = root / "resumed"
    shutil.copytree(run, copy)
    base["resume"] = outcome(["train", "gpt", "--out", str(copy), "--resume"], copy)
    yield run, hf, root, base
    mp.undo()


def outcome(argv, folder):
    """(exit code, what the command produced): stdout for sample, the files for export,
    the final parameters for a resumed run."""
    import io
    from contextlib import redirect_stderr, redirect_stdout
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main(argv)
    except BaseException as e:                       # a traceback is exactly what must not happen
        raise AssertionError(f"{argv[0]} raised {type(e).__name__}: {e}") from e
    if code != 0:
        return code, err.getvalue()
    if argv[0] == "sample":
        return 0, out.getvalue().splitlines()[-1]
    if argv[0] == "export":
        return 0, {p.name: p.read_bytes() for p in sorted(folder.iterdir())}
    params = load_checkpoint(folder / "checkpoint.npz").params
    return 0, {k: v.tobytes() for k, v in params.items()}


def damage(path, rng, flips: bool = True):
    data = bytearray(path.read_bytes())
    how = rng.choice(["flip", "flip", "flip", "truncate", "empty", "foreign"] if flips else
                     ["truncate", "truncate", "empty", "foreign"])
    if how == "flip" and data:
        i = int(rng.integers(len(data)))
        data[i] ^= int(rng.integers(1, 256))
    elif how == "truncate":
        data = data[: int(rng.integers(len(data)))]
    elif how == "empty":
        data = bytearray()
    else:
        data = bytearray(rng.choice([pickle.dumps({"weights": [1, 2]}), b'{"class": "CharTokenizer"}',
                                     b"PK\x03\x04" + bytes(40), "naïve text\n".encode()]))
    path.write_bytes(bytes(data))
    return how


CASES = [("sample", f) for f in RUN_FILES] + [("export", f) for f in RUN_FILES] + \
        [("resume", f) for f in RUN_FILES] + [("hf", f) for f in EXPORT_FILES]


@pytest.mark.parametrize("command,name", CASES)
def test_damaged_file_is_a_one_line_message_or_harmless(world, tmp_path, command, name):
    run, hf, root, base = world
    rng = np.random.default_rng(1000 + CASES.index((command, name)))
    trials = 3 if command == "resume" else 6
    for trial in range(trials):
        folder = tmp_path / f"t{trial}"
        shutil.copytree(hf if command == "hf" else run, folder)
        how = damage(folder / name, rng, flips=command != "hf")
        argv = {"sample": ["sample", "--checkpoint", str(folder), *SAMPLE],
                "hf": ["sample", "--hf", str(folder), *SAMPLE],
                "export": ["export", "--checkpoint", str(folder), "--to", str(tmp_path / f"hf{trial}")],
                "resume": ["train", "gpt", "--out", str(folder), "--resume"]}[command]
        code, got = outcome(argv, tmp_path / f"hf{trial}" if command == "export" else folder)
        where = f"{command} with {name} damaged ({how}, trial {trial})"
        if code == 0:
            assert got == base[command][1], f"{where}: exit 0 but a different result"
            continue
        assert code == 2, f"{where}: exit {code}"
        lines = [l for l in got.replace("\r", "\n").splitlines() if l.startswith("minipt ")]
        assert len(lines) == 1 and "Traceback" not in got, f"{where}: {got!r}"
        assert name in lines[0] or (name == "model.safetensors" and "safetensors" in lines[0]), \
            f"{where}: the message does not name the file: {lines[0]}"


def test_a_tokenizer_edited_into_valid_json_is_caught_by_its_checksum(world, tmp_path, capsys):
    run, hf, root, base = world
    folder = tmp_path / "run"
    shutil.copytree(run, folder)
    text = (folder / "tokenizer.json").read_text()
    tokens = json.loads(text)["tokens"]
    new = next(c for c in "zqxjZQXJ" if c not in tokens)
    swapped = next(t for t in tokens if t.isalpha())
    (folder / "tokenizer.json").write_text(text.replace(f'"{swapped}"', f'"{new}"', 1))   # still a valid tokenizer
    for argv in (["sample", "--checkpoint", str(folder), *SAMPLE], ["train", "gpt", "--out", str(folder), "--resume"]):
        assert main(argv) == 2
        assert "tokenizer.json does not match" in capsys.readouterr().err
