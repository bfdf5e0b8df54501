"""benchmarks/parts.py: minipt's profile split into parts by the file (and function) that
spent the time, found by profiling real ops, not by naming keys by hand."""
import numpy as np
import pytest


@pytest.fixture
def parts(bench_script):
    return bench_script("parts")


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


def test_a_shared_helper_goes_to_its_callers_by_the_time_spent_under_each(parts):
    """NumPy's reduce under its Python wrapper, called once by a linear (a large sum) and
    once by a norm (a small one): its time is split 8:1 by the time under each caller, not
    half and half by the wrapper's own (equal) time per call."""
    reduce_, wrapper = ("~", 0, "<method 'reduce' of 'numpy.ufunc' objects>"), ("numpy/_methods.py", 1, "_sum")
    linear, norm = ("minipt/ops/linear.py", 1, "linear_backward"), ("minipt/ops/norms.py", 1, "layer_norm_backward")
    stats = {  # key: (calls, primitive calls, tottime, cumtime, {caller: (calls, prim, tottime, cumtime)})
        reduce_: (2, 2, 9.0, 9.0, {wrapper: (2, 2, 9.0, 9.0)}),
        wrapper: (2, 2, 0.2, 9.2, {linear: (1, 1, 0.1, 8.1), norm: (1, 1, 0.1, 1.1)}),
        linear: (1, 1, 1.0, 9.1, {}),
        norm: (1, 1, 1.0, 2.1, {}),
    }
    split = parts.split_profile(stats, steps=1)
    assert split["matmuls"] == pytest.approx(1.0 + 9.2 * 8.1 / 9.2)
    assert split["norms"] == pytest.approx(1.0 + 9.2 * 1.1 / 9.2)
    assert split["glue"] == 0.0


def test_relu_and_cross_entropy_kernels_in_parts_on_threads_count_as_their_own_parts(parts):
    """Both run their rows through ``threads.in_parts`` (one shared Python helper). ReLU's
    kernel is activations and the fused cross-entropy's is loss, each all of its time: ReLU
    here takes several times the loss's, and none of it leaks into loss."""
    from minipt.ops.activations import relu_forward
    from minipt.ops.cross_entropy import cross_entropy_forward
    r = np.random.default_rng(2)
    x = r.standard_normal(1 << 23, dtype=np.float32)
    z, t = r.standard_normal((1024, 512), dtype=np.float32), r.integers(0, 512, 1024)

    def step():
        relu_forward(x)
        cross_entropy_forward(z, t)
    step()
    split = parts.minipt_parts(step, steps=5)
    total = sum(split.values())
    assert split["activations"] > 0.6 * total and split["activations"] > 3 * split["loss"] > 0, split
    assert split["glue"] < 0.1 * total, split


def test_parts_are_medians_over_rounds_so_one_slow_round_moves_none(parts):
    """15 profiled steps are 5 rounds of 3, each after a step unprofiled; a round with a
    0.1 s stall (glue: no op of minipt's spent it) leaves the median glue where it was."""
    import time

    from minipt.ops.linear import linear_forward
    r = np.random.default_rng(3)
    x, w = r.standard_normal((256, 64), dtype=np.float32), r.standard_normal((64, 64), dtype=np.float32)
    calls = []

    def step():
        calls.append(1)
        linear_forward(x, w, None)
        if len(calls) == 6:                                # the second round's first profiled step
            time.sleep(0.1)
    split = parts.compare(None, step, None, steps=15)
    assert len(calls) == 5 * (1 + 3) and split["rounds"] == 5 and "torch" not in split
    assert split["minipt"]["glue"] < 0.003, split          # a mean would hold 0.1 / 15 s


def test_every_kernel_module_the_ops_call_is_named_by_a_rule(parts):
    """A kernel module the ops call from Python (``minipt.kernels.KERNELS``) is named by a
    rule, so its time counts where its op is even when a shared helper (``threads.in_parts``,
    ``threads.elementwise``) sits between (vgelu.py was left out once and its time went
    elsewhere). Left out on purpose: softmax (ops/softmax.py is a helper of attention and
    others, and takes its callers' parts) and the models no training benchmark runs."""
    from minipt import kernels
    unnamed = {"softmax", "word2vec", "lstm"}
    modules = {entry.split(":")[0] for entry in kernels.KERNELS.values()} - unnamed
    named = {m for m in modules if parts._rule(parts.MINIPT_RULES, f"minipt/kernels/{m}.py:f")}
    assert named == modules, sorted(modules - named)
