"""Each Numba kernel against its plain NumPy twin in minipt.ops: float32 within 1e-5
relative, float64 within 1e-12, dtype kept; and MINIPT_NUMBA=0 switches them all off."""
import os
import subprocess
import sys

import numpy as np
import pytest

from minipt import kernels
from minipt.ops.activations import gelu_tanh_backward_numpy, gelu_tanh_forward_numpy
from minipt.ops.embedding import embedding_backward_numpy
from minipt.ops.norms import layer_norm_backward_numpy, layer_norm_forward_numpy
from minipt.ops.softmax import softmax_backward_numpy

TOL = {np.float32: 1e-5, np.float64: 1e-12}
SHAPES = [(1, 5), (7, 13), (64, 192)]
pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="MINIPT_NUMBA=0")


def close(got, want, dtype):
    assert got.dtype == dtype, f"kernel returned {got.dtype}, expected {dtype}"
    scale = max(np.abs(want).max(), 1e-30)
    err = np.abs(got.astype(np.float64) - want.astype(np.float64)).max() / scale
    assert err <= TOL[dtype], f"max error {err:.2e} relative to the largest value > {TOL[dtype]}"


def data(shape, dtype, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_layer_norm(shape, dtype):
    x, dy = data(shape, dtype) * 3 + 1, data(shape, dtype, 1)
    g, b = data(shape[1], dtype, 2), data(shape[1], dtype, 3)
    got = kernels.get("layer_norm_forward")(x, g, b, 1e-5)
    want = layer_norm_forward_numpy(x, g, b, 1e-5)
    for a, w in zip(got, want):
        close(a, w, dtype)
    got = kernels.get("layer_norm_backward")(dy, x, want[1], want[2], g)
    for a, w in zip(got, layer_norm_backward_numpy(dy, x, want[1], want[2], g)):
        close(a, w, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 31, 4096])
def test_gelu_tanh(n, dtype):
    x, dy = data(n, dtype) * 3, data(n, dtype, 1)
    close(kernels.get("gelu_tanh_forward")(x), gelu_tanh_forward_numpy(x), dtype)
    close(kernels.get("gelu_tanh_backward")(dy, x), gelu_tanh_backward_numpy(dy, x), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_softmax_backward(shape, dtype):
    z = data(shape, dtype)
    y = (np.exp(z) / np.exp(z).sum(1, keepdims=True)).astype(dtype)
    dy = data(shape, dtype, 1)
    close(kernels.get("softmax_backward")(dy, y), softmax_backward_numpy(dy, y), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_embedding_scatter_add_repeated_ids_into_existing(dtype):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 7, 300).astype(np.int64)             # many repeats
    dy = data((300, 11), dtype)
    start = data((7, 11), dtype, 5)
    got, want = start.copy(), start.copy()
    kernels.get("embedding_backward")(ids, dy, got)
    embedding_backward_numpy(ids, dy, want)
    close(got, want, dtype)


def test_minipt_numba_0_turns_every_kernel_off():
    code = ("from minipt import kernels; "
            "print(kernels.ENABLED, [kernels.get(k) for k in kernels.KERNELS])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "MINIPT_NUMBA": "0"}).stdout
    assert out.strip() == "False " + str([None] * len(kernels.KERNELS))
