"""``swapwatch report`` and the report ``swapwatch run`` writes: what the page holds, from the
results verify / explain / the plots return (no headless browser here: tests/test_report_browser.py
opens the same pages in Chromium)."""
from __future__ import annotations

import io
import json
import re
import sys
from html.parser import HTMLParser

import pytest

from swapwatch import finding_groups, runner
from swapwatch.cli import main
from swapwatch.report import build, make, verdict
from swapwatch.verify import verify

from report_helpers import FIX, failing_run, passing_run, truncated_log


def _cli(args, capsys):
    with pytest.raises(SystemExit) as ex:
        main(args)
    out, err = capsys.readouterr()
    return ex.value.code, out, err


class _Page(HTMLParser):
    """Tags, tables (header and rows as text), external references and the visible text."""

    def __init__(self):
        super().__init__()
        self.tags, self.refs, self.tables, self.text = [], [], [], []
        self._cell = None
        self._row = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        for k in ("src", "href", "xlink:href", "action", "data"):
            if a.get(k) and not a[k].startswith("#"):
                self.refs.append(a[k])
        if tag == "table":
            self.tables.append({"head": [], "rows": [], "class": a.get("class", "")})
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            text = "".join(self._cell).strip()
            self._row.append((tag, text))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if all(t == "th" for t, _ in self._row):
                self.tables[-1]["head"] = [x for _, x in self._row]
            else:
                self.tables[-1]["rows"].append([x for _, x in self._row])
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        self.text.append(data)


def parse(text: str) -> _Page:
    p = _Page()
    p.feed(text)
    return p


def test_failing_run_page_has_verdict_map_findings_and_rules(tmp_path):
    job = failing_run(tmp_path)
    res = verify([str(job)])
    assert {f.code for f in res.findings} >= {"SW101", "SW201"}
    text = make([str(job)])
    page = parse(text)
    v = verdict.read_verdict(res)
    assert v.state == "fail" and v.headline == "FAIL"
    assert v.run.startswith("run: differs from the config") and "SW101" in v.run
    assert v.config == "config: 1 error (SW201)"
    assert 'data-verdict="fail"' in text and v.run in text.replace("&#x27;", "'")
    # every finding group of verify's result is a row, under its rule's header, linking to the rule
    for code, groups in finding_groups.by_code(finding_groups.group(res.findings)).items():
        assert f'data-code="{code}"' in text and f'href="#rule-{code}"' in text and f'id="rule-{code}"' in text
        rows = [t for t in page.tables if t["class"] == "findings"]
        bodies = {r[1] for t in rows for r in t["rows"]}
        for g in groups:
            assert g.body in bodies
    # the per-layer map: every layer of the plan, the ✗ cell in the verify table's words
    lm = next(t for t in page.tables if t["class"] == "layer-map")
    assert lm["head"][:2] == ["layer", "stage"]
    assert _layers(lm) == set(range(res.layers))
    assert any(c.startswith("✗ ") for r in lm["rows"] for c in r)
    plan = next(t for t in page.tables if t["class"] == "plan")
    assert _layers(plan) == set(range(res.layers))
    assert any("!" in c for r in plan["rows"] for c in r)           # the swap voided by recompute (SW201)


def _layers(table) -> set:
    out = set()
    for row in table["rows"]:
        m = re.match(r"^(\d+)(?:-(\d+))?", row[0])
        a, b = int(m.group(1)), int(m.group(2) or m.group(1))
        out |= set(range(a, b + 1))
    return out


def test_the_page_is_one_file_with_nothing_to_fetch(tmp_path):
    text = make([str(passing_run(tmp_path))])
    page = parse(text)
    assert page.refs == []                                           # no src/href leaving the page
    tags = {t for t, _ in page.tags}
    assert "script" not in tags and "img" not in tags and "link" not in tags and "iframe" not in tags
    # SVG's xmlns values are names, not requests; no other URL is on the page
    assert not re.search(r"https?://", re.sub(r'xmlns(:\w+)?="[^"]*"', "", text))
    assert "default-src 'none'" in text
    for t in page.tables:                                            # every table has a header row
        assert t["head"], t
        assert all(len(r) == len(t["head"]) for r in t["rows"]), t
    # figure labels are text too (svg.fonttype none)
    assert text.count("<svg") == 2 and "<text" in text           # the strategy map and the memory figure


