"""The package's layers (docs/DESIGN.md §1.2, §2.1), read from the source with ``ast``.

* no import circle between swapwatch modules, counting every import: those inside functions (a lazy import is
  still a dependency: it only hides the circle until the day someone moves it to the top) and those under
  ``if TYPE_CHECKING:`` (a type is a dependency too);
* the code path is decided in one place: outside ``swapwatch/pynative/`` (the apply_ac variant's home), its
  rules file and the two seam files (``codepaths.py``: the one dispatch; ``plan_view.py``: the shape both plans
  have and the view tags the rule registry matches), no module imports the PyNative package, names a path's
  types, predicates, view tags or flags, or compares a view or a path name (LayerSetting's own legacy / mcore
  tree vocabulary aside);
* renderers never import command modules, and a result never imports a renderer.

The seam's dispatchers (``codepaths.of``, ``of_run``, ``for_plan``) are how the others reach a path: calling them
is not asking which path one is on.
"""
from __future__ import annotations

import ast
import os
from typing import Dict, List, Set

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "swapwatch")

PATH_NAMES = {"pynative", "legacy", "mcore"}
#: modules that may compare the LayerSetting variants' names (legacy vs mcore), and why
PATH_NAME_ALLOWED = {
    "swapwatch.engine.codepaths": "the one dispatch: which code path a YAML goes to",
    "swapwatch.pynative.config": "the config detection (detect_path)",
    "swapwatch.config": "the config detection (use_legacy)",
    "swapwatch.model.families": "a LayerSetting family's tree vocabulary (legacy vs mcore layer trees), not the engine",
    "swapwatch.engine.unmatched": "the hint in the other LayerSetting tree's words (legacy vs mcore names), not the "
                           "engine",
}
#: where the PyNative path may be named or asked for: its home, its rules file, the two seams
SEAMS = {"swapwatch.engine.codepaths", "swapwatch.model.plan_view"}
PYNATIVE_ALLOWED = SEAMS | {"swapwatch.checks.sw5xx_pynative"}
#: names that say or ask which code path a plan, a YAML or a run is on: the PyNative types, the old seam's
#: predicates, the view tag of the apply_ac plans
PATH_WORDS = {"APPLY_AC", "ApplyAc", "PynativePlan", "PynativeConfig", "PynativeExplanation", "PynativeComparison",
              "ApplyAcComparison", "is_pynative", "pynative_tree", "pynative_run", "explain_pynative", "detect_path",
              "is_apply_ac", "static_comparison", "pynative_comparison", "pynative_plan"}
#: attributes of a plan consumers used to branch on (the per-path flags and render hooks, gone)
PATH_ATTRS = {"global_layer_ids", "comparable", "verify_map_lines", "verify_map_json", "strategy_rows_hook",
              "strategy_logs_hook"}
#: the command modules: what runs a command (reads its inputs, decides, exits); a renderer imports none of them
COMMAND_MODULES = {"swapwatch.cli", "swapwatch.commands.explain", "swapwatch.commands.verify", "swapwatch.commands.diff",
                   "swapwatch.commands.report", "swapwatch.runtime.runner", "swapwatch.memory.planner",
                   "swapwatch.tune.loop"}
#: renderer -> command modules it may still import, and why (none may be added)
RENDERER_EXEMPT: Dict[str, Set[str]] = {
    "swapwatch.memory.render": {"swapwatch.memory.planner"},    # PlanResult's type (memory/ is reworked this round)
}
#: the renderers (formatting lives in report/; the memory and tune outputs are rendered beside their results)
RENDERERS = {r: COMMAND_MODULES - RENDERER_EXEMPT.get(r, set())
             for r in ("swapwatch.report.explain", "swapwatch.report.verify", "swapwatch.report.diff",
                       "swapwatch.report.html", "swapwatch.report.layer_table", "swapwatch.report.finding_groups",
                       "swapwatch.report.rules", "swapwatch.report.verdict", "swapwatch.memory.render",
                       "swapwatch.tune.report")}
#: the results the commands return: data, no renderer
RESULTS = ("swapwatch.model.results", "swapwatch.tune.result")
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
    """The nodes under ``if TYPE_CHECKING:`` (kept apart only so the self-test can show they are read)."""
    skip: Set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            skip.update(id(x) for b in node.body for x in ast.walk(b))
    return skip


def _imports_in(tree: ast.Module, mod: str) -> Set[str]:
    pkg = mod if MODULES[mod].endswith("__init__.py") else mod.rsplit(".", 1)[0]
    out: Set[str] = set()
    for node in ast.walk(tree):
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


def imports_of(mod: str) -> Set[str]:
    """The swapwatch modules ``mod`` imports anywhere: at the top, inside functions and under TYPE_CHECKING."""
    return _imports_in(_tree(mod), mod)


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
    """The finder itself: a lazy import back is a circle, and so is a TYPE_CHECKING one."""
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert circles({"a": {"b"}, "b": set()}) == []
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .x import Y\n"
                     "def f():\n    from .z import W\n")
    assert _type_checking_nodes(tree)                   # the block is seen ...
    kept = sorted(n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom))
    assert kept == ["typing", "x", "z"]                 # ... and its import counts
    # on the package: a type-only import is an edge of the graph (results names PlanView only for types)
    assert "swapwatch.model.plan_view" in imports_of("swapwatch.model.results")


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
    found = [hit for m in sorted(MODULES) if m not in PATH_NAME_ALLOWED and not m.startswith("swapwatch.pynative")
             for hit in _path_name_comparisons(m)]
    assert not found, "path decided outside codepaths.py:\n" + "\n".join(found)


