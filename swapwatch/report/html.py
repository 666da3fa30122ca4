"""The report as one self-contained HTML page: no network at view time, no script.

Why HTML and not a PDF or a PNG: a page opens in any browser from disk or as a CI artifact, its
tables are text (searchable, copyable), and a colleague reads it without swapwatch. Everything the
page needs is inside it: styles in one ``<style>``, figures as inline SVG (matplotlib's SVG with
``svg.fonttype: none``, so figure labels are text too; ids prefixed per figure so two figures'
clip paths never collide), rule explanations as sections linked by ``#rule-SWnnn``. There is no
``<script>`` and no URL to fetch.

The page renders what :mod:`swapwatch.report.build` collected, in the vocabulary of the terminal
(:mod:`swapwatch.layer_table`: ``✗ expected → actual``, ``?``, ``!``; findings grouped by cause
with rank and layer ranges by :mod:`swapwatch.finding_groups`); folded rows and grouped findings
keep a 1,024-rank run's page small (docs/report.md gives the size).
"""
from __future__ import annotations

import datetime as _dt
import html
import io
import re
import shlex
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from .. import __version__, finding_groups, layer_table
from .build import Report, RunPart

#: Group lines shown per rule before "... and N more" (as verify's table: verify_render.TABLE_GROUPS).
MAX_GROUPS = 50

CSS = """
:root { --pass: #1a7f37; --fail: #cf222e; --nv: #9a6700; --muted: #57606a; --line: #d0d7de; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2328;
       margin: 0 auto; padding: 1.2em 2em 3em; max-width: 1500px; }
h1 { font-size: 1.5em; margin: 0 0 .2em; } h2 { font-size: 1.25em; margin: 1.6em 0 .5em;
border-bottom: 1px solid var(--line); padding-bottom: .2em; } h3 { font-size: 1.05em; margin: 1.2em 0 .4em; }
.muted { color: var(--muted); }
table { border-collapse: collapse; margin: .4em 0 .8em; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; font-weight: 600; }
td.mono, code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
td.diff { background: #ffebe9; color: var(--fail); font-weight: 600; }
td.unknown { background: #fff8c5; }
td.voided { background: #fff1e5; }
pre { background: #f6f8fa; padding: .6em .8em; overflow-x: auto; white-space: pre-wrap; }
.verdict { border-left: 6px solid var(--muted); padding: .5em 1em; margin: .6em 0 1em; background: #f6f8fa; }
.verdict.pass { border-color: var(--pass); } .verdict.fail { border-color: var(--fail); }
.verdict.not-verified { border-color: var(--nv); }
.verdict .word { font-size: 1.35em; font-weight: 700; }
.pass .word { color: var(--pass); } .fail .word { color: var(--fail); } .not-verified .word { color: var(--nv); }
.sev-error { color: var(--fail); font-weight: 600; } .sev-warning { color: var(--nv); font-weight: 600; }
figure { margin: .6em 0 1em; overflow-x: auto; } figure svg { max-width: 100%; height: auto; }
figcaption { color: var(--muted); font-size: 12.5px; }
section.run { margin-top: 2.2em; } nav a { margin-right: 1em; }
"""


def e(value: Any) -> str:
    """Text escaped for HTML (every string the page shows goes through here)."""
    return html.escape("" if value is None else str(value), quote=True)


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]], classes: Optional[List[List[str]]] = None,
           caption: str = "", cls: str = "") -> str:
    """A table with a header row; ``classes[i][j]`` the class of cell (i, j) (``diff``, ``unknown``)."""
    out = [f'<table class="{e(cls)}">' if cls else "<table>"]
    if caption:
        out.append(f"<caption class=\"muted\">{e(caption)}</caption>")
    out.append("<thead><tr>" + "".join(f'<th scope="col">{e(h)}</th>' for h in header) + "</tr></thead><tbody>")
    for i, row in enumerate(rows):
        cells = []
        for j, v in enumerate(row):
            c = classes[i][j] if classes and i < len(classes) and j < len(classes[i]) else ""
            cells.append(f'<td class="{c}">{e(v)}</td>' if c else f"<td>{e(v)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


_METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.S)
_ID = re.compile(r'(\bid=")([^"]+)(")')
_REF = re.compile(r'(url\(#|xlink:href="#|href="#)([^)"]+)')


