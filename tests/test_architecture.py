"""The package's layers (docs/DESIGN.md §1.2, §2.1), read from the source with ``ast``.

* no import circle between swapwatch modules, counting the imports inside functions (a lazy import is still a
  dependency: it only hides the circle until the day someone moves it to the top), not those under
  ``if TYPE_CHECKING:``;
* the code path is decided in one place: outside the seam (``paths.py``) and the config detection, no module
  compares anything with the path names ``"pynative"`` / ``"legacy"`` / ``"mcore"``;
* renderers never import command modules (``render_explain`` not ``explain``, ``verify_render`` not ``verify``,
  ``diff_render`` and the report's HTML not ``cli``): what both read lives below them (``results.py``,
  ``strategy_diff.py``).
"""
from __future__ import annotations

import ast
import os
from typing import Dict, List, Set

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "swapwatch")

PATH_NAMES = {"pynative", "legacy", "mcore"}
#: modules that may compare path names, and why
PATH_NAME_ALLOWED = {
    "swapwatch.codepaths": "the one dispatch: which code path a YAML goes to",
    "swapwatch.paths": "the seam: which engine a YAML goes to",
    "swapwatch.pynative.config": "the config detection (detect_path)",
    "swapwatch.config": "the config detection (use_legacy)",
    "swapwatch.families": "a LayerSetting family's tree vocabulary (legacy vs mcore layer trees), not the engine",
    "swapwatch.checks.sw104_pattern_no_match_config": "the hint in the other LayerSetting tree's words (legacy vs "
                                                      "mcore names), not the engine",
}
#: the command modules: what runs a command (reads its inputs, decides, exits); a renderer imports none of them
COMMAND_MODULES = {"swapwatch.cli", "swapwatch.explain", "swapwatch.verify", "swapwatch.runner",
                   "swapwatch.memory.planner", "swapwatch.tune.loop", "swapwatch.pynative.verify",
                   "swapwatch.pynative.explain"}
#: renderer -> command modules it may still import, and why (none may be added)
RENDERER_EXEMPT = {
    "swapwatch.report.html": {"swapwatch.pynative.explain"},   # the PyNative table lives there (issue 23.1)
}
#: renderer -> command modules it must not import
RENDERERS = {r: COMMAND_MODULES - RENDERER_EXEMPT.get(r, set())
             for r in ("swapwatch.render_explain", "swapwatch.verify_render", "swapwatch.diff_render",
                       "swapwatch.report.html", "swapwatch.memory.render")}
#: import circles owned by another part of the package this round, to be broken there (none may be added)
KNOWN_CIRCLES: List[Set[str]] = []


def _modules() -> Dict[str, str]:
    out = {}
    for d, _, files in os.walk(PKG):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(d, f)
                mod = os.path.relpath(path[:-3], ROOT).replace(os.sep, ".")
                out[mod[:-len(".__init__")] if mod.endswith(".__init__") else mod] = path
    return out


MODULES = _modules()


def _tree(mod: str) -> ast.Module:
    with open(MODULES[mod], encoding="utf-8") as fh:
        return ast.parse(fh.read())


def _type_checking_nodes(tree: ast.Module) -> Set[int]:
    skip: Set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            skip.update(id(x) for b in node.body for x in ast.walk(b))
    return skip


