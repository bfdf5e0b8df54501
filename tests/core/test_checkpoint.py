"""Checkpoints: bitwise round trips, atomic writes, and clear refusals of foreign files."""
import json
import os
import pickle
import zipfile

import numpy as np
import pytest

from minipt.core.checkpoint import load_checkpoint, save_checkpoint
from minipt.core.module import Module
from minipt.nn.linear import Linear
from minipt.optim import SGD, AdamW


class Net(Module):
    def __init__(self, hidden=4, seed=0):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.fc1 = Linear(3, hidden, rng=rng)
        self.fc2 = Linear(hidden, 2, rng=rng)


def set_grads(model, rng):
    for _, g in model.named_grads():
        g[...] = rng.standard_normal(g.shape)


def trained(opt_cls=AdamW, **kw):
    m = Net()
    opt = opt_cls(m, lr=1e-2, **kw)
    rng = np.random.default_rng(1)
    for _ in range(3):
        set_grads(m, rng)
        opt.step()
    return m, opt


def files(folder):
    return sorted(os.listdir(folder))


@pytest.mark.parametrize("opt_cls,kw", [(AdamW, {}), (SGD, dict(momentum=0.9, nesterov=True))])
def test_roundtrip_is_bitwise_and_the_next_step_agrees(tmp_path, opt_cls, kw):
    m, opt = trained(opt_cls, **kw)
    gen = np.random.default_rng(7)
    gen.random(5)
    path = save_checkpoint(tmp_path / "c.npz", m, config={"hidden": 4, "name": "net"}, optimizer=opt,
                           extra={"step": np.int64(3), "rng": gen.bit_generator.state})
    assert files(tmp_path) == ["c.npz"]

    ck = load_checkpoint(path)
    assert ck.config == {"hidden": 4, "name": "net"} and ck.extra["step"] == 3
    m2 = Net(seed=5)
    opt2 = opt_cls(m2, lr=1.0, **kw)
    ck.restore(m2, opt2)
    for (n, a), (_, b) in zip(m.named_parameters(), m2.named_parameters()):
        assert b.dtype == np.float32 and np.array_equal(a, b), n
    assert (opt2.t, opt2.lr) == (opt.t, opt.lr)
    assert opt2.state.keys() == opt.state.keys()
    for slot in opt.state:
        for n, a in opt.state[slot].items():
            assert opt2.state[slot][n].dtype == np.float32 and np.array_equal(a, opt2.state[slot][n])

    gen2 = np.random.default_rng()
    gen2.bit_generator.state = ck.extra["rng"]
    assert np.array_equal(gen2.random(3), gen.random(3))

    rng_a, rng_b = np.random.default_rng(9), np.random.default_rng(9)
    for model, o, rng in ((m, opt, rng_a), (m2, opt2, rng_b)):
        set_grads(model, rng)
        o.step()
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(m.named_parameters(), m2.named_parameters()))


def test_archive_layout_and_no_pickle(tmp_path):
    m, opt = trained()
    path = save_checkpoint(tmp_path / "c.npz", m, config={}, optimizer=opt)
    with np.load(path, allow_pickle=False) as z:
        assert sorted(k for k in z.files if k.startswith("param/")) == \
            sorted(f"param/{n}" for n, _ in m.named_parameters())
        assert "optim/m/fc1.weight" in z.files and "optim/v/fc2.bias" in z.files
        meta = json.loads(z["__meta__"].tobytes().decode())
    assert meta["optimizer"] == {"t": 3, "lr": 1e-2, "type": "AdamW"}
    assert os.stat(path).st_mode & 0o777 == 0o644            # not mkstemp's 0600


def test_model_only_checkpoint(tmp_path):
    m, _ = trained()
    ck = load_checkpoint(save_checkpoint(tmp_path / "sub" / "c.npz", m, config={}))
    assert ck.optimizer is None
    ck.restore(Net(seed=3))
    with pytest.raises(ValueError, match="no optimiser state"):
        ck.restore(Net(), AdamW(Net()))


def test_failed_save_keeps_the_old_checkpoint_and_no_temp_file(tmp_path, monkeypatch):
    m, opt = trained()
    path = save_checkpoint(tmp_path / "c.npz", m, config={"v": 1}, optimizer=opt)
    before = path.read_bytes()
    real_savez = np.savez

    def dies_half_way(file, **arrays):            # writes part of an archive, then the "power fails"
        real_savez(file, **dict(list(arrays.items())[:2]))
        raise OSError("No space left on device")
    monkeypatch.setattr(np, "savez", dies_half_way)
    with pytest.raises(OSError, match="No space"):
        save_checkpoint(path, m, config={"v": 2}, optimizer=opt)
    assert path.read_bytes() == before and files(tmp_path) == ["c.npz"]

    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(np, "savez", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, m, config={"v": 3})
    assert path.read_bytes() == before and files(tmp_path) == ["c.npz"]
    assert load_checkpoint(path).config == {"v": 1}


