"""SW208 (swap entries while swap is off) and SW209 (a layer in two swap entries): explain on small
YAMLs, both code paths, and the rule tables. What MindFormers really does in both cases is pinned by
the oracle tier (tests/test_oracle_swap_traps.py)."""
import json
import os
import re

from click.testing import CliRunner

from swapwatch.engine import strategy
from swapwatch.checks import REGISTRY, CheckContext, load_rules, rule_variants, run_rules
from swapwatch.cli import cli
from swapwatch.config import config_from_dicts
from swapwatch.commands.explain import explain

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OFF = os.path.join(ROOT, "fixtures", "configs", "swap_off_entries.yaml")
OVERLAP = os.path.join(ROOT, "fixtures", "configs", "swap_entries_overlap.yaml")
MCORE = os.path.join(ROOT, "fixtures", "configs", "families", "qwen3_swap_entries.yaml")


def found(path, code):
    return [f for f in explain(path).findings if f.code == code]


def findings(sc, code, **geo):
    geo.setdefault("num_layers", 4)
    cfg = config_from_dicts({}, sc, **geo)
    out = run_rules(CheckContext(plan=strategy.plan(cfg), config=cfg), needs=("config",))
    return [f for f in out if f.code == code]


def test_rules_have_their_docs():
    for code in ("SW208", "SW209"):
        rule = rule_variants(code)[0]
        doc = type(rule).__doc__ or ""
        assert rule.needs == "config" and rule.severity == "warning"
        assert all(h in doc for h in ("**What it means.**", "**Why it matters.**", "**How to fix it.**"))


def test_sw208_swap_off_entries_on_the_legacy_path():
    (f,) = found(OFF, "SW208")
    assert f.message == ("swap_config.layer_swap and swap_config.op_swap are ignored: swap_config.swap is "
                         "False, so MindFormers offloads nothing and says nothing")
    assert f.source == f"{OFF}:40" and f.severity == "warning" and f.op == "layer_swap, op_swap"
    # the plan agrees: nothing is swapped anywhere
    assert all(lp.layer_swap is None and not lp.op_swap for lp in strategy.plan(explain(OFF).config).layers)


def test_sw208_names_the_mcore_keys_the_yaml_used():
    (f,) = found(MCORE, "SW208")
    assert f.message == ("model.model_config.op_swap is ignored: model.model_config.cpu_offloading is False, "
                         "so MindFormers offloads nothing and says nothing")
    line = next(i for i, ln in enumerate(open(MCORE, encoding="utf-8"), 1) if ln.strip() == "op_swap:")
    assert f.source == f"{MCORE}:{line}"


def test_sw208_quiet_when_swap_is_on_or_nothing_is_listed():
    entries = {"layer_swap": [{"backward_prefetch": 2, "layers": [0]}]}
    assert findings(dict(entries, swap=True), "SW208") == []
    assert findings({"swap": False}, "SW208") == []
    assert findings({"swap": False, "op_swap": []}, "SW208") == []
    # swap left out is off too, and says so
    (f,) = findings(entries, "SW208")
    assert "swap_config.swap is not set (False)" in f.message


def test_sw209_names_the_dropped_entries_and_the_prefetch_that_applies():
    fs = found(OVERLAP, "SW209")
    assert [(f.op, f.layer, f.expected, f.actual, f.source) for f in fs] == [
        ("layer_swap", 1, 2, 3, f"{OVERLAP}:44"),
        ("feed_forward", 3, 15, 5, f"{OVERLAP}:50")]
    assert fs[0].message == ("swap_config.layer_swap[1] names this layer too, already swapped by "
                             "swap_config.layer_swap[0]: "
                             "its backward_prefetch 3 is not used there (MindFormers applies "
                             "swap_config.layer_swap[0]'s 2)")
    assert fs[1].message.startswith("swap_config.op_swap[1] ('feed_forward') names this layer too, already swapped by "
                                    "swap_config.op_swap[0]")
    # the engine keeps the first entry, as MindFormers does
    layers = strategy.plan(explain(OVERLAP).config).layers
    assert [lp.layer_swap for lp in layers] == [2, 2, 3, None]
    assert layers[3].op_swap == {"feed_forward": 15, "attention": 5}