def _asks_the_path(mod: str) -> List[str]:
    """Where ``mod`` names the PyNative path or asks which path it is on: an import of ``swapwatch.pynative``, a
    name of :data:`PATH_WORDS` (a type, predicate, view tag or flag), a comparison of a view (``x.view == ...``,
    ``... in rule.views``) or with ``"pynative"``."""
    tree = _tree(mod)
    out = [f"{MODULES[mod]}: imports {m}" for m in sorted(_imports_in(tree, mod)) if m.startswith("swapwatch.pynative")]
    for node in ast.walk(tree):
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else \
            node.name if isinstance(node, ast.alias) else None
        if name in PATH_WORDS or (isinstance(node, ast.alias) and node.asname in PATH_WORDS) or (
                isinstance(node, ast.Attribute) and node.attr in PATH_ATTRS):
            out.append(f"{MODULES[mod]}:{getattr(node, 'lineno', '?')}: {name}")
        if isinstance(node, ast.Compare):
            sides = [node.left] + node.comparators
            if any(isinstance(x, ast.Attribute) and x.attr in ("view", "views") for x in sides) or any(
                    isinstance(v, ast.Constant) and v.value == "pynative"
                    for x in sides for v in (x.elts if isinstance(x, (ast.Tuple, ast.List, ast.Set)) else [x])):
                out.append(f"{MODULES[mod]}:{node.lineno}: {ast.unparse(node)}")
    return out


def test_only_the_seams_ask_which_path():
    found = [hit for m in sorted(MODULES) if m not in PYNATIVE_ALLOWED and not m.startswith("swapwatch.pynative")
             for hit in _asks_the_path(m)]
    assert not found, "the code path named or asked for outside codepaths.py / plan_view.py:\n" + "\n".join(found)


def test_the_seam_itself_is_seen_asking():
    """The scans are not blind: the seams and the detection do compare path names and view tags."""
    assert _path_name_comparisons("swapwatch.engine.codepaths")
    assert _asks_the_path("swapwatch.engine.codepaths") and _asks_the_path("swapwatch.model.plan_view")
    tree = ast.parse("from .pynative.resolve import PynativePlan\n"
                     "def f(plan):\n    return plan.view == 'x' or isinstance(plan, PynativePlan)\n")
    MODULES["swapwatch._probe"] = ""
    try:
        global _tree
        real = _tree
        _tree = lambda mod: tree if mod == "swapwatch._probe" else real(mod)     # noqa: E731
        hits = _asks_the_path("swapwatch._probe")
    finally:
        _tree = real
        del MODULES["swapwatch._probe"]
    assert any("PynativePlan" in h for h in hits) and any("plan.view ==" in h for h in hits)


@pytest.mark.parametrize("renderer", sorted(RENDERERS))
def test_renderers_import_no_command_module(renderer):
    bad = imports_of(renderer) & RENDERERS[renderer]
    assert not bad, f"{renderer} imports {sorted(bad)}"


@pytest.mark.parametrize("result", RESULTS)
def test_results_call_no_renderer(result):
    """A result is data: it imports no renderer (report/, memory/render, tune/report) and no command module."""
    bad = {m for m in imports_of(result) if m.startswith("swapwatch.report") or m in RENDERERS or m in COMMAND_MODULES}
    assert not bad, f"{result} imports {sorted(bad)}"


def test_the_renderer_rule_names_real_modules_and_is_not_blind():
    """A module renamed away (``diff.py`` split into ``strategy_diff`` / ``report/diff``) must not leave the rule
    checking a name that no longer exists; and the scan sees a command import where there is one."""
    named = set(RENDERERS) | COMMAND_MODULES | set(RESULTS) | {m for s in RENDERER_EXEMPT.values() for m in s}
    assert not named - set(MODULES), sorted(named - set(MODULES))
    assert {"swapwatch.commands.explain", "swapwatch.commands.verify"} <= imports_of("swapwatch.cli")
    # the results every command returns are below the commands and their renderers: both read them
    assert "swapwatch.model.results" in imports_of("swapwatch.report.html") & imports_of("swapwatch.commands.report")


def test_both_plans_are_the_one_view():
    """The static Plan and the PynativePlan both provide every member of plan_view.PlanView, and their actions
    speak actions.py's names."""
    from swapwatch.model import actions
    from swapwatch.commands.explain import explain
    from swapwatch.model.plan_view import APPLY_AC, LAYER_SETTING, Action, PlanView

    static = explain(os.path.join(ROOT, "fixtures", "configs", "swap_case2.yaml")).plan
    pyn = explain(os.path.join(ROOT, "fixtures", "configs", "pynative_qwen3_select.yaml")).plan
    members = [n for n in dir(PlanView) if not n.startswith("_")] + list(PlanView.__annotations__)
    for plan in (static, pyn):
        missing = [n for n in members if not hasattr(plan, n)]
        assert not missing, (type(plan).__name__, missing)
    assert (static.view, pyn.view) == (LAYER_SETTING, APPLY_AC)
    for plan in (static, pyn):
        names = {a for layer, _ in plan.all_layers() for a in plan.layer_actions(layer)}
        assert names and names <= set(actions.NAMES)
        acts = [a for layer, mtp in plan.all_layers() for a in plan.actions_at(layer, mtp)]
        assert acts and all(isinstance(a, Action) and a.kind in actions.NAMES for a in acts)
