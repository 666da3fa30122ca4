"""Which MindFormers maintainer training YAMLs does ``swapwatch estimate`` put above their memory pool
or their card? (issue 35 point 5; docs/estimate.md "The maintainer YAMLs above their card").

Why a tool: that count steers which DryRun records the oracle tier still needs, and it moves every
time the model does (7193bea took Qwen2.5-14B 8k from +10.5 % to -0.6 %), so it must be re-counted
from the same inputs by a command, not remembered. The inputs are MindFormers' own YAMLs, read from
a local git mirror (never written), on the refs the maintainers ship training YAMLs on.

    python tools/maintainer_survey.py [--mirror GIT_DIR] [--code CHECKOUT] [-o OUT.md] [--json OUT.json]

Each training YAML (a name with ``pretrain`` or ``finetune``, under ``configs/`` or ``research/``, on
``master``, ``r1.5.0`` .. ``r1.8.0`` and ``dev`` where they exist), once per distinct content, is
estimated uncalibrated on the family ``explain`` detects (``swapwatch.memory.model.estimate``'s
steps) and classified (:func:`classify`):

* ``not estimated``: the one line swapwatch says (family not modelled, bad input, ...);
* ``above pool``: the highest stage's predicted peak is above ``context.max_device_memory`` as
  MindSpore reads it (``budget.max_device_memory``): the model says the job runs out of its pool;
* ``above card``: ``budget.card_check`` fails: the pool's cap, HCCL's buffers and the runtime do not
  fit the card, whatever the peak;
* ``above pool and card``; ``within``. With no ``max_device_memory`` the pool is not capped by the
  YAML (MindSpore sizes it from the free HBM), so only the card is checked, with the peak as the pool.

For those above their pool or within 10 % of it, ``plan``'s view too: ``make_plan`` at the default
margin (the pool check's parts) with offsets searched, as ``swapwatch plan CONFIG`` runs it. A YAML
whose estimate or plan raises or takes more than :data:`TIME_LIMIT` seconds is reported, not fatal.

The YAMLs above are grouped into shapes (:func:`shape_key`), and each shape is matched with the
oracle tier's full-shape records of a maintainer YAML (``fixtures/dryrun/cases/*_s0`` / ``*_sN``
(stage N as shipped, the others cut), ``*_mb4``,
``*shipped*``: :func:`dryrun_records`) by the shape of the fixture YAML they were cut from.

``--code`` runs another checkout's model (e.g. ``git worktree add /tmp/old 8b7bce4``), for a
before / after count; the JSON names the commit that ran. No mirror: one line, exit 2.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MIRROR = "/work/.mirror/mindspore-lab+mindformers/repo"
#: the refs MindFormers ships training YAMLs on that the survey reads (the ones missing are skipped)
REFS = ("master", "r1.5.0", "r1.6.0", "r1.7.0", "r1.8.0", "dev")
#: a training YAML: under configs/ or research/, its name says pretrain or finetune
TRAINING = re.compile(r"^(configs|research)/(.*/)?[^/]*(pretrain|finetune)[^/]*\.ya?ml$", re.IGNORECASE)
#: seconds one YAML's estimate (and apart, its plan) may take before it is reported and skipped
TIME_LIMIT = 30
#: "close" to the pool: the predicted peak within this fraction below it (the plan is run there too)
CLOSE = 0.10
#: a recorded case keeps a maintainer YAML's peak stage whole when its record says ``"stage_shape":
#: "full"`` (what memory/calibrate.py:corpus_errors reads too); a case YAML queued without its record
#: yet by the name tools/dryrun/record_cases.py gives such a cut
FULL_SHAPE_CASE = re.compile(r"(_s\d+$|_mb4|shipped)")
CASES = os.path.join(ROOT, "fixtures", "dryrun", "cases")
GIB = 1 << 30
MIB = 1 << 20

VERDICTS = ("within", "above pool", "above card", "above pool and card", "not estimated", "error")


class MirrorMissing(Exception):
    """The mirror is not a readable git directory: bad input (exit 2)."""


@dataclass
class Row:
    """One YAML's survey line (the markdown table's row, the JSON's ``rows``)."""

    refs: List[str]
    path: str
    blob: str
    verdict: str
    why: str = ""                       # not estimated / error: the one line
    reason: str = ""                    # not estimated / error: its kind, for the counts (:func:`reason_of`)
    family: str = ""
    shape: Dict[str, Any] = field(default_factory=dict)
    peak_stage: Optional[int] = None
    peak_bytes: Optional[int] = None
    pool_bytes: Optional[int] = None
    card: Optional[Dict[str, Any]] = None
    plan: Optional[str] = None          # fits / fits, unchanged / no plan: ... (above or close only)
    seconds: float = 0.0
    #: memory-relevant keys the model leaves out (``Estimate.unmodelled``): the peak is then a bound,
    #: not a prediction, and "above pool" may be the bound's (Qwen2.5-72B 32k's select comm recompute:
    #: 18.5 % above what DryRun L1 used, 3.4 times while SeqPipe was unmodelled, docs/estimate.md)
    unmodelled: List[str] = field(default_factory=list)

    @property
    def above(self) -> bool:
        return self.verdict.startswith("above")


