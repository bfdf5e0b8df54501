"""The book as a website: ``sphinx-build -c docs . build/site`` renders lessons/ from the
committed outputs (docs/conf.py, MyST-NB with execution off).

The build runs with warnings as errors, so a missing image, a broken link or
cross-reference, or a notebook that was never executed (docs/conf.py warns on a code
cell without an execution count) fails it. Then every lesson has its page, in the order
of lessons/README.md, each page carries one image per figure of its notebook, every code
cell the reader should see is on the page, no cell tagged ``checks`` is, and every
link and image of every page points to a file of the site (the download button gives
the lesson's notebook as committed).
"""
import importlib.util
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "lessons").glob("[0-9][0-9]_*.ipynb"))
CHECKS = "checks"
IMAGES = ("image/png", "image/jpeg", "image/svg+xml", "image/gif")
MARKDOWN_IMAGE = re.compile(r"!\[[^\]]*\]\(")
TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*\|", re.MULTILINE)   # the |---|---| under a header
LINK_ELSEWHERE = re.compile(r"^(https?:|mailto:|#|data:|$)")           # not a file of the site
READER_OUTPUTS = ("stream", "display_data", "error")   # an execute_result is a check's echo


def _needs_sphinx():
    for module in ("sphinx", "myst_nb"):
        pytest.importorskip(module, reason=f"the website needs {module}: pip install -e '.[docs]'")


def _conf():
    _needs_sphinx()
    spec = importlib.util.spec_from_file_location("docs_conf", ROOT / "docs" / "conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    return conf


def _flat(text):
    return " ".join(text.split())


class _Page(HTMLParser):
    """A page's links, the sources of its images, and the code of each cell it shows
    (MyST-NB's ``cell_input`` blocks, whitespace collapsed)."""

    def __init__(self, path):
        super().__init__(convert_charrefs=True)
        self.images, self.links, self.code = [], [], []
        self._depth, self._code_at = 0, None              # <div> nesting; where a cell's code opened
        self.feed(path.read_text(encoding="utf-8"))
        self.code = [_flat(c) for c in self.code]

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img":
            self.images.append(attrs.get("src", ""))
        elif tag == "a":
            self.links.append(attrs.get("href", ""))
        elif tag == "div":
            self._depth += 1
            if self._code_at is None and "cell_input" in (attrs.get("class") or "").split():
                self._code_at = self._depth
                self.code.append("")

    def handle_endtag(self, tag):
        if tag == "div":
            if self._depth == self._code_at:
                self._code_at = None
            self._depth -= 1

    def handle_data(self, data):
        if self._code_at is not None:
            self.code[-1] += data


def _served(target):
    """A static host answers a link with this file, or with this folder's index.html."""
    return target.is_file() or (target / "index.html").is_file()


def _tags(cell):
    return cell.metadata.get("tags", [])


def _expected_images(nb):
    """Figures a page must show: image outputs of the cells it keeps, and markdown images."""
    count = 0
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            count += len(MARKDOWN_IMAGE.findall(cell.source))
        elif cell.cell_type == "code" and CHECKS not in _tags(cell) and "remove-output" not in _tags(cell):
            count += sum(any(m in o.get("data", {}) for m in IMAGES) for o in cell.outputs)
    return count


def _lesson_problems(nb, stem, page):
    problems = []
    code = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]      # i: the notebook's cell number
    if unrun := [i for i, c in code if c.execution_count is None]:
        problems.append(f"{stem}: cells {unrun} have no execution count (not executed)")
    figures = [src for src in page.images if "_images/" in src]
    if len(figures) != _expected_images(nb):
        problems.append(f"{stem}: the page shows {len(figures)} figures, the notebook has {_expected_images(nb)}")
    kept = [(i, c) for i, c in code if not {CHECKS, "remove-cell", "remove-input"} & set(_tags(c))]
    for i, cell in code:
        if CHECKS in _tags(cell) and _flat(cell.source) in page.code:
            problems.append(f"{stem}: cell {i}, tagged {CHECKS}, is on the page")
    if [_flat(c.source) for _, c in kept] != page.code:
        missing = [i for i, c in kept if _flat(c.source) not in page.code]
        problems.append(f"{stem}: the page shows {len(page.code)} code cells, not the notebook's {len(kept)} "
                        f"in order (missing: cells {missing})")
    return problems


