"""The task model on frozen features: gradcheck through the scalar mix and the classifier,
and a probe that must find the one informative layer."""
import numpy as np
import pytest

from minipt.core.gradcheck import check_module
from minipt.tasks.probe import TokenProbe, fit_probe


def test_probe_gradcheck_through_the_scalar_mix():
    r = np.random.default_rng(0)
    probe = TokenProbe(3, 4, 5, rng=r, dtype=np.float64)
    probe.mix.params["weights"][...] = r.standard_normal(3)
    layers = [r.standard_normal((6, 4)) for _ in range(3)]
    labels = r.integers(0, 5, 6)
    res = check_module(probe, layers, labels, select=lambda out: out[0])
    assert res.passed, str(res)
    assert {a.name for a in res.arrays} == {"mix.weights", "mix.gamma", "classifier.weight", "classifier.bias"}


def test_probe_learns_to_weight_the_informative_layer():
    r = np.random.default_rng(1)
    y = r.integers(0, 2, 400)
    noise = [r.standard_normal((400, 3)) for _ in range(2)]
    signal = r.standard_normal((400, 3)) * 0.3
    signal[:, 0] += 2.0 * y - 1.0                             # only layer 2 knows the label
    layers = noise + [signal]
    acc, probe = fit_probe([l[:300] for l in layers], y[:300], [l[300:] for l in layers], y[300:])
    assert acc > 0.9 and np.argmax(probe.mix.mix()) == 2
    with pytest.raises(ValueError, match="at least one training"):
        fit_probe([l[:0] for l in layers], y[:0], layers, y)