def test_passing_run_page_shows_the_run_and_memory(tmp_path):
    run = passing_run(tmp_path)
    rep = build.build([str(run)])
    part = rep.runs[0]
    assert part.config_origin.startswith("the run's config.yaml") and part.result.exit_code == 0
    assert part.verdict.state == "pass" and part.verdict.run.startswith("run: applied as configured on 2/2 ranks")
    # the tiny model's YAML leaves its sizes to the trainer's flags: estimate says so, the page too
    assert part.estimate is None and any("hidden_size" in n for n in part.notes)
    assert rep.memory is not None and not rep.memory.frames["peaks"].empty
    page = parse(make([str(run)]))
    facts = {r[0]: r[1] for t in page.tables if t["head"] == ["what", "value"] for r in t["rows"]}
    info = json.loads((run / "run.json").read_text())
    assert facts["exit code"] == str(info["exit_code"])
    assert facts["command"] == " ".join(info["command"])            # shlex.join: no argument needs quoting here
    assert part.config_sha256 == info["config"]["sha256"] == facts["config sha256"]
    env = next(t for t in page.tables if t["head"][0] == "environment swapwatch set")
    assert {r[0] for r in env["rows"]} == set(info["env"])
    peaks = next(t for t in page.tables if t["class"] == "peaks")
    assert [r[2] for r in peaks["rows"]] in (["0-1"], ["0", "1"])       # ranks with equal peaks fold


def test_truncated_log_page_marks_unknown_cells(tmp_path):
    text = make([str(truncated_log())])
    page = parse(text)
    res = verify([str(truncated_log())])
    assert "SW106" in {f.code for f in res.findings}
    lm = next(t for t in page.tables if t["class"] == "layer-map")
    assert _layers(lm) == set(range(res.layers))
    assert any(c.endswith("?") for r in lm["rows"] for c in r)
    assert 'data-code="SW106"' in text


def test_a_log_without_a_config_is_not_verified_and_still_a_page(tmp_path):
    d = tmp_path / "nocfg"
    d.mkdir()
    lines = (FIX / "logs" / "msrun_2ranks" / "worker_0.log").read_text().splitlines(True)
    (d / "worker_0.log").write_text("".join(x for x in lines if "from dict" not in x and "Set " not in x))
    rep = build.build([str(d)])
    assert rep.runs[0].verdict.state == "not-verified" and rep.runs[0].verdict.headline == "NOT VERIFIED"
    assert "NOT VERIFIED" in make([str(d)])


def test_two_runs_side_by_side_compare_memory_and_strategies(tmp_path):
    run = passing_run(tmp_path)
    other = FIX / "plot_runs" / "full"
    rep = build.build([str(run), str(other)])
    assert len(rep.runs) == 2 and rep.diff is not None and not rep.diff.same
    assert rep.memory.frames["memory"]["run"].nunique() == 2          # one memory figure, both runs
    page = parse(make([str(run), str(other)]))
    summary = next(t for t in page.tables if t["class"] == "summary")
    assert len(summary["rows"]) == 2
    diff = next(t for t in page.tables if t["class"] == "diff")
    assert any(c.startswith("✗") for r in diff["rows"] for c in r)