def svg(figure: Any, prefix: str) -> str:
    """The figure as inline SVG (text as text), its ids prefixed so figures on one page never share
    one; drawn under the plots' house style (``plot._render``), metadata pinned as in ``-o x.svg``."""
    from ..plot import _render

    buf = io.StringIO()
    with _render.style():
        figure.savefig(buf, format="svg", metadata=_render._METADATA["svg"], dpi=100)
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    text = _METADATA.sub("", text)          # the RDF block names licence URLs; the page has no use for it
    text = _ID.sub(lambda m: f"{m.group(1)}{prefix}-{m.group(2)}{m.group(3)}", text)
    text = _REF.sub(lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", text)
    return text


def _figure(plot: Any, prefix: str, caption: str) -> str:
    notes = "".join(f"<br>{e(n)}" for n in getattr(plot, "notes", []) or [])
    return f'<figure>{svg(plot.figure, prefix)}<figcaption>{e(caption)}{notes}</figcaption></figure>'


# ---------------------------------------------------------------------------------------------
# Sections of one run
# ---------------------------------------------------------------------------------------------

def _verdict(part: RunPart) -> str:
    v = part.verdict
    if v is None:
        return ""
    words = {"error": "error", "warning": "warning", "info": "note"}
    counts = ", ".join(f"{n} {words.get(k, k)}{'s' if n != 1 else ''}" for k, n in v.counts.items() if n) \
        or "no findings"
    code = "" if v.exit_code is None else f" · verify exit code {v.exit_code}"
    return (f'<div class="verdict {e(v.state)}" data-verdict="{e(v.state)}">'
            f'<div class="word">{e(v.headline)}</div>'
            f'<div class="run-line">{e(v.run)}</div><div class="config-line">{e(v.config)}</div>'
            f'<div class="muted">{e(counts)}{e(code)}</div></div>')


def _duration(info: Dict[str, Any]) -> str:
    try:
        a = _dt.datetime.fromisoformat(str(info.get("start")))
        b = _dt.datetime.fromisoformat(str(info.get("end")))
    except (TypeError, ValueError):
        return "unknown (the run did not finish)" if info.get("start") and not info.get("end") else ""
    return f"{(b - a).total_seconds():.1f} s ({info.get('start')} → {info.get('end')})"


def _run_facts(part: RunPart) -> str:
    info = part.run_info
    rows: List[List[Any]] = [["logs", ", ".join(part.paths)]]
    if info:
        cmd = info.get("command") or []
        rows.append(["command", shlex.join(str(c) for c in cmd) if isinstance(cmd, list) else str(cmd)])
        rows.append(["exit code", info.get("exit_code")])
        child, worker = info.get("child_exit_code"), info.get("worker_exit_code")
        if child not in (None, 0):
            rows.append(["launcher exit code", child])
        if worker is not None:
            rows.append(["first failing worker's exit code", worker])
        if info.get("interrupted"):
            rows.append(["interrupted", info.get("interrupted")])
        rows.append(["duration", _duration(info)])
        if info.get("ranks") is not None or info.get("found_ranks") is not None:
            rows.append(["ranks (asked / found)", f"{_ids(info.get('ranks'))} / {_ids(info.get('found_ranks'))}"])
        if info.get("swapwatch"):
            rows.append(["swapwatch", info.get("swapwatch")])
    if part.runlog is not None:
        ranks = sorted(part.runlog.ranks)
        rows.append(["ranks in the logs", f"{len(ranks)}: {layer_table.ranges(ranks, 6)}"])
    if part.stopped:
        from .build import MAX_STOPPED

        shown = "; ".join(f"rank {r}: {w} ({src})" for r, w, src in part.stopped[:MAX_STOPPED])
        more = len(part.stopped) - MAX_STOPPED
        rows.append(["ranks that stopped with an error", shown + (f"; and {more} more" if more > 0 else "")])
    origin = f" (from {part.config_origin})" if part.config_origin else ""
    rows.append(["config", f"{part.config_path or 'none'}{origin}"])
    if part.config_sha256:
        rows.append(["config sha256", part.config_sha256])
    if info and isinstance(info.get("config"), dict) and info["config"].get("path"):
        rows.append(["config launched", f"{info['config']['path']} (sha256 {info['config'].get('sha256')})"])
    out = ["<h3>The run</h3>", _table(["what", "value"], rows)]
    env = (info or {}).get("env") or {}
    if isinstance(env, dict) and env:
        erows = []
        for k, v in sorted(env.items()):
            if isinstance(v, dict):
                erows.append([k, v.get("wanted"), v.get("used")])
            else:
                erows.append([k, "", v])
        out.append(_table(["environment swapwatch set", "wanted", "used"], erows))
    return "\n".join(out)


def _ids(values: Any) -> str:
    if not values:
        return "-" if values is None else "none"
    return layer_table.ranges(sorted(int(v) for v in values), 6)


def _mark_class(text: str) -> str:
    if text.startswith(layer_table.DIFF):
        return "mono diff"
    if text.endswith(layer_table.UNKNOWN):
        return "mono unknown"
    if layer_table.VOIDED in text:
        return "mono voided"
    return "mono"


def _plan_table(part: RunPart) -> str:
    ex = part.explanation
    if ex is None:
        return ""
    out = ["<h3>The plan: what MindFormers will apply per layer (swapwatch explain)</h3>"]
    from ..results import Explanation

    if not isinstance(ex, Explanation):
        from ..pynative.explain import render_table as pyn_table   # PyNative (r2.x): its own table
        out.append(f"<pre>{e(pyn_table(ex))}</pre>")
        return "\n".join(out)
    from ..render_explain import plan_rows

    header, body = plan_rows(ex)
    out.append(_table(header, body, [[""] * 2 + [_mark_class(c) for c in row[2:]] for row in body],
                      cls="plan"))
    marks = layer_table.legend(c for row in body for c in row[2:])
    if marks:
        out.append(f'<p class="muted">{e("; ".join(marks))}</p>')
    out.append("<pre>" + e("\n".join(layer_table.stage_summary(ex.plan.layers))) + "</pre>")
    return "\n".join(out)


def _verify_map(part: RunPart) -> str:
    res = part.result
    if res is None:
        return ""
    from .. import verify_render as vr

    out = []
    rank = vr.map_rank(res)
    rows = vr.layer_map(res, rank)
    if rows:
        cols = vr._map_columns(rows)
        header = ["layer", "stage"] + [layer_table.COLUMNS[a] for a in cols]
        body = [[r.label(), r.stage] + [r.cells[a].text() for a in cols] for r in rows]
        out.append(f"<h3>Expected vs applied per layer (swapwatch verify)</h3><p>{e(vr._map_heading(res, rank))}</p>")
        out.append(_table(header, body, [["", ""] + [_mark_class(c) for c in row[2:]] for row in body],
                          cls="layer-map"))
        marks = vr._map_legend(body)
        if marks:
            out.append(f'<p class="muted">{e("; ".join(marks))}</p>')
        blind = [r for r in res.ranks if r != rank and vr.unverifiable(res, r)]
        if blind:
            out.append(f"<p>not verified (no strategy lines): rank(s) {e(layer_table.ranges(blind, 6))}</p>")
    own = res.plan.verify_map_lines(res) if res.plan is not None else []
    if own:                 # a path with its own per-layer map (the PlanView's: PyNative's Set ... lines)
        out.append("<h3>Expected vs applied (PyNative)</h3><pre>" + e("\n".join(own)) + "</pre>")
    return "\n".join(out)


def _findings(part: RunPart, codes: set) -> str:
    """Findings grouped by cause (finding_groups), one table per rule, each linking to its rule."""
    res = part.result
    findings = list(res.findings) if res is not None else []
    if part.explanation is not None and res is None:
        findings = list(getattr(part.explanation, "findings", []))
    if not findings:
        return "<h3>Findings</h3><p>none</p>" if res is not None else ""
    from ..checks import REGISTRY
    from .verdict import finding_needs

    out = ["<h3>Findings, grouped by cause</h3>"]
    for code, groups in finding_groups.by_code(finding_groups.group(findings)).items():
        codes.add(code)
        rule = REGISTRY.get(code)
        n = sum(len(g.findings) for g in groups)
        sev = groups[0].severity
        needs = finding_needs(groups[0].first)
        out.append(f'<div class="finding-group" data-code="{e(code)}">'
                   f'<h4><a href="#rule-{e(code)}">{e(code)}</a> <span class="sev-{e(sev)}">{e(sev)}</span> '
                   f'({e("config" if needs == "config" else "run")} finding): {e(rule.title if rule else "")} '
                   f'<span class="muted">({n})</span></h4>')
        rows = []
        for g in groups[:MAX_GROUPS]:
            rows.append([g.where(), g.body, len(g.findings), g.source_text()])
        out.append(_table(["where (ranks · layers)", "what", "findings", "first source"], rows, cls="findings"))
        if len(groups) > MAX_GROUPS:
            out.append(f"<p>... and {len(groups) - MAX_GROUPS} more causes (swapwatch verify --format json "
                       "lists every finding)</p>")
        out.append("</div>")
    return "\n".join(out)


def _row_unit(*values: Any) -> Tuple[str, float]:
    """One unit for a table row, the one its largest figure takes: the newcomer read "15.7 GiB |
    16.7 GiB | 1084 MiB" in one row; figures in one unit compare at a glance. None / NaN: missing."""
    from ..text import unit_for

    return unit_for(max((v for v in values if v is not None and v == v), default=0))


def _estimate(part: RunPart, idx: int) -> str:
    est = part.estimate
    if est is None:
        return ""
    from ..text import fmt_bytes

    out = ["<h3>Predicted vs measured peak per stage (swapwatch estimate)</h3>"]
    rows = []
    for st in est.to_json()["stages"]:
        pred = st["peak_bytes"]
        meas = st.get("measured_peak_bytes")
        err = f"{(pred - meas) / meas:+.1%}" if meas else "-"
        unit = _row_unit(pred, meas)
        rows.append([st["stage"], fmt_bytes(pred, unit), "-" if meas is None else fmt_bytes(meas, unit), err])
    out.append(_table(["stage", "predicted peak", "measured peak (worst rank)", "prediction error"], rows,
                      cls="estimate"))
    note = (f"predicted for the model {est.config} describes (family {est.family}; sizes from the YAML, "
            "uncalibrated); measured: the worst rank of this run")
    out.append(f'<p class="muted">{e(note)}</p>')
    if part.estimate_plot is not None:
        out.append(_figure(part.estimate_plot, f"r{idx}est",
                           f"predicted components per stage for {est.config} (family {est.family}), "
                           "measured peak beside (as swapwatch plot estimate draws it)"))
    return "\n".join(out)


def _run_section(part: RunPart, idx: int, codes: set, single: bool) -> str:
    out = [f'<section class="run" id="run-{idx}">']
    out.append(f"<h2>{'' if single else f'Run {idx + 1}: '}{e(part.label)}</h2>")
    out.append(_verdict(part))
    out.append(_run_facts(part))
    out.append(_plan_table(part))
    out.append(_verify_map(part))
    out.append(_findings(part, codes))
    if part.strategy is not None:
        out.append("<h3>Strategy map (swapwatch plot strategy)</h3>")
        out.append(_figure(part.strategy, f"r{idx}map", "the layer × mechanism map of the config and the logs"))
    out.append(_estimate(part, idx))
    if part.notes:
        out.append("<h3>Not shown</h3><ul>" + "".join(f"<li>{e(n)}</li>" for n in part.notes) + "</ul>")
    out.append("</section>")
    return "\n".join(x for x in out if x)


# ---------------------------------------------------------------------------------------------
# Across runs
# ---------------------------------------------------------------------------------------------

def _summary(report: Report) -> str:
    rows = []
    for i, p in enumerate(report.runs):
        v = p.verdict
        info = p.run_info or {}
        rows.append([i + 1, p.label, v.headline if v else "", v.run if v else "", v.config if v else "",
                     info.get("exit_code", "")])
    return _table(["#", "run", "verdict", "run", "config", "run exit code"], rows, cls="summary")


def _memory(report: Report) -> str:
    mem = report.memory
    if mem is None:
        return ""
    from ..text import fmt_bytes

    out = ['<section id="memory"><h2>Memory per step and rank, and the peaks (swapwatch plot memory)</h2>']
    out.append(_figure(mem, "mem", "the figure swapwatch plot memory draws for these runs"))
    peaks = mem.frames.get("peaks")
    if peaks is not None and not peaks.empty:
        rows = []
        # ranks with the same peaks fold into one row, as verify folds ranks that agree
        for (run, family, used, actual), g in peaks.groupby(["run", "family", "used", "actual"],
                                                             observed=True, dropna=False, sort=False):
            unit = _row_unit(used, actual)
            rows.append([run, family, layer_table.ranges(sorted(g["rank"]), 6), len(g),
                         fmt_bytes(used, unit), fmt_bytes(actual, unit), fmt_bytes(actual - used, unit)])
        out.append(_table(["run", "figures", "ranks", "count", "peak used", "actual peak", "fragmentation"],
                          rows, cls="peaks"))
    if mem.incomparable:
        out.append(f"<p>not comparable: {e(', '.join(mem.incomparable))}</p>")
    out.append("</section>")
    return "\n".join(out)


def _diff(report: Report) -> str:
    d = report.diff
    if d is None:
        return ""
    from ..strategy_diff import stage_changes

    rows = [([ld.layer], ld.stage, ld) for ld in d.layers]
    rows = layer_table.fold(rows, key=lambda r: (r[1], tuple(sorted(r[2].cells.items()))), layers=lambda r: r[0])
    cols = layer_table.used_columns([r[2].cells for r in rows])
    header = ["layer", "stage"] + [layer_table.COLUMNS[a] for a in cols]
    body = [[layer_table.layer_label(ls), stage] + [ld.cells[a] for a in cols] for ls, stage, ld in rows]
    out = ['<section id="diff"><h2>What changes between run 1 and run 2 (swapwatch diff)</h2>',
           f"<p>A: {e(d.a.describe())}<br>B: {e(d.b.describe())}</p>"]
    if d.shape:
        out.append(f"<p>not the same model or run shape: {e(', '.join(d.shape))}</p>")
    out.append(_table(header, body, [["", ""] + [_mark_class(c) for c in row[2:]] for row in body], cls="diff"))
    out.append("<pre>" + e("\n".join(stage_changes(d))) + "</pre>")
    n = sum(1 for ld in d.layers if ld.differs)
    out.append(f"<p>{'SAME: identical layer by layer' if d.same else f'DIFFER: {n} of {len(d.layers)} layers'}</p>")
    out.append("</section>")
    return "\n".join(out)


def _rules(codes: set) -> str:
    if not codes:
        return ""
    from ..rules_doc import explain_rule

    out = ['<section id="rules"><h2>The rules behind these findings (swapwatch rules)</h2>']
    for code in sorted(codes):
        out.append(f'<div id="rule-{e(code)}" class="rule"><h3>{e(code)}</h3><pre>{e(explain_rule(code))}</pre></div>')
    out.append("</section>")
    return "\n".join(out)


def render(report: Report) -> str:
    """The whole page as one string."""
    single = len(report.runs) == 1
    title = "swapwatch report: " + ", ".join(p.label for p in report.runs)
    codes: set = set()
    runs = [_run_section(p, i, codes, single) for i, p in enumerate(report.runs)]
    nav = "".join(f'<a href="#run-{i}">{e(p.label)}</a>' for i, p in enumerate(report.runs))
    extra = "".join(f'<a href="#{k}">{t}</a>' for k, t, ok in
                    (("memory", "memory", report.memory is not None), ("diff", "diff", report.diff is not None),
                     ("rules", "rules", bool(codes))) if ok)
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             # nothing on this page may load anything: no script, no fetch, no frame
             "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
             "style-src 'unsafe-inline'; img-src data:\">",
             f"<title>{e(title)}</title><style>{CSS}</style></head><body>",
             f"<h1>{e(title)}</h1>",
             f'<p class="muted">made by swapwatch {e(__version__)} · one self-contained file: '
             "no network, no script</p>",
             f"<nav>{nav}{extra}</nav>"]
    if not single:
        parts.append("<h2>Runs side by side</h2>" + _summary(report))
    parts.extend(runs)
    parts.append(_memory(report))
    parts.append(_diff(report))
    if report.notes:
        parts.append("<h2>Not shown</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in report.notes) + "</ul>")
    parts.append(_rules(codes))
    parts.append("</body></html>")
    return "\n".join(p for p in parts if p) + "\n"