# ---- the mirror ---------------------------------------------------------------------------------

def _git(mirror: str, *args: str, data: Optional[bytes] = None) -> bytes:
    return subprocess.run(["git", f"--git-dir={mirror}", *args], input=data, capture_output=True,
                          check=True).stdout


def training_yamls(mirror: str, refs: Sequence[str] = REFS) -> List[Tuple[List[str], str, str]]:
    """(refs, path, blob) of every training YAML on ``refs``, one per distinct content (the first
    ref's path names it; the refs that ship it are listed)."""
    if not os.path.isdir(mirror):
        raise MirrorMissing(f"{mirror}: no MindFormers mirror there (--mirror names its git directory)")
    try:
        have = set(_git(mirror, "for-each-ref", "--format=%(refname:short)", "refs/heads").decode().split())
    except (subprocess.CalledProcessError, OSError) as exc:
        raise MirrorMissing(f"{mirror}: not a git directory git can read ({exc})") from None
    by_blob: Dict[str, Tuple[List[str], str]] = {}
    for ref in refs:
        if ref not in have:
            continue
        for line in _git(mirror, "ls-tree", "-r", ref).decode("utf-8", "replace").splitlines():
            meta, _, path = line.partition("\t")
            parts = meta.split()
            if len(parts) != 3 or parts[1] != "blob" or not TRAINING.match(path):
                continue
            seen = by_blob.setdefault(parts[2], ([], path))
            if ref not in seen[0]:
                seen[0].append(ref)
    if not by_blob:
        raise MirrorMissing(f"{mirror}: no training YAML on the refs {', '.join(refs)} (those it has: "
                            f"{', '.join(sorted(have & set(refs))) or 'none'})")
    order = {r: i for i, r in enumerate(refs)}
    return sorted(((r, p, b) for b, (r, p) in by_blob.items()), key=lambda t: (t[1], order[t[0][0]]))


def read_blobs(mirror: str, blobs: Sequence[str]) -> Dict[str, Optional[bytes]]:
    """Each blob's bytes (None: listed in the tree but absent from the mirror)."""
    out: Dict[str, Optional[bytes]] = {}
    for b in blobs:
        try:
            out[b] = _git(mirror, "cat-file", "blob", b)
        except subprocess.CalledProcessError:
            out[b] = None
    return out


# ---- one YAML -----------------------------------------------------------------------------------

class _Late(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Raise :class:`_Late` after ``seconds`` (SIGALRM; the survey runs on the main thread)."""
    def ring(signum: int, frame: Any) -> None:
        raise _Late()

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _one_line(exc: BaseException, shown: str, real: str) -> str:
    text = exc.one_line() if hasattr(exc, "one_line") else f"{type(exc).__name__}: {exc}"
    return " ".join(str(text).replace(real, shown).split())[:300]


def reason_of(exc: Any) -> str:
    """A not-estimated YAML's kind of reason, short enough to count: the family not modelled, or
    the key path of the input swapwatch refuses."""
    what = str(getattr(exc, "what", "") or "")
    m = re.search(r"model family '([^']+)'", what)
    if m:
        return f"family {m.group(1)} not modelled" + (" (legacy path)" if "legacy path" in exc.one_line() else "")
    if what:
        return f"not modelled: {what[:60]}"
    return f"refused at {exc.key}" if getattr(exc, "key", None) else "refused: " + str(exc.message)[:60]


def recompute_summary(layers: Sequence[Dict[str, Any]]) -> str:
    """The layers' choices, counted: ``5 full + 43 select``; a select set is said as ``select``."""
    kinds = Counter(("mtp " if r.get("mtp") else "") + str(r["choice"]).split(":")[0] for r in layers)
    return " + ".join(f"{n} {k}" for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))


