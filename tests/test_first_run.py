"""A first run on a fresh clone: one line says the kernels are compiling, and the
progress bar shows no rate or ETA until the first step (which compiles) has run."""
import io
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest

from minipt import kernels
from minipt.progress import progress_bar


def test_the_bar_shows_no_eta_before_the_first_step_and_times_from_its_end():
    out = io.StringIO()
    bar = progress_bar(1000, 0, file=out, mininterval=0, dynamic_ncols=False)
    shown = lambda: out.getvalue().split("\r")[-1]             # noqa: E731  the latest render
    assert "?" not in shown() and "<" not in shown() and "/s" not in shown()
    time.sleep(1.0)                                            # a first step that compiles
    bar.update(1)
    assert "1/1000" in shown() and "<" not in shown() and "/s" not in shown()
    bar.first_step_done()
    for _ in range(5):                                         # fast steps after it
        time.sleep(0.01)
        bar.update(1)
    eta = re.search(r"<(\d+):(\d+)", shown())
    assert eta and "step/s" in shown(), shown()
    # 994 steps at ~0.01 s: seconds, not the 1.05 s / 6 steps of the run so far (~3 minutes)
    assert int(eta[1]) * 60 + int(eta[2]) < 60, shown()
    bar.close()


RUN = textwrap.dedent("""
    import numpy as np
    from minipt.models.classic.nnlm import NNLM
    from minipt.train import TrainConfig, train
    data = np.random.default_rng(0).integers(0, 7, (4, 9))
    model = NNLM(7, order=3, dim=4, hidden=8, rng=np.random.default_rng(0))
    train(model, lambda split, rng: (data[:, :-1], data[:, 1:]), TrainConfig(steps=3, warmup=0, eval_every=0))
""")


@pytest.mark.skipif(not kernels.ENABLED, reason="MINIPT_NUMBA=0")
def test_a_cold_kernel_cache_prints_one_line_before_the_first_step_and_a_warm_one_none(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    err = [subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True, env=env,
                          check=True).stderr for _ in ("cold", "warm")]
    note = "compiling Numba kernels for this machine"
    assert err[0].count(note) == 1 and note not in err[1], err
    assert err[0].index(note) < err[0].index("1/3")            # before the first step is shown done
    assert f"up to about {kernels.FIRST_COMPILE_SECONDS} s" in err[0]
    assert "?" not in err[0] + err[1]                          # no "?" ETA placeholder in either run
    assert "3/3" in err[1] and "step/s" in err[1]              # the rate once the first step is done