def test_sw209_every_overlapping_layer_and_same_prefetch():
    (f,) = findings({"swap": True, "layer_swap": [{"backward_prefetch": 1, "layers": [0, 1, 2]},
                                                  {"backward_prefetch": 1, "layers": [1, 2, 3]}]}, "SW209")
    assert f.layer is None and "names layers 1-2" in f.message and "it is redundant there" in f.message


def test_sw209_quiet_on_disjoint_entries_and_swap_off():
    # the documented swap case 3: 'attention' twice, on layers 0-2 and 3
    assert findings({"swap": True, "op_swap": [
        {"op_name": "attention", "backward_prefetch": 20, "layers": [0, 1, 2]},
        {"op_name": "attention", "backward_prefetch": 10, "layers": [3]}]}, "SW209") == []
    # two ops on one layer are two op names, not a conflict
    assert findings({"swap": True, "op_swap": [
        {"op_name": "attention", "backward_prefetch": 20, "layers": [1]},
        {"op_name": "feed_forward", "backward_prefetch": 10, "layers": [1]}]}, "SW209") == []
    assert findings({"swap": False, "layer_swap": [{"backward_prefetch": 1, "layers": [0]},
                                                   {"backward_prefetch": 2, "layers": [0]}]}, "SW209") == []


def test_explain_cli_prints_them_and_exits_0():
    for path, code in ((OFF, "SW208"), (OVERLAP, "SW209")):
        r = CliRunner().invoke(cli, ["explain", path])
        assert r.exit_code == 0, r.output                        # warnings only
        assert f"  {code} warning: " in r.output and f"→ swapwatch rules {code}" in r.output
        r = CliRunner().invoke(cli, ["explain", path, "--format", "json"])
        assert [f["code"] for f in json.loads(r.output)["findings"]].count(code) >= 1


def test_rule_tables_list_every_registered_rule():
    """docs/rules.md's and docs/DESIGN.md's rule tables against the registry (codes and severities)."""
    load_rules()
    registry = {code: rule.severity for code, rule in REGISTRY.items()}
    for doc in (os.path.join("docs", "rules.md"), os.path.join("docs", "DESIGN.md")):
        with open(os.path.join(ROOT, doc), encoding="utf-8") as fh:
            rows = dict(re.findall(r"^\| (SW\d{3}) \| (\w+) \|", fh.read(), re.M))
        assert rows == registry, doc


# ---- every config rule names the mcore key a swap finding comes from (checks/_config_ctx.where) ----

CONFLICT = os.path.join(ROOT, "fixtures", "configs", "families", "qwen3_swap_conflict.yaml")


def _line(path, text, after=0):
    return next(i for i, ln in enumerate(open(path, encoding="utf-8"), 1) if i > after and ln.strip() == text)


def test_sw201_sw202_on_the_mcore_path_name_the_model_config_line(tmp_path):
    (f,) = found(CONFLICT, "SW201")
    assert f.layer == 0 and f.source == f"{CONFLICT}:{_line(CONFLICT, 'cpu_offloading_num_layers:')}"
    # an op swap whose consumer a select pattern recomputes (SW202), and an ignored top-level
    # swap_config (SW306) that must not steal the place of the model_config keys LayerSetting uses
    text = open(CONFLICT, encoding="utf-8").read()
    text = text.replace("recompute_config:\n  recompute:\n  - 0\n",
                        "swap_config:\n  swap: true\n  layer_swap:\n  - {backward_prefetch: 3, layers: [0]}\n"
                        "recompute_config:\n  recompute:\n  - 0\n  select_recompute:\n"
                        "    'mlp\\.activation_func': [1]\n")
    text = text.replace("    op_swap:\n    - op_name: self_attention\\.core_attention\n",
                        "    op_swap:\n    - op_name: mlp\\.linear_fc1\n      backward_prefetch: 1\n"
                        "      layers: [1]\n    - op_name: self_attention\\.core_attention\n")
    p = str(tmp_path / "q.yaml")
    open(p, "w", encoding="utf-8").write(text)
    ex = explain(p)
    by = {f.code: f for f in ex.findings}
    assert {"SW201", "SW202", "SW306"} <= set(by)
    assert by["SW201"].source == f"{p}:{_line(p, 'cpu_offloading_num_layers:')}"
    assert by["SW202"].layer == 1
    assert by["SW202"].source == f"{p}:{_line(p, 'op_swap:', _line(p, 'model_config:')) + 1}"
    assert by["SW306"].source == f"{p}:{_line(p, 'swap_config:')}"

