"""benchmarks/bench_prefetch.py compares each norm kernel with the same loop without its
hints, and benchmarks/kernels_in_step.py times kernels inside steps and alone: the plain
copy has no hint and the same bits, and the in-step table lists the step's kernels."""
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from minipt import kernels
from minipt.kernels import layernorm

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
pytestmark = pytest.mark.skipif(not kernels.ENABLED, reason="MINIPT_NUMBA=0")


@pytest.fixture
def bench_prefetch(bench_script):
    return bench_script("bench_prefetch")


def _hints(dispatcher) -> int:
    sig = dispatcher.signatures[0]
    return len(re.findall(r"call void @llvm\.prefetch", dispatcher.inspect_llvm(sig)))


def test_the_plain_copy_has_no_hint_and_the_same_bits(bench_prefetch):
    rng = np.random.default_rng(0)
    x, dy = rng.standard_normal((64, 48), dtype=np.float32), rng.standard_normal((64, 48), dtype=np.float32)
    g, b = rng.standard_normal(48, dtype=np.float32), rng.standard_normal(48, dtype=np.float32)
    forward, backward = (bench_prefetch.without_hints(k) for k in (layernorm.layer_norm_forward,
                                                                   layernorm.layer_norm_backward))
    y, mean, rstd = forward(x, g, b, 1e-5)
    for got, want in zip((y, mean, rstd), layernorm.layer_norm_forward(x, g, b, 1e-5)):
        assert np.array_equal(got, want)
    for got, want in zip(backward(dy, x, mean, rstd, g), layernorm.layer_norm_backward(dy, x, mean, rstd, g)):
        assert np.array_equal(got, want)
    assert _hints(forward) == 0 and _hints(backward) == 0


@pytest.mark.slow
def test_kernels_in_step_lists_the_steps_kernels():
    done = subprocess.run([sys.executable, str(BENCH / "kernels_in_step.py"), "gpt", "S", "--steps", "2",
                           "--batch-parts", "1"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()[2:] if line.strip()}
    # the stacks whole, every kernel runs on the caller's thread: norms, GELU, attention, loss, AdamW
    for name in ("layer_norm_forward", "layer_norm_backward", "gelu_tanh_forward", "blas_attention_forward",
                 "cross_entropy", "adam_update_all", "all"):
        assert name in rows, f"{name} missing from:\n{done.stdout}"
    calls, in_steps, replayed = int(rows["layer_norm_forward"][0]), *map(float, rows["layer_norm_forward"][1:3])
    assert calls == 5 and in_steps > 0 and replayed > 0     # 2 blocks' 2 each, and the final one