def shape_of(est: Any, stage: int) -> Dict[str, Any]:
    """What sets the peak, said briefly: sizes, the strategy, the micro-batches ``stage`` holds in
    flight (model.inflight), recompute, the weights' dtype, the code path."""
    from swapwatch.memory.model import inflight

    spec, geo = est.spec, est.plan.geometry
    flight = inflight(geo.pipeline_stage, geo.pp_interleave_num, spec.micro_batch_num, stage, spec.seq_split)
    # SeqPipe: the pipeline holds sequence chunks; "15/8": 15 chunks of an eighth of a micro-batch
    shown = [f"{c}/{spec.seq_split}" if spec.seq_split > 1 else str(c) for c in flight]
    return {"layers": spec.num_layers, "hidden": spec.hidden, "seq": spec.seq, "batch": spec.batch,
            "dp": spec.dp, "tp": spec.tp, "pp": spec.pp, "ep": spec.ep, "cp": spec.cp,
            "vpp": geo.pp_interleave_num, "micro_batches": spec.micro_batch_num,
            "in_flight": "+".join(shown), "seq_parallel": bool(spec.seq_parallel),
            "recompute": recompute_summary(est.layers),
            "param_dtype": {4: "fp32", 2: "bf16"}.get(spec.param_bytes, f"{spec.param_bytes} B"),
            "path": "mcore" if spec.mcore else "legacy", "optimizer_shard": bool(spec.optimizer_shard)}


def shape_key(family: str, shape: Dict[str, Any]) -> str:
    """One line naming a shape: two YAMLs with the same line size their peak stage alike (sizes,
    strategy, in-flight count, recompute, dtype, path); the ref and the file name do not count."""
    s = shape
    par = f"dp{s['dp']} tp{s['tp']} pp{s['pp']}" + (f" ep{s['ep']}" if s["ep"] > 1 else "") + \
        (f" cp{s['cp']}" if s["cp"] > 1 else "") + (f" vpp{s['vpp']}" if s["vpp"] > 1 else "")
    return (f"{family} L{s['layers']} h{s['hidden']} seq {s['seq']} mbs {s['batch']}, {par}"
            f"{' sp' if s['seq_parallel'] else ''}{' opt-shard' if s['optimizer_shard'] else ''}, "
            f"{s['in_flight']} of {s['micro_batches']} in flight, {s['recompute']}, {s['param_dtype']} weights, "
            f"{s['path']}")


def classify(path: str, shown: Optional[str] = None, plan: bool = True, limit: int = TIME_LIMIT) -> Row:
    """The survey's verdict on the YAML at ``path`` (``shown``: the name it is reported by): the
    steps of ``swapwatch.memory.model.estimate`` (uncalibrated, the family ``explain`` detects),
    ``budget.max_device_memory`` and ``budget.card_check``; ``plan``: also ``make_plan`` at the
    default margin with offsets, when the peak is above the pool or within :data:`CLOSE` of it."""
    from swapwatch.errors import InputError
    from swapwatch.memory import budget as bmod
    from swapwatch.memory import model as mmod

    shown = shown or path
    row = Row(refs=[], path=shown, blob="", verdict="error")
    t0 = time.monotonic()
    try:
        with time_limit(limit):
            cfg = mmod.load_config(path)
            strat = mmod.strategy.plan(cfg)
            row.family = strat.fam.name
            mmod.check_family(strat)
            spec = mmod.spec_from_config(cfg)
            est = mmod.estimate_plan(path, cfg, strat, spec)
    except InputError as exc:              # NotModelled is one: the family or path has no model
        row.verdict, row.why, row.reason = "not estimated", _one_line(exc, shown, path), reason_of(exc)
        row.seconds = round(time.monotonic() - t0, 2)
        return row
    except _Late:
        row.why = row.reason = f"the estimate took more than {limit} s"
        row.seconds = round(time.monotonic() - t0, 2)
        return row
    except Exception as exc:               # a bug in swapwatch: reported, the survey goes on
        row.why = "internal error: " + _one_line(exc, shown, path)
        row.reason = f"internal error ({type(exc).__name__})"
        row.seconds = round(time.monotonic() - t0, 2)
        return row
    row.family = est.family
    row.unmodelled = list(est.unmodelled)
    peaks = [st.peak() for st in est.stages]
    row.peak_stage = max(range(len(peaks)), key=lambda i: peaks[i])
    row.peak_bytes = peaks[row.peak_stage]
    row.shape = shape_of(est, row.peak_stage)
    # the context section as written: the strategy engine's cfg.context keeps only the keys it
    # reads, not max_device_memory (memory/planner.py:search_plan reads it the same way)
    from swapwatch.config import read_config_text
    from swapwatch.memory.emit import yaml_context

    context = yaml_context(read_config_text(path), path)
    row.pool_bytes = bmod.max_device_memory(context)
    hccl = int(mmod.not_in_dryrun(spec)["communication_buffers_bytes"])
    card = bmod.card_check(context, row.pool_bytes if row.pool_bytes is not None else row.peak_bytes, hccl)
    row.card = card.to_json()
    over_pool = row.pool_bytes is not None and row.peak_bytes > row.pool_bytes
    row.verdict = ("above pool and card" if over_pool and not card.fits else "above pool" if over_pool
                   else "above card" if not card.fits else "within")
    close = row.pool_bytes is not None and row.peak_bytes >= (1 - CLOSE) * row.pool_bytes
    if plan and close:
        row.plan = plan_view(path, shown, limit)
    row.seconds = round(time.monotonic() - t0, 2)
    return row


