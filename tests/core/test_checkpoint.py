import os
import pickle

import numpy as np
import pytest

from minipt.core.checkpoint import load_checkpoint, save_checkpoint
from minipt.nn import Linear
from minipt.optim import AdamW


def trained(seed=0):
    m = Linear(4, 3, rng=np.random.default_rng(seed))
    opt = AdamW(m, lr=1e-2)
    rng = np.random.default_rng(1)
    for _ in range(3):
        for _, g in m.named_grads():
            g[...] = rng.standard_normal(g.shape)
        opt.step()
    return m, opt


def test_roundtrip_is_bitwise_and_continues_identically(tmp_path):
    m, opt = trained()
    gen = np.random.default_rng(7)
    path = save_checkpoint(tmp_path / "c.npz", m, config={"d": 4}, optimizer=opt,
                           extra={"step": 3, "rng": gen.bit_generator.state})
    m2, opt2 = Linear(4, 3, rng=np.random.default_rng(99)), None
    opt2 = AdamW(m2, lr=1.0)
    ck = load_checkpoint(path)
    ck.restore(m2, opt2)
    assert ck.config == {"d": 4} and ck.extra["step"] == 3
    for (n, a), (_, b) in zip(m.named_parameters(), m2.named_parameters()):
        assert a.dtype == b.dtype == np.float32 and np.array_equal(a, b), n
    assert opt2.t == opt.t and opt2.lr == opt.lr
    for slot in opt.state:
        for n in opt.state[slot]:
            assert np.array_equal(opt.state[slot][n], opt2.state[slot][n])
    gen2 = np.random.default_rng()
    gen2.bit_generator.state = ck.extra["rng"]
    assert gen2.random() == gen.random()
    for model, o in ((m, opt), (m2, opt2)):
        for _, g in model.named_grads():
            g[...] = 0.5
        o.step()
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(m.named_parameters(), m2.named_parameters()))


def test_interrupted_save_keeps_the_old_checkpoint(tmp_path, monkeypatch):
    m, opt = trained()
    path = save_checkpoint(tmp_path / "c.npz", m, config={}, optimizer=opt)
    before = path.read_bytes()

    def boom(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(np, "savez", boom)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, m, config={"new": 1})
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["c.npz"]


def test_pickle_is_refused(tmp_path):
    bad = tmp_path / "model.npz"
    bad.write_bytes(pickle.dumps({"weight": np.zeros(3)}))
    with pytest.raises(ValueError, match="pickle"):
        load_checkpoint(bad)


def test_other_files_are_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_checkpoint(tmp_path / "missing.npz")
    np.savez(tmp_path / "plain.npz", a=np.zeros(2))
    with pytest.raises(ValueError, match="not a minipt checkpoint"):
        load_checkpoint(tmp_path / "plain.npz")
    (tmp_path / "t.npz").write_text("hello")
    with pytest.raises(ValueError, match="not an .npz"):
        load_checkpoint(tmp_path / "t.npz")


def test_shape_mismatch_names_the_parameter(tmp_path):
    m, _ = trained()
    path = save_checkpoint(tmp_path / "c.npz", m, config={})
    other = Linear(4, 5, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"weight: model has shape \(5, 4\), state dict has \(3, 4\)"):
        load_checkpoint(path).restore(other)
