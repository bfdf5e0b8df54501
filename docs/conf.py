"""Sphinx configuration of the book's website: `lessons/` as static HTML.

Built from the repository root with this folder as the configuration directory::

    sphinx-build -c docs . build/site

MyST-NB renders the committed notebooks as they are (``nb_execution_mode = "off"``:
nothing is re-executed, the figures are the committed outputs). The home page,
``docs/index.md``, gets its table of contents from ``lessons/README.md``'s table, so the
book's order is written once. A cell tagged ``checks`` (a lesson's asserts and
``lesson_budget.stated`` calls, nothing a reader needs) is left out of the page: the hook
below gives it MyST-NB's ``remove-cell`` tag. The notebook keeps it.
"""
import json
import os
import re
from pathlib import Path

from sphinx.util import logging

ROOT = Path(__file__).resolve().parent.parent
LOGGER = logging.getLogger("minipt.docs")

project = "minipt"
author = "the minipt authors"
copyright = "the minipt authors"

extensions = ["myst_nb"]
root_doc = "docs/index"
include_patterns = ["docs/index.md", "README.md", "lessons/README.md", "lessons/*.ipynb"]
exclude_patterns = [".venv", ".git", "build", "runs", "**/.ipynb_checkpoints"]

nb_execution_mode = "off"            # the committed outputs are the book; nothing is re-run
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3             # `[see](#a-heading)` links resolve as on GitHub

html_theme = "sphinx_book_theme"
html_title = "minipt: the book"
html_theme_options = {"show_toc_level": 2}
html_extra_path = ["_extra"]         # index.html at the site's root, pointing at the home page
html_last_updated_fmt = None
html_copy_source = True              # the download button gives the notebook as committed


def repository_folders(root=ROOT):
    """The repository's folders (posix, relative to it), leaving out hidden and build ones."""
    found = []
    for here, dirs, _ in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")) and d not in ("build", "runs", "dist"))
        found += [Path(here, d).relative_to(root).as_posix() for d in dirs]
    return found


# A link to a folder (`[the models](minipt/models/)`) opens its listing on GitHub; the site
# has no page for it and shows the link's text. Only folders that exist: a broken one fails.
nitpick_ignore_regex = [("myst", rf"(\.\./)?{re.escape(folder)}/?") for folder in repository_folders()]

PART = re.compile(r"^\|\s*\*\*(?P<part>[^*]+)\*\*\s*\|")
LESSON = re.compile(r"^\|\s*\d+\s*\|\s*\[`?(?P<stem>\w+)`?\]\((?P=stem)\.ipynb\)")


def lesson_toctrees(readme=ROOT / "lessons" / "README.md"):
    """One MyST toctree per part of the book, in the order of lessons/README.md's table."""
    parts = []
    for line in readme.read_text(encoding="utf-8").splitlines():
        if m := PART.match(line):
            parts.append((m["part"], []))
        elif m := LESSON.match(line):
            if not parts:
                parts.append(("Lessons", []))
            parts[-1][1].append(m["stem"])
    if not any(stems for _, stems in parts):
        raise ValueError(f"{readme} has no table of lessons (rows like | 00 | [`00_x`](00_x.ipynb) | ...)")
    return "\n".join(f"```{{toctree}}\n:caption: {part}\n:maxdepth: 1\n\n"
                     + "".join(f"/lessons/{stem}\n" for stem in stems) + "```\n"
                     for part, stems in parts if stems)


CHECKS = "checks"                    # the project's tag for a lesson's checks cell


def hide_checks(notebook):
    """The notebook with MyST-NB's ``remove-cell`` added to every cell tagged ``checks``."""
    for cell in notebook["cells"]:
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        if CHECKS in tags and "remove-cell" not in tags:
            tags.append("remove-cell")
    return notebook


def unexecuted_cells(notebook):
    """Positions of the code cells without an execution count: a notebook not run."""
    return [i for i, c in enumerate(notebook["cells"])
            if c["cell_type"] == "code" and c.get("execution_count") is None]


def _on_source_read(app, docname, source):
    if docname == root_doc:
        source[0] = source[0].replace("<!-- lessons -->", lesson_toctrees())
    elif app.env.doc2path(docname).suffix == ".ipynb":
        notebook = json.loads(source[0])
        if missing := unexecuted_cells(notebook):
            LOGGER.warning("%s is not executed: its code cells %s have no execution count "
                           "(run scripts/execute_lessons.py)", docname, missing, location=docname)
        source[0] = json.dumps(hide_checks(notebook))


def setup(app):
    app.connect("source-read", _on_source_read)
    return {"parallel_read_safe": True}
