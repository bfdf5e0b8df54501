"""benchmarks/parts.py: minipt's profile split into parts by the file (and function) that
spent the time, found by profiling real ops, not by naming keys by hand."""
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture
def parts(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import parts
    return parts


def test_a_linear_forward_is_matmuls_on_the_tiles_or_not(parts):
    """A biased float32 linear large enough for the register tiles (minipt.kernels.tiles,
    also attention's GEMM) counts as matmuls, all of it, as it does on NumPy's matmul."""
    from minipt.ops.linear import linear_forward
    r = np.random.default_rng(0)
    x = r.standard_normal((1024, 128), dtype=np.float32)
    w, b = r.standard_normal((384, 128), dtype=np.float32), r.standard_normal(384, dtype=np.float32)
    for bias in (b, None):
        linear_forward(x, w, bias)                                    # compiled and checked before profiling
        split = parts.minipt_parts(lambda: linear_forward(x, w, bias), steps=20)
        assert split["matmuls"] > 0.9 * sum(split.values()), split
        assert split["attention"] == 0.0


def test_attention_counts_as_attention(parts):
    from minipt.ops.attention import attention_forward
    r = np.random.default_rng(1)
    q, k, v = (r.standard_normal((2, 2, 256, 32), dtype=np.float32) for _ in range(3))
    attention_forward(q, k, v)
    split = parts.minipt_parts(lambda: attention_forward(q, k, v), steps=5)
    assert split["attention"] > 0.9 * sum(split.values()), split