def test_config_must_be_json(tmp_path):
    m, _ = trained()
    with pytest.raises(TypeError, match="JSON-able.*ndarray"):
        save_checkpoint(tmp_path / "c.npz", m, config={"w": np.zeros(3)})
    with pytest.raises(TypeError, match="config must be a dict"):
        save_checkpoint(tmp_path / "c.npz", m, config=[1, 2])
    with pytest.raises(ValueError, match="must end in .npz, got c.pt"):
        save_checkpoint(tmp_path / "c.pt", m, config={})
    assert files(tmp_path) == []


@pytest.mark.parametrize("name", ["model.npz", "pytorch_model.bin"])
def test_pickle_file_is_refused(tmp_path, name):
    bad = tmp_path / name
    with open(bad, "wb") as f:
        pickle.dump({"fc1.weight": np.zeros(3)}, f)
    with pytest.raises(ValueError, match="is a pickle file.*only .npz checkpoints written by .*save_checkpoint"):
        load_checkpoint(bad)


def test_torch_zip_archive_is_refused(tmp_path):
    bad = tmp_path / "model.bin"                   # the layout torch.save has used since 1.6
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps({"w": 1}))
        z.writestr("archive/data/0", b"\0" * 16)
    with pytest.raises(ValueError, match="PyTorch .* pickle.*save_checkpoint"):
        load_checkpoint(bad)


def test_object_array_inside_an_npz_is_refused(tmp_path):
    m, _ = trained()
    path = save_checkpoint(tmp_path / "c.npz", m, config={})
    with np.load(path) as z:
        arrays = dict(z)
    arrays["param/fc1.bias"] = np.array([{"x": 1}], dtype=object)    # needs pickle to load
    np.savez(tmp_path / "evil.npz", **arrays)
    with pytest.raises(ValueError, match="without pickle"):
        load_checkpoint(tmp_path / "evil.npz")


def test_missing_folder_and_foreign_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint at .*missing.npz"):
        load_checkpoint(tmp_path / "missing.npz")
    with pytest.raises(IsADirectoryError, match="is a folder"):
        load_checkpoint(tmp_path)
    np.savez(tmp_path / "plain.npz", a=np.zeros(2))
    with pytest.raises(ValueError, match="npz file but not a minipt checkpoint"):
        load_checkpoint(tmp_path / "plain.npz")
    (tmp_path / "t.npz").write_text("hello")
    with pytest.raises(ValueError, match="not an .npz archive"):
        load_checkpoint(tmp_path / "t.npz")
    m, _ = trained()
    whole = save_checkpoint(tmp_path / "c.npz", m, config={}).read_bytes()
    (tmp_path / "cut.npz").write_bytes(whole[: len(whole) // 2])    # a copy that was cut short
    with pytest.raises(ValueError, match="damaged or incomplete"):
        load_checkpoint(tmp_path / "cut.npz")


def test_other_shape_names_the_first_mismatching_parameter(tmp_path):
    m, opt = trained()
    path = save_checkpoint(tmp_path / "c.npz", m, config={}, optimizer=opt)
    other = Net(hidden=5)
    before = other.state_dict()
    with pytest.raises(ValueError, match=r"fc1.weight: model has shape \(5, 3\), state dict has \(4, 3\)"):
        load_checkpoint(path).restore(other, AdamW(other))
    assert all(np.array_equal(p, before[n]) for n, p in other.named_parameters())   # untouched


def test_missing_parameter_is_named(tmp_path):
    path = save_checkpoint(tmp_path / "c.npz", Linear(3, 4, rng=np.random.default_rng(0)), config={})
    with pytest.raises(KeyError, match="fc1.weight .* is missing"):
        load_checkpoint(path).restore(Net())


def test_wrong_optimiser_leaves_the_model_untouched(tmp_path):
    m, opt = trained(AdamW)
    path = save_checkpoint(tmp_path / "c.npz", m, config={}, optimizer=opt)
    fresh = Net(seed=4)
    before = fresh.state_dict()
    with pytest.raises(ValueError, match="optimiser state is for AdamW, not SGD"):
        load_checkpoint(path).restore(fresh, SGD(fresh, lr=0.1, momentum=0.9))
    assert all(np.array_equal(p, before[n]) for n, p in fresh.named_parameters())
