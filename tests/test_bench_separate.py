"""benchmarks/separate.py: each side of a training benchmark timed in its own process."""
import os

import pytest

TINY = (32, 1, 2, 16, 8, 2)            # bench_gpt's V, L, H, d, T, B


@pytest.fixture
def separate(bench_script):
    return bench_script("separate")


def test_rounds_time_each_side_in_its_own_process(separate, capsys):
    times = separate.rounds("bench_gpt", TINY, 16.0, sides=("minipt",), rounds=3, calls=2, gap=0.0, title="tiny")
    assert list(times) == ["minipt"] and len(times["minipt"]) == 3
    assert all(0 < t < 5 for t in times["minipt"])                  # seconds per step of a tiny model
    assert "tiny warm-up minipt (own process)" in capsys.readouterr().out


def test_a_failing_side_is_reported_by_name(separate):
    with pytest.raises(RuntimeError, match="the minipt process ended"):
        separate.rounds("bench_gpt", (32, 1, 3, 16, 8, 2), 16.0, sides=("minipt",), rounds=1, calls=1)  # d % H != 0


@pytest.fixture
def child_envs(separate, monkeypatch):
    """side -> (MINIPT_THREADS, --threads) of the environment each child process would get."""
    monkeypatch.delenv("MINIPT_THREADS", raising=False)
    monkeypatch.delenv("MINIPT_BENCH_THREADS", raising=False)
    seen = {}

    class Popen:
        def __init__(self, args, env, **kw):
            seen[args[3]] = (env.get("MINIPT_THREADS"), env.get("MINIPT_BENCH_THREADS"))
    monkeypatch.setattr(separate.subprocess, "Popen", Popen)
    return seen


def test_the_minipt_side_gets_a_fixed_thread_count_unless_the_policy_is_asked_for(separate, child_envs):
    separate._Child("bench_gpt", "minipt", TINY, 1.0, policy=False)
    separate._Child("bench_gpt", "torch", TINY, 1.0, policy=False)
    assert child_envs == {"minipt": (str(len(os.sched_getaffinity(0))), None), "torch": (None, None)}
    separate._Child("bench_gpt", "minipt", TINY, 1.0, policy=True)
    assert child_envs["minipt"] == (None, None)


def test_threads_option_reaches_both_sides(separate, child_envs, monkeypatch):
    import harness

    from minipt.kernels import threads
    monkeypatch.setenv(harness.THREADS_ENV, "1")
    separate._Child("bench_gpt", "minipt", TINY, 1.0, policy=True)
    separate._Child("bench_gpt", "torch", TINY, 1.0, policy=True)
    assert child_envs == {"minipt": ("1", "1"), "torch": (None, "1")}
    with harness.minipt_threads():                              # the one-process mode
        import numba
        assert threads.blas_threads() == 1 and numba.get_num_threads() == 1
    monkeypatch.delenv("MINIPT_BATCH_PARTS", raising=False)
    assert harness.sides_note() == ", 1 thread per side, minipt's stacks whole"


def test_batch_parts_option_reaches_the_minipt_process(separate, monkeypatch):
    import harness
    monkeypatch.setenv("MINIPT_BATCH_PARTS", "1")                # restored after the test
    monkeypatch.setenv("MINIPT_PART_WORKERS", "processes")
    seen = {}

    class Popen:
        def __init__(self, args, env, **kw):
            seen[args[3]] = env.get("MINIPT_BATCH_PARTS"), env.get("MINIPT_PART_WORKERS")
    monkeypatch.setattr(separate.subprocess, "Popen", Popen)
    harness.set_batch_parts(2)
    separate._Child("bench_gpt", "minipt", TINY, 1.0, policy=False)
    assert seen == {"minipt": ("2", "processes")}
    assert harness.sides_note() == ", minipt's stacks in 2 batch parts on worker processes"
    harness.set_batch_parts(2, "threads")
    separate._Child("bench_gpt", "minipt", TINY, 1.0, policy=False)
    assert seen == {"minipt": ("2", "threads")}
    assert harness.sides_note() == ", minipt's stacks in 2 batch parts on threads"
    with pytest.raises(ValueError, match="--batch-parts must be >= 1"):
        harness.set_batch_parts(0)
