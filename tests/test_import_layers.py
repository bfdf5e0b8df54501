"""Layers as the house is built: the import graph of ``minipt/``, read statically, has no
cycle, and no model file imports a recipe or an experiment.

The rule (``import_graph``): a node per module (a package is its ``__init__``); an edge
for every ``import`` or ``from ... import`` of a minipt module anywhere in the file, at
the top or inside a function or class, relative or absolute; ``from package import name``
is an edge to ``package.name`` when that is a module, else to ``package``. Not counted:
imports under ``if TYPE_CHECKING:`` (never executed), the parent packages Python runs
on the way to a module, and ``importlib`` calls on strings (the registry's dotted recipe
paths, resolved when the CLI runs them, are exactly how models name recipes).
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UPPER = ("minipt.recipes", "minipt.experiments")          # layers above the models


def _modules(root: Path) -> dict[str, tuple[Path, bool]]:
    found = {}
    for path in sorted((root / "minipt").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if package else parts)] = (path, package)
    return found


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (getattr(node.test, "id", None) == "TYPE_CHECKING"
                                         or getattr(node.test, "attr", None) == "TYPE_CHECKING"):
            skip |= {id(n) for part in node.body for n in ast.walk(part)}
    return skip


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the minipt modules it imports (the rule of the module docstring)."""
    modules = _modules(root)
    graph = {}
    for name, (path, package) in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        skip, edges = _type_checking_nodes(tree), set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".")[:len(name.split(".")) - node.level + package]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module
                for alias in node.names:
                    if f"{target}.{alias.name}" in modules:
                        edges.add(f"{target}.{alias.name}")
                    elif target in modules:
                        edges.add(target)
        graph[name] = edges - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[v] = min(low[v], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} -> {t}" for m, targets in graph.items() if m.startswith("minipt.models.")
                  for t in targets if t.startswith(UPPER))


def test_the_rule_on_a_made_up_package(tmp_path):
    """The graph reader itself: relative imports at every level, a function-level import,
    ``from package import module``, a TYPE_CHECKING import left out; a cycle is found."""
    files = {
        "minipt/__init__.py": "",
        "minipt/models/__init__.py": "",
        "minipt/models/a.py": "from ..recipes import r\n",
        "minipt/models/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n",
        "minipt/recipes/__init__.py": "",
        "minipt/recipes/r.py": "def f():\n    from minipt.models.a import x\n",
        "minipt/recipes/s.py": "import minipt.models.b\nfrom . import r\nfrom .. import models\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = import_graph(tmp_path)
    assert graph["minipt.models.a"] == {"minipt.recipes.r"}
    assert graph["minipt.models.b"] == set()
    assert graph["minipt.recipes.r"] == {"minipt.models.a"}
    assert graph["minipt.recipes.s"] == {"minipt.models.b", "minipt.recipes.r", "minipt.models"}
    assert cycles(graph) == [["minipt.models.a", "minipt.recipes.r"]]
    assert layer_violations(graph) == ["minipt.models.a -> minipt.recipes.r"]


@pytest.fixture(scope="module")
def graph():
    return import_graph()


def test_the_graph_sees_the_package(graph):
    assert len(graph) > 150 and "minipt.recipes.encoder" in graph["minipt.recipes.electra"]
    assert "minipt.models.registry" in graph["minipt.models.encoder.bert"]


def test_no_import_cycle_in_minipt(graph):
    found = cycles(graph)
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_no_model_imports_a_recipe_or_an_experiment(graph):
    bad = layer_violations(graph)
    assert not bad, "models stand below recipes and experiments: " + ", ".join(bad)


def test_every_model_registers_without_the_layers_above():
    """Importing every model file (the registry's discovery) loads no recipe or experiment:
    the dotted paths wait until the CLI runs or lists a model."""
    code = ("import sys; from minipt.models import registry; registry._discover(); "
            "print(len(registry._REGISTRY), sorted(m for m in sys.modules if m.startswith(('minipt.recipes', "
            "'minipt.experiments'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout.split(maxsplit=1)
    assert int(out[0]) > 25 and out[1].strip() == "[]"


def test_dotted_recipes_and_presets_resolve_on_use():
    from minipt.models import registry
    from minipt.recipes import encoder
    bert = registry.get("bert")
    assert isinstance(bert.recipe, registry.DottedRecipe) and bert.recipe.path == "minipt.recipes.encoder.bert_recipe"
    assert bert.presets["toy"] is encoder.PRESETS["toy"] and list(bert.presets) == list(encoder.PRESETS)
    bert.presets["extra"] = encoder.PRESETS["toy"]                       # writes go to the recipe's dict
    assert "extra" in encoder.PRESETS
    del bert.presets["extra"]
    assert "extra" not in encoder.PRESETS
    assert registry.resolve("minipt.recipes.encoder.bert_recipe") is encoder.bert_recipe
    with pytest.raises(ValueError, match="module minipt.recipes.encoder has no attribute 'nope'"):
        registry.resolve("minipt.recipes.encoder.nope")
    with pytest.raises(ValueError, match="expected a dotted path"):
        registry.resolve("encoder")