def plan_view(path: str, shown: str, limit: int = TIME_LIMIT) -> str:
    """``swapwatch plan CONFIG``'s answer, briefly: the default margin (the pool check's parts) and
    the layer split searched (make_plan's margin None, offsets True)."""
    from swapwatch.errors import InputError
    from swapwatch.memory.planner import make_plan

    try:
        with time_limit(limit):
            res = make_plan(path, None, margin=None, offsets=True)
    except InputError as exc:
        return "not planned: " + _one_line(exc, shown, path)
    except _Late:
        return f"not planned: the plan took more than {limit} s"
    except Exception as exc:
        return "not planned, internal error: " + _one_line(exc, shown, path)
    if not res.fits:
        return "no plan fits"
    return "fits, the YAML unchanged" if res.unchanged else "fits"


# ---- the oracle tier's records ------------------------------------------------------------------

def dryrun_records(cases: str = CASES) -> Dict[str, List[str]]:
    """shape key -> the full-shape DryRun cases of that shape: ``name (stages 0, 3)`` when recorded,
    ``name (queued: no record)`` for a case YAML without its ``.json``. A case's shape is that of
    the maintainer fixture it was cut from (its header's ``fixtures/configs/mindformers/...``), as
    shipped: the cut keeps the peak stage's layers and in-flight count (tools/dryrun/record_cases.py)."""
    from swapwatch.memory import model as mmod

    out: Dict[str, List[str]] = {}
    if not os.path.isdir(cases):
        return out
    shapes: Dict[str, Optional[str]] = {}
    for name in sorted(os.listdir(cases)):
        stem, ext = os.path.splitext(name)
        record = os.path.join(cases, stem + ".json")
        data: Optional[Dict[str, Any]] = None
        if ext == ".yaml" and os.path.exists(record):
            with open(record, encoding="utf-8") as fh:
                data = json.load(fh)
        if ext != ".yaml" or not (data.get("stage_shape") == "full" if data is not None
                                  else FULL_SHAPE_CASE.search(stem)):
            continue
        with open(os.path.join(cases, name), encoding="utf-8") as fh:
            head = fh.readline()
        m = re.search(r"(fixtures/configs/mindformers/\S+\.yaml)", head)
        if not m:
            continue
        source = m.group(1)
        if source not in shapes:
            try:
                est = mmod.estimate(os.path.join(ROOT, source))
                peaks = [st.peak() for st in est.stages]
                top = max(range(len(peaks)), key=lambda i: peaks[i])
                shapes[source] = shape_key(est.family, shape_of(est, top))
            except Exception:             # a fixture the model cannot size has no shape to match
                shapes[source] = None
        key = shapes[source]
        if key is None:
            continue
        if data is not None:
            stages = [s["stage"] for s in data.get("stages", [])]
            what = f"{stem} (stage{'s' if len(stages) != 1 else ''} {', '.join(map(str, stages)) or 'none'})"
        else:
            what = f"{stem} (queued: no record)"
        out.setdefault(key, []).append(what)
    return out


# ---- the survey ---------------------------------------------------------------------------------