@pytest.mark.slow
def test_the_site_builds_with_every_lesson_its_figures_and_no_checks(tmp_path):
    _needs_sphinx()
    out = tmp_path / "html"
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-c", "docs", "-n", "-W", "--keep-going", "-q",
           "-d", str(tmp_path / "doctrees"), ".", str(out)]
    build = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert build.returncode == 0, f"the site does not build (`{' '.join(cmd[2:])}`):\n{build.stderr[-6000:]}"

    home = _Page(out / "docs" / "index.html")
    assert (out / "index.html").exists() and (out / "README.html").exists()
    readme_tables = len(TABLE_RULE.findall((ROOT / "README.md").read_text(encoding="utf-8")))
    assert (out / "README.html").read_text(encoding="utf-8").count("<table") == readme_tables, \
        "the README's tables (the model table among them) are not all on the site"
    problems = []
    for page in out.rglob("*.html"):
        if "_static" not in page.parts:
            parsed = _Page(page)
            problems += [f"{page.relative_to(out)}: a link to {href}, which the site lacks"
                         for href in parsed.links + parsed.images
                         if not LINK_ELSEWHERE.match(href) and not _served(page.parent / href.split("#")[0])]
    for path in NOTEBOOKS:
        page = out / "lessons" / f"{path.stem}.html"
        if not page.exists():
            problems.append(f"{path.stem}: no page")
            continue
        if f"../lessons/{path.stem}.html" not in home.links:
            problems.append(f"{path.stem}: not in the home page's table of contents")
        problems += _lesson_problems(nbformat.read(path, as_version=4), path.stem, _Page(page))
    assert not problems, "\n".join(problems)


def test_a_checks_cell_shows_the_reader_nothing():
    """The site leaves a ``checks`` cell out, so it may print or draw nothing a reader needs."""
    shown = [f"{path.stem} cell {i}: {sorted({o.output_type for o in c.outputs} & set(READER_OUTPUTS))}"
             for path in NOTEBOOKS for i, c in enumerate(nbformat.read(path, as_version=4).cells)
             if CHECKS in _tags(c) and any(o.output_type in READER_OUTPUTS for o in c.outputs)]
    assert not shown, "cells tagged checks with output for the reader: " + "; ".join(shown)


def test_the_table_of_contents_follows_the_lessons_readme(tmp_path):
    conf = _conf()
    readme = tmp_path / "README.md"
    readme.write_text("| # | lesson |\n|---|---|\n| **Foundations** | |\n| 00 | [`00_a`](00_a.ipynb) |\n"
                      "| 01 | [`01_b`](01_b.ipynb) |\n| **Next** | |\n| 02 | [`02_c`](02_c.ipynb) |\n")
    toc = conf.lesson_toctrees(readme)
    assert toc.index(":caption: Foundations") < toc.index("/lessons/00_a") < toc.index("/lessons/01_b") \
        < toc.index(":caption: Next") < toc.index("/lessons/02_c")
    assert toc.count("```{toctree}") == 2
    readme.write_text("# no table here\n")
    with pytest.raises(ValueError, match="no table of lessons"):
        conf.lesson_toctrees(readme)


def test_the_site_hides_checks_and_finds_cells_not_run():
    conf = _conf()
    nb = {"cells": [{"cell_type": "markdown", "source": "x", "metadata": {}},
                    {"cell_type": "code", "execution_count": 1, "metadata": {"tags": ["checks"]}},
                    {"cell_type": "code", "execution_count": None, "metadata": {}}]}
    assert conf.unexecuted_cells(nb) == [2]
    hidden = conf.hide_checks(nb)
    assert [c["metadata"].get("tags") for c in hidden["cells"]] == [[], ["checks", "remove-cell"], []]


def test_a_link_to_a_folder_is_allowed_only_if_the_folder_exists():
    conf = _conf()
    allowed = [re.compile(pattern) for _, pattern in conf.nitpick_ignore_regex]
    ok = lambda target: any(p.fullmatch(target) for p in allowed)
    assert ok("minipt/models/") and ok("minipt/models") and ok("../lessons/")
    assert not ok("minipt/no_such_folder/") and not ok(".git/") and not ok("minipt/models/protocol.py")