def test_cli_report_writes_the_page_and_never_overwrites(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    job = failing_run(tmp_path)
    code, out, err = _cli(["report", str(job), "-o", "r.html"], capsys)
    assert code == 0 and out.startswith("wrote r.html") and (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    code, out, err = _cli(["report", str(job), "-o", "r.html"], capsys)
    assert code == 2 and "--force" in err and len(err.strip().splitlines()) == 1
    code, _, err = _cli(["report", str(tmp_path / "missing")], capsys)
    assert code == 2 and "missing" in err and len(err.strip().splitlines()) == 1
    code, _, err = _cli(["report", str(job), "--config", str(tmp_path / "nope.yaml"), "-o", "x.html"], capsys)
    assert code == 2 and "nope.yaml" in err
    code, _, err = _cli(["report", str(FIX / "configs" / "conflict.yaml"), "-o", "y.html"], capsys)
    assert code == 2 and "training YAML, not a worker log" in err and not (tmp_path / "y.html").exists()
    code, _, err = _cli(["report", str(job), "-o", str(tmp_path / "no" / "such" / "dir.html")], capsys)
    assert code == 2 and "does not exist" in err


def test_run_writes_report_html_by_default_and_not_with_no_report(tmp_path):
    log = FIX / "logs" / "families" / "qwen3_select.log"
    cfg = FIX / "configs" / "families" / "qwen3_select.yaml"
    out = io.BytesIO()
    res = runner.run(["cat", str(log)], config=str(cfg), run_dir=str(tmp_path / "run"), out=out)
    assert res.exit_code == 0
    page = (res.run_dir / "report.html").read_text(encoding="utf-8")
    assert 'data-verdict="pass"' in page and "qwen3" in page
    info = json.loads((res.run_dir / "run.json").read_text())
    assert info["report"] == "report.html" and info["exit_code"] == 0
    assert b"swapwatch run: report " in out.getvalue()
    res = runner.run(["cat", str(log)], config=str(cfg), run_dir=str(tmp_path / "run2"), out=io.BytesIO(),
                     verify=False)
    assert not (res.run_dir / "report.html").exists()              # the page is built on verify's result


def test_run_no_report_on_the_command_line(tmp_path, capsys):
    log = FIX / "logs" / "families" / "qwen3_select.log"
    cfg = FIX / "configs" / "families" / "qwen3_select.yaml"
    code, out, err = _cli(["run", "--no-report", "--config", str(cfg), "--run-dir", str(tmp_path / "run"),
                           "--", "cat", str(log)], capsys)
    assert code == 0 and not (tmp_path / "run" / "report.html").exists()
    assert (tmp_path / "run" / "verify.json").exists()
    assert "report" not in json.loads((tmp_path / "run" / "run.json").read_text())


def test_a_failing_worker_gets_a_report_and_keeps_its_exit_code(tmp_path):
    log = FIX / "logs" / "families" / "qwen3_select.log"
    code = f"import sys; print(open({str(log)!r}).read(), flush=True); raise RuntimeError('worker died')"
    res = runner.run([sys.executable, "-c", code], run_dir=str(tmp_path / "run"), out=io.BytesIO())
    assert res.exit_code == 1
    page = (res.run_dir / "report.html").read_text(encoding="utf-8")
    facts = {r[0]: r[1] for t in parse(page).tables if t["head"] == ["what", "value"] for r in t["rows"]}
    assert facts["exit code"] == "1"
    # which worker failed, and where its log says so
    # (the traceback went to the job's stderr: its copy, console.stderr.log, read as the same rank)
    assert re.fullmatch(r"rank 0: traceback \(.*console\.stderr\.log:\d+\)", facts["ranks that stopped with an error"])


def test_a_report_that_fails_is_a_warning_and_never_the_exit_code(tmp_path):
    # the job itself leaves a report.html in the run dir: swapwatch never overwrites it, says so, and
    # the run's exit code stays the job's
    rdir = tmp_path / "run"
    log = FIX / "logs" / "families" / "qwen3_select.log"
    cfg = FIX / "configs" / "families" / "qwen3_select.yaml"
    code = f"print(open({str(log)!r}).read()); open({str(rdir / 'report.html')!r}, 'w').write('mine')"
    out = io.BytesIO()
    res = runner.run([sys.executable, "-c", code], config=str(cfg), run_dir=str(rdir), out=out)
    assert res.exit_code == 0 and (rdir / "report.html").read_text() == "mine"
    warning = [x for x in out.getvalue().decode().splitlines() if x.startswith("swapwatch run: warning")]
    assert len(warning) == 1 and warning[0].startswith("swapwatch run: warning: no report.html: ")
    assert "already exists" in warning[0]
    assert json.loads((rdir / "run.json").read_text())["report"] is None


def test_the_report_package_is_imported_by_no_check_and_no_module_it_renders():
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1] / "swapwatch"
    for py in root.rglob("*.py"):
        rel = py.relative_to(root)
        if "report" in rel.parts[:1] or py.name in ("cli.py", "runner.py"):
            continue
        text = py.read_text()
        assert not re.search(r"import swapwatch\.report|from swapwatch\.report", text), py
        # a relative import reaches swapwatch.report when its dots climb to the package's top
        # (swapwatch/tune/report.py is tune's own table writer, ``from .report`` inside tune/)
        for dots in re.findall(r"from (\.+)report\b", text):
            assert len(dots) != len(rel.parts), py


@pytest.mark.parametrize("paths, config, state, run_line", [
    # rank 1 printed no MindFormers line (STDOUT_DEVICES): verify cannot speak for it (SW108)
    (["logs/stdout_devices"], None, "pass", "run: applied as configured on 1/2 ranks"),
    # the log is not a run of this config (SW109): nothing is compared per layer
    (["logs/msrun_2ranks"], "configs/conflict.yaml", "fail", "run: differs from the config"),
])
def test_the_run_line_counts_what_verify_compared(paths, config, state, run_line):
    res = verify([str(FIX / p) for p in paths], config_path=str(FIX / config) if config else None)
    v = verdict.read_verdict(res)
    assert v.state == state and v.headline == res.verdict.upper() and v.exit_code == res.exit_code
    assert v.run.startswith(run_line)
    if config:
        assert v.config == "config: 2 errors (SW201)" and "SW109" in v.run
