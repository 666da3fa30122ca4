"""The report layer (issue 23.4): swapwatch/text.py's byte formatter, id ranges, severity order,
table writer and escaping, the commands that print through it, and the layering it stands for
(rules and the text module import no renderer or command module)."""
import ast
import math
import os
import pickle
import random
import subprocess
import sys

import pytest

from swapwatch import text
from swapwatch.errors import InputError
from swapwatch.families import FAMILY_TABLE_WIDTH, family_data, family_table, known_families
from swapwatch.text import (GIB, MIB, MIB_UNIT, SEVERITY_ORDER, escape, fmt_bytes, fmt_size, parse_ranks,
                            ranges, severity_rank, wrap_items, write_table)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "swapwatch")


def cli(*args):
    return subprocess.run([sys.executable, "-m", "swapwatch.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


# ---------------------------------------------------------------------------------------------
# ranges / parse_ranks
# ---------------------------------------------------------------------------------------------

def test_ranges_round_trip_with_parse_ranks():
    rng = random.Random(23)
    for _ in range(500):
        ids = {rng.randrange(0, 300) for _ in range(rng.randrange(1, 60))}
        for sep in (", ", ","):
            written = ranges(ids, sep=sep)
            got = parse_ranks(written)
            assert [r for r in range(-1, 301) if r in got] == sorted(ids), written
            assert str(got) == ranges(ids) and ranges(got, sep=sep) == written and got.count() == len(ids)


def test_ranges_shape():
    assert ranges([5, 0, 1, 2, 3, 5, 7, 8, 9]) == "0-3, 5, 7-9"
    assert ranges([4]) == "4"
    assert ranges([]) == ""
    assert ranges([1, 2, 4], sep=",") == "1-2,4"
    # with a limit: the first runs, an ellipsis, the last run and the count
    assert ranges([0, 2, 4, 6, 8, 10, 12], limit=3) == "0, 2, …, 12 (7 in all)"
    assert ranges([0, 2, 4], limit=3) == "0, 2, 4"


def test_parse_ranks_edges():
    assert parse_ranks(None) is None
    assert parse_ranks("0,1,4-6,1").spans == ((0, 1), (4, 6))
    assert parse_ranks(" 3 , 1-2 ,").spans == ((1, 3),)
    for bad, why in (("a", "expected rank numbers"), ("3-1", "not a rank or an increasing range"),
                     ("-1", "expected rank numbers"), (",", "no rank given"), ("1-x", "expected rank numbers")):
        with pytest.raises(InputError, match=why) as exc:
            parse_ranks(bad)
        assert exc.value.message.startswith("--ranks ")
    with pytest.raises(InputError) as exc:
        parse_ranks("x", "--rank")
    assert exc.value.message.startswith("--rank x:")


def test_a_huge_rank_range_stays_a_range():
    """issue 36 item 4: ``--rank 0-100000000000`` (17 bytes) was expanded into a list (5 GB, then
    exit 3). Kept as its range it costs what its text costs, and lookups bisect."""
    import tracemalloc

    tracemalloc.start()
    got = parse_ranks("0-100000000000, 200000000000-300000000000,7")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 64 << 10
    assert got.spans == ((0, 100000000000), (200000000000, 300000000000))
    assert 0 in got and 100000000000 in got and 150000000000 not in got and 250000000000 in got
    assert -1 not in got and None not in got and got.count() == 200000000002
    assert str(got) == ranges(got) == "0-100000000000, 200000000000-300000000000"
    assert not hasattr(got, "__iter__")            # nothing can expand it
    assert pickle.loads(pickle.dumps(got)) == got and 5 in pickle.loads(pickle.dumps(got))


def test_events_rank_option_is_named_in_its_error():
    """``events --rank`` reads ranks with the same parser and names its own option."""
    r = cli("events", "fixtures/logs/swap_case1.log", "--rank", "3-1")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1].endswith("--rank 3-1: 3-1 is not a rank or an increasing range")


# ---------------------------------------------------------------------------------------------
# bytes
# ---------------------------------------------------------------------------------------------

def test_fmt_bytes_short_style():
    """The figures' style: no decimals from 100 on or for whole numbers, GiB from 10 GiB."""
    assert fmt_bytes(0) == "0 MiB"
    assert fmt_bytes(183 * MIB) == "183 MiB"
    assert fmt_bytes(99.94 * MIB) == "99.9 MiB"
    assert fmt_bytes(99.96 * MIB) == "100.0 MiB"      # rounds at print: the switch is on the value
    assert fmt_bytes(100.4 * MIB) == "100 MiB"
    assert fmt_bytes(10 * GIB - 1) == "10240 MiB"
    assert fmt_bytes(10 * GIB) == "10 GiB"
    assert fmt_bytes(47.7 * GIB) == "47.7 GiB"
    assert fmt_bytes(-1.5 * MIB) == "-1.5 MiB"
    assert fmt_bytes(3 * GIB, ("GiB", GIB)) == "3 GiB"
    assert fmt_bytes(float("nan")) == "n/a"
    assert fmt_bytes(None) == "n/a"


def test_fmt_bytes_table_style():
    """estimate / plan (fmt_size: MiB .1, GiB .2, GiB from 1 GiB in magnitude) and diff (.1 both)."""
    assert fmt_size(0) == "0.0 MiB"
    assert fmt_size(GIB - 1) == "1024.0 MiB"
    assert fmt_size(GIB) == "1.00 GiB"
    assert fmt_size(8165 * MIB) == "7.97 GiB"
    assert fmt_size(-2 * GIB) == "-2.00 GiB"
    assert fmt_size(-5 * MIB) == "-5.0 MiB"
    assert fmt_bytes(33.5 * GIB, digits=1) == "33.5 GiB"
    assert fmt_bytes(512 * MIB, digits=1) == "512.0 MiB"
    # tune's columns: MiB always, the unit in the header, "-" for a figure not measured
    assert fmt_bytes(61.25 * MIB, MIB_UNIT, digits=1, bare=True, missing="-") == "61.2"
    assert fmt_bytes(3 * GIB, MIB_UNIT, digits=1, bare=True) == "3072.0"
    assert fmt_bytes(None, MIB_UNIT, digits=1, bare=True, missing="-") == "-"


def test_fmt_bytes_values_read_back():
    """The printed number is the value to the printed precision, in either style."""
    rng = random.Random(4)
    for _ in range(300):
        n = rng.uniform(0, 200) * rng.choice([MIB, GIB])
        for s in (fmt_bytes(n), fmt_size(n), fmt_bytes(n, digits=1)):
            num, unit = s.split()
            div = {"MiB": MIB, "GiB": GIB}[unit]
            places = len(num.split(".")[1]) if "." in num else 0
            assert math.isclose(float(num), n / div, abs_tol=0.5 * 10 ** -places + 1e-9), (n, s)


# ---------------------------------------------------------------------------------------------
# severity
# ---------------------------------------------------------------------------------------------

def test_one_severity_order():
    assert sorted(["info", "warning", "error", "other"], key=severity_rank) == ["error", "warning", "info", "other"]
    assert SEVERITY_ORDER == {"error": 0, "warning": 1, "info": 2}
    import swapwatch.verify as verify

    assert not hasattr(verify, "SEVERITY_ORDER")        # one table, in swapwatch/text.py


# ---------------------------------------------------------------------------------------------
# escaping and the table writer
# ---------------------------------------------------------------------------------------------

def test_escape():
    assert escape("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert escape("x\ry\nz\tw") == "x\\ry\\nz\\tw"
    assert escape("\x00\x07\x7f\x9b") == "\\x00\\x07\\x7f\\x9b"         # C1 CSI (0x9b) too
    assert escape("abc\u202edef\u2066") == "abc\\u202edef\\u2066"       # bidi overrides
    plain = "feed_forward\\.w1 → ✗ 层 -"                                 # backslashes, arrows, CJK stay
    assert escape(plain) is plain


def test_write_table_widths_and_wrapping():
    out = write_table(["a", "long header", "c"], [["xxxx", "y", ""], [["1", "22", "333"], "", "end"]])
    assert out[0] == "a     long header  c"
    assert out[1] == "----  -----------  ---"
    assert out[2] == "xxxx  y"                                  # no trailing blanks
    assert out[3:] == ["1                  end", "22", "333"]  # a list cell continues on the next lines
    assert [m.start() for m in __import__("re").finditer("-+", out[1])] == [0, 6, 19]   # two blanks apart
    assert (out[0].index("long"), out[0].rindex("c")) == (6, 19)


def test_write_table_escapes_control_characters():
    out = write_table(["path", "v"], [["a\x1b[31mred", "1\r"]])
    joined = "\n".join(out)
    assert "\x1b" not in joined and "\r" not in joined
    assert out[2] == "a\\x1b[31mred  1\\r"
    assert len(out[1].split()[0]) == len("a\\x1b[31mred")           # widths of the escaped text


def test_wrap_items():
    items = ["model.arch.type LlamaForCausalLM", "qkv_concat: True", "qkv_has_bias: True",
             "use_flash_attention: False"]
    lines = wrap_items(items, 40, ", ", "  ")
    assert all(len(x) <= 40 for x in lines)
    assert " ".join(x.strip() for x in lines) == ", ".join(items)
    assert all(x.startswith("  ") for x in lines[1:])
    assert wrap_items(["a" * 50, "b"], 10) == ["a" * 50 + ",", "b"]


def test_verify_escapes_a_control_sequence_from_the_log(tmp_path):
    """A path in a worker log carrying an escape sequence (OSC: set the terminal title) is printed
    as text in the findings, never as the bytes that drive the terminal."""
    with open(os.path.join(ROOT, "fixtures", "logs", "swap_case1.log"), encoding="utf-8") as fh:
        log = fh.read()
    needle = "Set op_swap at layer 2:  attention.flash_attention"
    assert needle in log
    (tmp_path / "worker_0.log").write_text(log.replace(needle, needle + "\x1b]0;pwned\x07x"), encoding="utf-8")
    for fmt in ("table", "markdown", "junit"):
        r = cli("verify", str(tmp_path / "worker_0.log"), "--config", "fixtures/configs/swap_case1.yaml",
                "--format", fmt)
        assert r.returncode == 1, r.stderr
        if fmt != "markdown":           # markdown's finding column is verify_render's (issue 23.1)
            assert "\x1b" not in r.stdout and "\x07" not in r.stdout, fmt
        if fmt == "table":
            assert "attention.flash_attention\\x1b]0;pwned\\x07x" in r.stdout


def test_explain_table_escapes_a_control_character_from_the_yaml(tmp_path):
    """A pattern with a control character: the layer table's cell and the finding quoting it."""
    with open(os.path.join(ROOT, "fixtures", "configs", "swap_case1.yaml"), encoding="utf-8") as fh:
        cfg = fh.read()
    cfg = cfg.replace("recompute_config:\n  recompute: False",
                      'recompute_config:\n  recompute: False\n  select_recompute: ["feed_forward\\a\\\\.mul"]').replace("swap: True", "swap: False")
    (tmp_path / "c.yaml").write_text(cfg, encoding="utf-8")
    r = cli("explain", str(tmp_path / "c.yaml"))
    assert r.returncode in (0, 1), r.stderr
    assert "\x07" not in r.stdout
    assert "feed_forward\\x07\\.mul (no match)" in r.stdout


# ---------------------------------------------------------------------------------------------
# swapwatch families
# ---------------------------------------------------------------------------------------------

def test_families_table_fits_100_columns_and_keeps_everything():
    out = family_table()
    assert FAMILY_TABLE_WIDTH == 100
    assert max(len(x) for x in out.splitlines()) <= FAMILY_TABLE_WIDTH
    flat = " ".join(x.strip() for x in out.splitlines())
    for name in known_families():
        data = family_data(name)
        assert any(x.split()[:1] == [name] for x in out.splitlines()), name
        assert data.get("path", "example") in flat
        assert (data.get("model_class") or "swapwatch.examples.tinyllama") in flat
        for kind, v in data["layouts"].items():
            assert f"{kind}: {v.get('class') or '?'}" in flat, (name, kind)
    for word in ("DeepseekV3ForCausalLM", "ChatGLM4ForConditionalGeneration", "GLM4ForCausalLM",
                 "use_flash_attention: False", "q_lora_rank: null", "TeleChat3ForCausalLM",
                 "(default when the YAML names no model)"):
        assert word in flat, word


# ---------------------------------------------------------------------------------------------
# Layering: rules and the text module import no renderer or command module
# ---------------------------------------------------------------------------------------------

#: Modules that write what a person reads, and the commands' libraries (whose results they render).
RENDERERS = {"swapwatch.layer_table", "swapwatch.render_explain", "swapwatch.verify_render",
             "swapwatch.finding_groups", "swapwatch.rules_doc", "swapwatch.memory.render", "swapwatch.tune.report",
             "swapwatch.report", "swapwatch.plot", "swapwatch.pynative.plot", "swapwatch.events_output",
             "swapwatch.diff_render"}
COMMANDS = {"swapwatch.cli", "swapwatch.explain", "swapwatch.verify", "swapwatch.strategy_diff", "swapwatch.runner",
            "swapwatch.memory.planner", "swapwatch.tune.loop", "swapwatch.pynative.explain",
            "swapwatch.pynative.verify"}


def _module(path):
    rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
    return rel[:-len(".__init__")] if rel.endswith(".__init__") else rel


def _imports(path, runtime_only=True):
    """Absolute names of the swapwatch modules ``path`` imports, at any depth (lazy imports in
    functions too); with ``runtime_only``, not those under ``if TYPE_CHECKING:``."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    mod = _module(path)
    pkg = mod if path.endswith("__init__.py") else mod.rsplit(".", 1)[0]
    skip = set()
    if runtime_only:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skip.update(id(n) for b in node.body for n in ast.walk(b))
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("swapwatch"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("swapwatch"):
                out.add(target)
                out.update(f"{target}.{a.name}" for a in node.names)      # `from . import verify`
    return out


def _hits(imported, forbidden):
    return sorted(i for i in imported for f in forbidden if i == f or i.startswith(f + "."))


def test_the_text_module_imports_only_errors():
    imported = _imports(os.path.join(PKG, "text.py"))
    assert {i for i in imported if i != "swapwatch.errors" and not i.startswith("swapwatch.errors.")} == set()


def test_rules_import_no_renderer_or_command_module():
    checks = os.path.join(PKG, "checks")
    bad = {}
    for name in sorted(os.listdir(checks)):
        if name.endswith(".py"):
            hits = _hits(_imports(os.path.join(checks, name), runtime_only=False), RENDERERS | COMMANDS)
            if hits:
                bad[name] = hits
    assert not bad


#: Renderers another part of issue 23 reworks (23.1: the PyNative path behind one seam); they still
#: import a command module for a result type, and that branch removes it.
SEAM23 = {"swapwatch/render_explain.py", "swapwatch/verify_render.py", "swapwatch/report/html.py",
          "swapwatch/plot/strategy_map.py"}


@pytest.mark.parametrize("rel", ["swapwatch/layer_table.py", "swapwatch/finding_groups.py",
                                 "swapwatch/memory/render.py", "swapwatch/tune/report.py",
                                 "swapwatch/plot/_render.py", "swapwatch/plot/estimate.py",
                                 "swapwatch/plot/memory.py", "swapwatch/plot/result.py",
                                 "swapwatch/plot/runs.py", "swapwatch/rules_doc.py"])
def test_renderers_import_no_command_module(rel):
    assert rel not in SEAM23
    assert not _hits(_imports(os.path.join(ROOT, rel)), COMMANDS)


def test_one_byte_formatter_and_one_table_writer():
    """No module but swapwatch/text.py divides by 2**20 / 2**30 to print, or pads columns."""
    import re

    pat = re.compile(r"\.ljust\(|\.rjust\(|:<\d+\}|/ \(1 << (20|30)\)|/ 2 \*\* (20|30)")
    offenders = []
    for base, _dirs, files in os.walk(PKG):
        for f in files:
            p = os.path.join(base, f)
            if not f.endswith(".py") or p == os.path.join(PKG, "text.py"):
                continue
            with open(p, encoding="utf-8") as fh:
                for k, line in enumerate(fh, 1):
                    if pat.search(line) and "progress" not in p:
                        offenders.append(f"{os.path.relpath(p, ROOT)}:{k}")
    assert offenders == []
    assert text.write_table is write_table
