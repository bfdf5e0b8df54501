"""The one rule for an ``--out`` folder, shared by every recipe: never clobber a run.

A folder that already holds a run's files is refused unless the user says
``--resume`` (continue it) or ``--overwrite`` (replace those files; anything else in the
folder stays). ``check_out`` runs before anything is read or written;
``clear_run_files`` only once every other check has passed.
"""
from __future__ import annotations

from pathlib import Path


def check_out(out: Path, files: tuple[str, ...], *, resume: bool, overwrite: bool, can_resume: bool = True) -> None:
    """Refuse conflicting flags, a resume of what cannot be resumed, and a held run."""
    if resume and overwrite:
        raise ValueError("--resume continues the run in --out and --overwrite replaces it: give one of them")
    if resume and not can_resume:
        raise ValueError("--resume: this model trains in one short pass; there is nothing to resume "
                         "(use --overwrite to train it again into the same --out)")
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"--out {out} is a file; --out names the folder of a run")
    held = [f for f in files if (out / f).exists()]
    if held and not (resume or overwrite):
        raise FileExistsError(f"--out {out} already holds a run ({', '.join(held)}); continue it with --resume, "
                              "replace it with --overwrite, or give another --out")


def clear_run_files(out: Path, files: tuple[str, ...]) -> None:
    """Remove the old run's ``files`` (and nothing else) before a new run is written."""
    for f in files:
        (out / f).unlink(missing_ok=True)