def imports_of(mod: str) -> Set[str]:
    """The swapwatch modules ``mod`` imports anywhere (functions included, TYPE_CHECKING blocks not)."""
    tree = _tree(mod)
    skip = _type_checking_nodes(tree)
    pkg = mod if MODULES[mod].endswith("__init__.py") else mod.rsplit(".", 1)[0]
    out: Set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = pkg.split(".")
                base = ".".join(parts[:len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.add(sub if sub in MODULES else base)
    return {m for m in out if m in MODULES and m != mod}


def circles(graph: Dict[str, Set[str]]) -> List[Set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    out: List[Set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.add(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return out


def test_the_cycle_finder_finds_a_circle():
    """The finder itself: a lazy import back is a circle; a TYPE_CHECKING one is not."""
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert circles({"a": {"b"}, "b": set()}) == []
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .x import Y\n"
                     "def f():\n    from .z import W\n")
    skip = _type_checking_nodes(tree)
    kept = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and id(n) not in skip]
    assert kept == ["typing", "z"]


def test_no_import_circle_in_the_package():
    graph = {m: imports_of(m) for m in MODULES}
    found = [c for c in circles(graph) if c not in KNOWN_CIRCLES]
    assert not found, "import circles: " + "; ".join(" <-> ".join(sorted(c)) for c in found)


def _path_name_comparisons(mod: str) -> List[str]:
    out = []
    for node in ast.walk(_tree(mod)):
        if not isinstance(node, ast.Compare):
            continue
        for side in [node.left] + node.comparators:
            values = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
            if any(isinstance(v, ast.Constant) and v.value in PATH_NAMES for v in values):
                out.append(f"{MODULES[mod]}:{node.lineno}: {ast.unparse(node)}")
    return out


def test_only_the_seam_compares_path_names():
    found = [hit for m in sorted(MODULES) if m not in PATH_NAME_ALLOWED for hit in _path_name_comparisons(m)]
    assert not found, "path decided outside paths.py:\n" + "\n".join(found)


def test_the_seam_itself_is_seen_comparing():
    """The scan is not blind: the seam and the detection do compare path names."""
    assert _path_name_comparisons("swapwatch.codepaths") and _path_name_comparisons("swapwatch.paths")


@pytest.mark.parametrize("renderer", sorted(RENDERERS))
def test_renderers_import_no_command_module(renderer):
    bad = imports_of(renderer) & RENDERERS[renderer]
    assert not bad, f"{renderer} imports {sorted(bad)}"


def test_the_renderer_rule_names_real_modules_and_is_not_blind():
    """A module renamed away (``diff.py`` split into ``strategy_diff`` / ``diff_render``) must not leave the rule
    checking a name that no longer exists; and the scan sees a command import where there is one."""
    named = set(RENDERERS) | COMMAND_MODULES | {m for s in RENDERER_EXEMPT.values() for m in s}
    assert not named - set(MODULES), sorted(named - set(MODULES))
    assert {"swapwatch.explain", "swapwatch.verify"} <= imports_of("swapwatch.cli")
    # diff's library is below the commands: the report and the CLI read it, and it is no renderer's exemption
    assert "swapwatch.strategy_diff" in imports_of("swapwatch.report.html") & imports_of("swapwatch.cli")
    assert "swapwatch.strategy_diff" not in COMMAND_MODULES


def test_both_plans_are_the_one_view():
    """The static Plan and the PynativePlan both provide every member of plan_view.PlanView."""
    from swapwatch import paths
    from swapwatch.explain import explain
    from swapwatch.plan_view import APPLY_AC, LAYER_SETTING, PlanView

    static = explain(os.path.join(ROOT, "fixtures", "configs", "swap_case2.yaml")).plan
    pyn = paths.explain_pynative(os.path.join(ROOT, "fixtures", "configs", "pynative_qwen3_select.yaml")).plan
    members = [n for n in dir(PlanView) if not n.startswith("_")] + list(PlanView.__annotations__)
    for plan in (static, pyn):
        missing = [n for n in members if not hasattr(plan, n)]
        assert not missing, (type(plan).__name__, missing)
    assert (static.view, pyn.view) == (LAYER_SETTING, APPLY_AC)
    assert (static.global_layer_ids, pyn.global_layer_ids) == (False, True)
    # the per-action view speaks actions.py's names on both paths
    from swapwatch import actions

    for plan in (static, pyn):
        names = {a for lp in plan.layers for a in plan.layer_actions(lp.layer)}
        assert names and names <= set(actions.NAMES)
