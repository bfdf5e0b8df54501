"""The training loop's progress bar and its first-run line (``train.py`` uses both).

The first step of a first run compiles the Numba kernels (a cold cache, ``kernels``): the
bar shows no rate or ETA until that step is done, and one line says what is happening.
"""
from __future__ import annotations

import sys
import time

from . import kernels

NO_ETA = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"   # tqdm's format, less rate and ETA


def progress_bar(total: int, initial: int, **options):
    """tqdm's bar whose rate and ETA count from the end of the run's first step, and are
    shown only from then on. The first step compiles the Numba kernels on a first run (a
    cold cache): from it, tqdm estimated 47 minutes for a run that takes 20 s. ``options``
    go to tqdm (``file``, ``mininterval``)."""
    from tqdm.auto import tqdm

    class StepBar(tqdm):
        timed_from = None                      # (steps, seconds elapsed) when the first step ended

        def first_step_done(self) -> None:
            self.timed_from = (self.n, time.time() - self.start_t)

        @property
        def format_dict(self):
            d = super().format_dict
            if self.timed_from is None or d["n"] <= self.timed_from[0] or d["elapsed"] <= self.timed_from[1]:
                d.update(bar_format=NO_ETA, rate=None)
            else:
                d["rate"] = (d["n"] - self.timed_from[0]) / (d["elapsed"] - self.timed_from[1])   # steps/s
            return d

    return StepBar(total=total, initial=initial, **{"desc": "train", "unit": "step", "dynamic_ncols": True,
                                                     "mininterval": 0.5, **options})


def compile_note(bar) -> None:
    """The line printed when the first step starts compiling kernels (a first run)."""
    line = (f"compiling Numba kernels for this machine, up to about {kernels.FIRST_COMPILE_SECONDS} s: "
            "on the first run only (they are cached)")
    if bar is not None:
        bar.write(line, file=sys.stderr)
    else:
        print(line, file=sys.stderr, flush=True)