def _code_commit(code: str) -> str:
    try:
        return subprocess.run(["git", "-C", code, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (subprocess.CalledProcessError, OSError):
        return "unknown"


def survey(mirror: str, refs: Sequence[str] = REFS, plan: bool = True,
           progress: Optional[Any] = None) -> List[Row]:
    """Every training YAML of the mirror, classified (:func:`classify`), in path order."""
    found = training_yamls(mirror, refs)
    blobs = read_blobs(mirror, [b for _, _, b in found])
    rows: List[Row] = []
    tmp = tempfile.mkdtemp(prefix="maintainer-survey-")
    try:
        for i, (rs, path, blob) in enumerate(found):
            shown = f"{rs[0]}:{path}"
            data = blobs[blob]
            if data is None:
                row = Row(refs=rs, path=path, blob=blob, verdict="not estimated",
                          why="the blob is listed but absent from the mirror")
            else:
                # each YAML in a directory of its own, under its own name (messages name the file)
                where = os.path.join(tmp, str(i), os.path.basename(path))
                os.makedirs(os.path.dirname(where))
                with open(where, "wb") as fh:
                    fh.write(data)
                row = classify(where, shown, plan=plan)
                row.refs, row.path, row.blob = rs, path, blob
            rows.append(row)
            if progress is not None:
                progress(f"{i + 1}/{len(found)} {row.verdict:20s} {row.seconds:6.2f}s {shown}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def fixture_blobs() -> Dict[str, str]:
    """git blob id -> fixture file, for the maintainer fixtures: a mirror YAML that *is* one says so
    (a fixture is the maintainers' file under one ``# From MindFormers ...`` provenance line)."""
    out = {}
    base = os.path.join(ROOT, "fixtures", "configs", "mindformers")
    for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        with open(os.path.join(base, name), "rb") as fh:
            data = fh.read()
        bodies = [data]
        if data.startswith(b"# From MindFormers"):
            bodies.append(data.partition(b"\n")[2])
        for body in bodies:
            out[hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest()] = name
    return out


def _gib(n: Optional[int]) -> str:
    return "-" if n is None else f"{n / GIB:.1f}"


def summary(rows: Sequence[Row], records: Dict[str, List[str]]) -> Dict[str, Any]:
    """The counts per verdict, the shapes above, each with its DryRun records."""
    counts = Counter(r.verdict for r in rows)
    shapes: Dict[str, Dict[str, Any]] = {}
    for r in rows:
        if not r.above:
            continue
        key = shape_key(r.family, r.shape)
        s = shapes.setdefault(key, {"shape": key, "yamls": [], "verdicts": [], "plan": [],
                                    "dryrun": records.get(key, [])})
        s["yamls"].append(f"{','.join(r.refs)}:{r.path}")
        bound = f" (a bound: {', '.join(r.unmodelled)} unmodelled)" if r.unmodelled else ""
        s["verdicts"].append(f"{r.verdict}, stage {r.peak_stage} {_gib(r.peak_bytes)} of {_gib(r.pool_bytes)} GiB"
                             + bound)
        if r.plan:
            s["plan"].append(r.plan)
    reasons = Counter(r.reason for r in rows if r.verdict in ("not estimated", "error"))
    return {"yamls": len(rows), "estimated": sum(1 for r in rows if r.verdict not in ("not estimated", "error")),
            "counts": {v: counts.get(v, 0) for v in VERDICTS},
            "above": sum(1 for r in rows if r.above),
            "above_on_a_bound": sum(1 for r in rows if r.above and r.unmodelled),
            "plan": dict(Counter(r.plan.split(":")[0] for r in rows if r.plan)),
            "not_estimated": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
            "shapes_above": sorted(shapes.values(), key=lambda s: s["shape"])}


def markdown(rows: Sequence[Row], summ: Dict[str, Any], head: Dict[str, Any]) -> str:
    """The survey as markdown: the header, the counts, the shapes above, one row per YAML."""
    fixtures = fixture_blobs()
    out = [f"# Maintainer YAMLs against their pool and card ({head['date']})", "",
           f"`{head['command']}`: swapwatch {head['code_commit']}, mirror refs {', '.join(head['refs'])}: "
           f"{summ['yamls']} training YAMLs (distinct contents), {summ['estimated']} estimated.", "",
           "| verdict | YAMLs |", "|---|---|"]
    out += [f"| {v} | {n} |" for v, n in summ["counts"].items()]
    out += ["", f"Of the {summ['above']} above, {summ['above_on_a_bound']} on a bound (the estimate names "
            "keys it leaves out: the figure is an upper bound, not a prediction)."]
    out += ["", "Not estimated, why: " + "; ".join(f"{k} {n}" for k, n in summ["not_estimated"].items())]
    out += ["", f"Plan's view (default margin, offsets searched; above pool or within {CLOSE:.0%} of it): "
            + (", ".join(f"{k} {n}" for k, n in sorted(summ["plan"].items())) or "none"), "",
            "## The shapes above their pool or card", "",
            "| shape | YAMLs | verdicts | plan | DryRun record |", "|---|---|---|---|---|"]
    for s in summ["shapes_above"]:
        out.append(f"| {s['shape']} | {'<br>'.join(s['yamls'])} | {'<br>'.join(s['verdicts'])} | "
                   f"{'; '.join(sorted(set(s['plan']))) or '-'} | {'; '.join(s['dryrun']) or 'not recorded'} |")
    out += ["", "## Every YAML", "",
            "| ref(s) | path | family | seq | dp/tp/pp | in flight | recompute | weights | code path | "
            "max stage peak (GiB) | pool (GiB) | verdict | plan |", "|---" * 13 + "|"]
    for r in rows:
        name = r.path + (f" (= fixture {fixtures[r.blob]})" if r.blob in fixtures else "")
        if r.verdict in ("not estimated", "error"):
            out.append(f"| {','.join(r.refs)} | {name} | {r.family or '-'} | | | | | | | | | {r.verdict}: "
                       f"{r.why.replace('|', '/')} | |")
            continue
        s = r.shape
        out.append(f"| {','.join(r.refs)} | {name} | {r.family} | {s['seq']} | {s['dp']}/{s['tp']}/{s['pp']}"
                   f"{' sp' if s['seq_parallel'] else ''} | {s['in_flight']} of {s['micro_batches']} | "
                   f"{s['recompute']} | {s['param_dtype']} | {s['path']} | {_gib(r.peak_bytes)} (stage "
                   f"{r.peak_stage}) | {_gib(r.pool_bytes) if r.pool_bytes is not None else 'unset'} | "
                   f"{r.verdict}{' (a bound)' if r.unmodelled else ''} | {r.plan or ''} |")
    return "\n".join(out) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirror", default=os.environ.get("SWAPWATCH_MINDFORMERS_MIRROR", DEFAULT_MIRROR),
                    help="MindFormers' git directory (read only)")
    ap.add_argument("--code", default=ROOT, help="the swapwatch checkout whose model runs (default: this one)")
    ap.add_argument("--code-commit", help="the commit --code holds, when it is not a git checkout (git archive)")
    ap.add_argument("--refs", default=",".join(REFS), help="comma-separated refs (missing ones are skipped)")
    ap.add_argument("--no-plan", action="store_true", help="skip plan's view")
    ap.add_argument("-o", "--output", help="write the markdown here (default: stdout)")
    ap.add_argument("--json", help="write the JSON (summary and rows) here")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    args = ap.parse_args(argv)
    code = os.path.abspath(args.code)
    if not os.path.isfile(os.path.join(code, "swapwatch", "__init__.py")):
        print(f"maintainer_survey: --code {args.code}: no swapwatch checkout there", file=sys.stderr)
        return 2
    sys.path.insert(0, code)
    refs = [r for r in args.refs.split(",") if r]
    log = None if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    import swapwatch

    if os.path.dirname(os.path.dirname(os.path.abspath(swapwatch.__file__))) != code:
        print(f"maintainer_survey: swapwatch was imported from {swapwatch.__file__}, not --code {code}",
              file=sys.stderr)
        return 3
    try:
        rows = survey(args.mirror, refs, plan=not args.no_plan, progress=log)
    except MirrorMissing as exc:
        print(f"maintainer_survey: {exc}", file=sys.stderr)
        return 2
    summ = summary(rows, dryrun_records())
    shown_argv = " ".join(["python tools/maintainer_survey.py", *(argv if argv is not None else sys.argv[1:])])
    head = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": shown_argv,
            "code_commit": args.code_commit or _code_commit(code), "mirror": args.mirror, "refs": refs}
    text = markdown(rows, summ, head)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({**head, "summary": summ, "rows": [asdict(r) for r in rows]}, fh, indent=1)
            fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
