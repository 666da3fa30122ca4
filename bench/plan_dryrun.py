"""``swapwatch plan`` on the maintainer YAMLs, checked stage by stage with MindSpore DryRun L1 (issue 35:
"docs/plan.md carries the table re-measured").

For each maintainer YAML of ``fixtures/configs/mindformers/`` that DryRun can run here:

1. *derive* the YAML (``fixtures/dryrun/plans/<name>.yaml``): the maintainer YAML with as few edits
   as DryRun here needs, spliced into its text (each said in :data:`CASES`): fewer micro-batches where
   MindSpore would unroll too many copies, never fewer than the pipeline holds in flight (1F1B holds
   ``min(m, P - p)`` on stage p); MindFormers 2.1.0's AdamW where the YAML names an optimizer 2.1.0
   lacks; or the oracle tier's case YAML that already carries them (``from_case``: the r1.5.0 YAMLs
   DryRun ran whole);
2. *plan* it at its own ``context.max_device_memory`` with the default margin and the split searched
   (what ``swapwatch plan CONFIG`` does), with ``--calibrate`` naming DryRun of the derived YAML itself
   where the case says so (``calibrate``: the maintainers' strategy checked by what MindSpore holds,
   where the margin's bounds alone cannot tell it fits): ``<name>.planned.yaml``;
3. *record* DryRun L1 of the planned YAML stage by stage, each stage through a **stage cut**
   (``<name>.planned.s<p>.yaml``): the planned YAML with stage p's layers and strategy as they are and
   every other stage cut to one layer (``num_layers`` and ``offset``), the other stages' counts
   clipped to it, and ``micro_batch_num`` ``P - p`` (what stage p holds in flight). MindSpore builds
   and unrolls the whole network before the pipeline split, so compiling costs layers x micro-batches
   of the whole job (Llama2-70B at full size: 640 layer copies, stage 0 did not finish in 90 minutes
   here); a stage cut keeps everything stage p's peak depends on (its layers, its micro-batches in
   flight, the embedding or head it holds) at 17-40 % of the copies. The model agrees: the estimate
   of stage p is the same on the cut as on the planned YAML (tests/test_plan_dryrun.py checks it).
   Results in ``<name>.json``, rewritten after each stage; the planned YAML's sha256 is kept (a
   record of another plan is not reused);
4. optionally the maintainers' own strategy the same way (``--own``: ``<name>.own.json``, whose
   ``yaml`` is the derived YAML the stage cuts stand for: a DryRun record ``--calibrate`` reads).

With interleave the stage cut is per chunk (:func:`stage_cut_text`: a V x P offset, the dense layers
a dense-then-MoE family keeps, the fewest micro-batches that keep the stage's in-flight count). A plan
DryRun put over its budget is kept as ``<name>.failed.json`` beside its ``<name>.failed.planned.yaml``
(renamed by hand from the record): calibrate.plan_errors counts its miss for its table, and ``plan``
no longer writes it (tests/test_plan_dryrun.py). A case marked ``numpy1`` runs DryRun under the
oracle lock with numpy 1.26 (:data:`NUMPY1_PYTHON`), said in each stage's ``python``.

tests/test_plan_dryrun.py re-plans every recorded case and requires the same planned YAML, and checks
each recorded stage: DryRun's actual peak (with fragments) within the budget, the estimate's error.

    python bench/plan_dryrun.py --list
    python bench/plan_dryrun.py NAME [--stage N]...     # derive, plan, record (minutes per stage)
    python bench/plan_dryrun.py --table [NAME]...       # docs/plan.md's rows from the records
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from swapwatch.memory.emit import DELETE, splice  # noqa: E402
from swapwatch.memory.planner import PlanResult, make_plan  # noqa: E402

PLANS = os.path.join(ROOT, "fixtures", "dryrun", "plans")
SRC = os.path.join(ROOT, "fixtures", "configs", "mindformers")
MIB = 1 << 20

#: MindFormers 2.1.0 has no FP32StateAdamWeightDecay (the Llama2-70B YAML's); its AdamW keeps both
#: moments in fp32 as well (mindformers core/optim/__init__.py: AdamW), as the oracle tier's Llama cuts
ADAMW = {("optimizer", "type"): "AdamW", ("optimizer", "beta1"): DELETE, ("optimizer", "beta2"): DELETE,
         ("optimizer", "betas"): [0.9, 0.95], ("optimizer", "weight_decay"): 0.0}

#: name -> source YAML, the edits (key path -> value) and why
CASES: Dict[str, Dict[str, Any]] = {
    "qwen3_32b": {"source": "pretrain_qwen3_32b_4k.yaml", "edits": {}, "why": "as shipped"},
    "llama2_70b": {"source": "pretrain_llama2_70b.yaml",
                   "edits": {**ADAMW, ("parallel_config", "micro_batch_num"): 8},
                   "why": "AdamW for FP32StateAdamWeightDecay (not in MindFormers 2.1.0); 8 of the 128 "
                          "micro-batches (8 stages: every stage holds as many in flight)"},
    "qwen3_30b_a3b": {"source": "pretrain_qwen3_30b_a3b_4k.yaml",
                      "edits": {("parallel_config", "micro_batch_num"): 4},
                      "why": "4 of the 16 micro-batches (4 stages: every stage holds as many in flight)"},
    "glm4_9b": {"source": "finetune_glm4_9b.yaml", "edits": {("parallel_config", "micro_batch_num"): 4},
                "why": "4 of the 64 micro-batches (4 stages: every stage holds as many in flight)"},
    "qwen2_5_7b": {"source": "finetune_qwen2_5_7b_8k.yaml", "edits": {("parallel_config", "micro_batch_num"): 2},
                   "why": "2 of the 16 micro-batches (2 stages: every stage holds as many in flight)"},
    # the maintainers' strategy is over the margin's bounds on both stages but within the pool by DryRun
    # (58350 MiB actual of 59392 on stage 0): planned with that DryRun (``calibrate``), as plan's note says
    "qwen2_5_32b_8k": {"source": "finetune_qwen2_5_32b_8k.yaml",
                       "edits": {("parallel_config", "micro_batch_num"): 2},
                       "calibrate": ["fixtures/dryrun/plans/qwen2_5_32b_8k.own.json"],
                       "why": "2 of the 128 micro-batches (2 stages: every stage holds as many in flight); "
                              "planned with DryRun of the YAML itself"},
    # by the margin alone: 118 % of the maintainers' FLOPs, fitting by DryRun (``.margin.json``); planned
    # with DryRun of their own YAML (``.own.json``), as qwen2_5_32b_8k
    "qwen2_5_14b_8k": {"source": "finetune_qwen2_5_14b_8k.yaml",
                       "edits": {("parallel_config", "micro_batch_num"): 4},
                       "calibrate": ["fixtures/dryrun/plans/qwen2_5_14b_8k.own.json"],
                       "why": "4 of the 128 micro-batches (4 stages: every stage holds as many in flight)"},
    # the first plan failed by DryRun on O1 SeqPipe fragments (``.failed.json``): planned with DryRun of
    # their own YAML
    "qwen2_5_72b_32k": {"source": "finetune_qwen2_5_72b_32k.yaml",
                        "edits": {("parallel_config", "micro_batch_num"): 8},
                        "calibrate": ["fixtures/dryrun/plans/qwen2_5_72b_32k.own.json"],
                        "numpy1": "under numpy 2 the planned stage cuts fail in SeqPipe's "
                                  "_VirtualAssignKvCache backward (grad_comm_ops.py), folding a bfloat16 zero",
                        "why": "8 of the 32 micro-batches (8 stages: every stage holds as many in flight)"},
    # interleaved (2 chunks a stage, seqpipe): stage cuts per chunk, 16 micro-batches for stages 0-3
    # (bench/plan_dryrun.cut_micro_batches)
    "deepseek_v3": {"source": "pretrain_deepseek3_671b.yaml",
                    "edits": {("parallel_config", "micro_batch_num"): 16},
                    "why": "16 of the 32 micro-batches (8 stages, 2 chunks each: every stage holds as many "
                           "in flight)"},
    "llama3_1_70b": {"source": "finetune_llama3_1_70b.yaml", "edits": {("parallel_config", "micro_batch_num"): 8},
                     "why": "8 of the 256 micro-batches (8 stages: every stage holds as many in flight)"},
    # the single-stage r1.5.0 YAMLs, from the oracle tier's whole-YAML records (the edits 2.1.0 needs are
    # already in those, said in their header: tools/dryrun/record_cases.py)
    "glm3_6b_r150": {"source": "r1.5.0_run_glm3_6b_multiturn_finetune_800T_A2_64G.yaml",
                     "from_case": "glm3_6b_multiturn_r150_shipped.yaml", "edits": {},
                     "why": "MindFormers 2.1.0's AdamW, the clip on, MindDataset for the multi-turn loader "
                            "(the oracle case glm3_6b_multiturn_r150_shipped)"},
    "llama2_13b_pretrain_r150": {"source": "r1.5.0_pretrain_llama2_13b.yaml",
                                 "from_case": "llama2_13b_pretrain_r150_shipped.yaml", "edits": {},
                                 "why": "MindFormers 2.1.0's AdamW (the oracle case llama2_13b_pretrain_r150_shipped)"},
    "llama2_7b_finetune_r150": {"source": "r1.5.0_finetune_llama2_7b.yaml",
                                "from_case": "llama2_7b_finetune_r150_shipped.yaml", "edits": {},
                                "why": "MindFormers 2.1.0's AdamW (the oracle case llama2_7b_finetune_r150_shipped)"},
    # the two whose pool need by the margin's bounds is over the budget whatever the strategy (each peaks
    # at its backward's end, which no recompute lowers: docs/estimate.md "A single stage's gradients"),
    # while DryRun holds the YAML within it: planned with that DryRun (``--calibrate`` its own record),
    # which makes the YAML's own strategy a candidate checked by what DryRun measured
    "qwen1_5_7b_finetune_r150": {"source": "r1.5.0_finetune_qwen1_5_7b.yaml",
                                 "from_case": "qwen1_5_7b_finetune_r150_shipped.yaml", "edits": {},
                                 "calibrate": ["fixtures/dryrun/plans/qwen1_5_7b_finetune_r150.own.json"],
                                 "why": "MindFormers 2.1.0's AdamW (the oracle case qwen1_5_7b_finetune_r150_shipped); "
                                        "planned with DryRun of the YAML itself"},
    "llama2_13b_finetune_r150": {"source": "r1.5.0_finetune_llama2_13b.yaml",
                                 "from_case": "llama2_13b_finetune_r150_shipped.yaml", "edits": {},
                                 "calibrate": ["fixtures/dryrun/plans/llama2_13b_finetune_r150.own.json"],
                                 "why": "MindFormers 2.1.0's AdamW (the oracle case llama2_13b_finetune_r150_shipped); "
                                        "planned with DryRun of the YAML itself"},
}

#: the interpreter a ``numpy1`` case runs DryRun with: the oracle lock with numpy 1.26 (``make
#: dryrun-pynative``), the same MindSpore and MindFormers. MindSpore 2.10 is built against numpy 1, and
#: under the oracle venv's numpy 2 a bfloat16 constant its compile folds cannot become an array ("The
#: Numpy bfloat16 data type is not supported now ... the major versions are same"); MindFormers 2.1.0
#: itself pins numpy<2, so a user's install never meets it
NUMPY1_PYTHON = os.path.join(ROOT, ".pynative-venv", "bin", "python")

#: the oracle tier's DryRun cases (a ``from_case`` is one of them)
ORACLE_CASES = os.path.join(ROOT, "fixtures", "dryrun", "cases")


def derived_path(name: str) -> str:
    return os.path.join(PLANS, f"{name}.yaml")


def derive_text(name: str) -> str:
    """The YAML DryRun runs for ``name``: the maintainer YAML with the case's edits spliced in."""
    case = CASES[name]
    src = os.path.join(ORACLE_CASES, case["from_case"]) if case.get("from_case") else os.path.join(SRC, case["source"])
    with open(src, encoding="utf-8") as fh:
        text = fh.read()
    edits = list(case["edits"].items())
    out = splice(text, src, edits) if edits else text
    return (f"# plan DryRun case {name} (bench/plan_dryrun.py): fixtures/configs/mindformers/{case['source']}, "
            f"{case['why']}.\n") + out


def derive(name: str) -> str:
    """Write :func:`derive_text` beside the records."""
    os.makedirs(PLANS, exist_ok=True)
    with open(derived_path(name), "w", encoding="utf-8") as fh:
        fh.write(derive_text(name))
    return derived_path(name)


def plan(name: str, calibrate: Optional[Sequence[str]] = None) -> PlanResult:
    """``swapwatch plan <derived YAML> [--calibrate ...]`` (budget: its context.max_device_memory; the
    default margin; the split searched). ``calibrate``: DryRun records of the derived YAML itself
    (``<name>.own.json``), paths from the repository's root."""
    runs = [os.path.join(ROOT, c) for c in (calibrate or [])]
    return make_plan(derived_path(name), None, runs, margin=None, offsets=True)


def planned_text(res: PlanResult) -> str:
    if not res.fits or res.text is None:
        raise SystemExit(f"{res.config}: {res.message()}")
    return res.text


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


LAYER_KEYS = (("model", "model_config", "num_layers"), ("model", "model_config", "num_hidden_layers"))
COUNT_KEYS = ("recompute", "select_recompute", "select_comm_recompute")


def stage_cut_text(text: str, source: str, stage: int) -> str:
    """``text`` (a planned YAML) with every stage but ``stage`` cut to one layer a chunk, the per-stage
    counts of those stages clipped to it, and ``micro_batch_num`` the fewest that keep what ``stage``
    holds in flight (module docstring, step 3; :func:`cut_micro_batches`). With interleave the cut is
    per chunk (a V x P offset table, the count tables clipped row by row), and a dense-then-MoE
    family's ``first_k_dense_replace`` counts the dense layers the cut keeps (the other stages' one
    layer a chunk stands for the chunk's first), so every layer of ``stage`` keeps its kind. A single
    stage's cut is the planned YAML itself: nothing to cut, and its ``micro_batch_num`` is no
    pipeline's."""
    import yaml

    from swapwatch.memory.model import plan_of

    _, plan, spec = plan_of(source, None, text)
    geo = plan.geometry
    P, V = geo.pipeline_stage, geo.pp_interleave_num
    if P == 1:
        return text
    counts = [list(row) for row in geo.layer_list]
    new = [[row[q] if q == stage else 1 for q in range(P)] for row in counts]
    total = sum(map(sum, new))
    doc = yaml.safe_load(text)
    mc = doc["model"]["model_config"]
    key = next(k for k in LAYER_KEYS if k[-1] in mc)
    base_n = total // (P * V)
    offset: Any = [n - base_n for n in new[0]] if V == 1 else [[n - base_n for n in row] for row in new]
    edits: List[Any] = [(key, total), (("model", "model_config", "offset"), offset),
                        (("parallel_config", "micro_batch_num"), cut_micro_batches(spec, geo, stage))]
    dense = getattr(plan.fam, "first_k_dense_replace", None)     # the YAML's or its config class default
    if isinstance(dense, int) and dense > 0:
        # each layer the cut keeps, by the full layer it stands for (chunk by chunk, stage by stage)
        kept = [geo.chunk_starts[v][q] + i for v in range(V) for q in range(P) for i in range(new[v][q])]
        edits.append((("model", "model_config", "first_k_dense_replace"), sum(1 for i in kept if i < dense)))
    base = ("recompute_config",) if isinstance(doc.get("recompute_config"), dict) else ("parallel_config", "recompute")
    section = doc.get("recompute_config") or (doc.get("parallel_config") or {}).get("recompute") or {}

    def clip(v: Any) -> Any:
        if isinstance(v, list) and len(v) == P and all(isinstance(x, int) for x in v):
            return [v[q] if q == stage else min(v[q], 1) for q in range(P)]
        if isinstance(v, list) and len(v) == V and all(isinstance(r, list) and len(r) == P for r in v):
            return [clip(r) for r in v]
        return v

    for k in COUNT_KEYS:
        v = section.get(k) if isinstance(section, dict) else None
        clipped = clip(v)
        if isinstance(v, list) and clipped is not v:
            edits.append((base + (k,), clipped))
        elif isinstance(v, dict):
            edits.append((base + (k,), {pat: clip(c) for pat, c in v.items()}))
    return splice(text, source, edits)


def cut_micro_batches(spec: Any, geo: Any, stage: int) -> int:
    """The fewest micro-batches with which ``stage`` holds in flight what it holds with the YAML's
    (``memory.model.inflight``), at least 2 (MindSpore refuses a pipeline of one micro-batch: "batch
    data must be split into micro batch"). One chunk a stage: ``P - p`` (1F1B). With interleave, a
    multiple of P: MindSpore's seqpipe scheduler takes its first round from ``m / P``
    (``seqpipe_inflight``), and at a multiple of P that is interleaved 1F1B's count, the one the
    model uses; the compile costs layers x micro-batches, so the least that keeps the count."""
    from swapwatch.memory.model import inflight

    P, V, m = geo.pipeline_stage, geo.pp_interleave_num, spec.micro_batch_num
    if V == 1:
        return max(2, min(m, P - stage))
    want = inflight(P, V, m, stage)
    for k in range(P, m, P):
        if inflight(P, V, k, stage) == want:
            return k
    return m


def _measure_cut(name: str, text: str, source: str, stage: int, tag: str, timeout: float) -> Dict[str, Any]:
    """DryRun ``stage`` of the stage cut of ``text``; the cut is kept beside the records."""
    from swapwatch.memory.dryrun import measure

    cut = stage_cut_text(text, source, stage)
    path = os.path.join(PLANS, f"{name}.{tag}.s{stage}.yaml")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(cut)
    # one directory per process: two processes recording the same case beside each other must not
    # write one DryRun's logs over the other's
    numpy1 = CASES[name].get("numpy1")
    out = measure(path, [stage], timeout=timeout, python=NUMPY1_PYTHON if numpy1 else None,
                  work_dir=f"/tmp/swapwatch-plan-dryrun/{name}.{tag}.s{stage}.{os.getpid()}")
    p = out.stages[stage]
    got = {"stage": stage, "rank_id": p.rank_id, "used_peak_mib": p.used_bytes // MIB,
           "actual_peak_mib": p.actual_bytes // MIB, "seconds": p.seconds, "ran": os.path.basename(path),
           "ran_sha256": sha(cut), "rank_size": out.rank_size}
    if numpy1:
        got["python"] = "numpy 1.26 (.pynative-venv: " + numpy1 + ")"
    return got


def record_own(name: str, stages: Sequence[int], timeout: float = 7200) -> None:
    """DryRun the derived YAML itself (the maintainers' strategy): ``<name>.own.json``, a DryRun
    record ``--calibrate`` reads (``plan`` then checks that strategy's measured stages with DryRun's
    actual peak)."""
    path = derive(name)
    text = derive_text(name)
    js = os.path.join(PLANS, f"{name}.own.json")
    done: Dict[int, Dict[str, Any]] = {}
    if os.path.exists(js):
        with open(js, encoding="utf-8") as fh:
            done = {s["stage"]: s for s in json.load(fh)["stages"]}
    for stage in stages:
        done[stage] = _measure_cut(name, text, path, stage, "own", timeout)
        if os.path.exists(js):   # another process may have recorded its stage since: keep it
            with open(js, encoding="utf-8") as fh:
                done = {**{s["stage"]: s for s in json.load(fh)["stages"]}, **{stage: done[stage]}}
        _write_own(name, done)
        print(name, "own", stage, done[stage]["used_peak_mib"], done[stage]["actual_peak_mib"], flush=True)


def _write_own(name: str, done: Dict[int, Dict[str, Any]]) -> None:
    data = {"yaml": f"{name}.yaml", "source": CASES[name]["source"], "why": CASES[name]["why"],
            "derived_sha256": sha(derive_text(name)), "stages": [done[s] for s in sorted(done)]}
    with open(os.path.join(PLANS, f"{name}.own.json"), "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1)
        fh.write("\n")


def _recorded(js: str, planned_sha: str) -> Dict[int, Dict[str, Any]]:
    """The stages ``js`` holds for the plan of ``planned_sha`` as it is on disk now: another
    ``record`` of the same plan may run beside this one (one process per stage on a machine with
    cores to spare) and have written its stage since this one started; rewriting the record from
    this process's stages alone would drop that stage."""
    if not os.path.exists(js):
        return {}
    with open(js, encoding="utf-8") as fh:
        old = json.load(fh)
    return {s["stage"]: s for s in old["stages"]} if old.get("planned_sha256") == planned_sha else {}


def record(name: str, stages: Optional[Sequence[int]] = None, timeout: float = 7200) -> None:
    derive(name)
    cal = CASES[name].get("calibrate")
    res = plan(name, cal)
    text = planned_text(res)
    path = os.path.join(PLANS, f"{name}.planned.yaml")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    js = os.path.join(PLANS, f"{name}.json")
    done = _recorded(js, sha(text))
    wanted = list(stages) if stages else [p for p in range(len(res.planned.stages)) if p not in done]
    # stage cuts DryRun already ran, byte for byte: the previous plan's (a plan that changed on other
    # stages leaves this stage's cut as it was) and, when the plan is the maintainers' YAML, theirs
    def already_ran() -> Dict[str, Dict[str, Any]]:
        # read again before every stage: another process recording this case may have run it since
        ran: Dict[str, Dict[str, Any]] = {}
        for other in (js, os.path.join(PLANS, f"{name}.own.json")):
            if os.path.exists(other) and (other == js or res.unchanged):
                with open(other, encoding="utf-8") as fh:
                    ran.update({s["ran_sha256"]: s for s in json.load(fh)["stages"] if s.get("ran_sha256")})
        return ran

    for stage in wanted:
        ran = already_ran()
        cut_sha = sha(stage_cut_text(text, path, stage))
        if cut_sha in ran and ran[cut_sha]["stage"] == stage:
            done[stage] = dict(ran[cut_sha])   # the same stage cut ran: its DryRun answer stands
        else:
            done[stage] = _measure_cut(name, text, path, stage, "planned", timeout)
        p = done[stage]
        done = {**_recorded(js, sha(text)), **done}
        data = {"case": name, "yaml": os.path.basename(path), "source": CASES[name]["source"],
                "why": CASES[name]["why"], "planned": os.path.basename(path), "planned_sha256": sha(text),
                "unchanged": res.unchanged, "calibrate": cal, "budget_bytes": res.budget,
                "stages": [done[s] for s in sorted(done)]}
        with open(js, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1)
            fh.write("\n")
        print(name, stage, p["used_peak_mib"], p["actual_peak_mib"], p["seconds"], flush=True)


def fits_by_dryrun(res: PlanResult, actual_mib: int) -> bool:
    """DryRun's actual peak of a stage (fragments in, MiB) plus the kernel workspaces the pool check
    adds (none under ``--margin``) within ``res``'s budget: what "fits" means in the records' table
    and the test."""
    actual = actual_mib * MIB
    workspace = res.parts.parts(actual, actual)["workspace_bytes"] if res.parts is not None else 0
    return actual + workspace <= res.budget


def own_over(name: str, res: PlanResult) -> List[int]:
    """The stages on which DryRun of the maintainers' own strategy (``<name>.own.json``, when
    recorded) holds more than the budget: actual peak (fragments in) plus the workspaces."""
    js = os.path.join(PLANS, f"{name}.own.json")
    if not os.path.exists(js) or res.parts is None:
        return []
    with open(js, encoding="utf-8") as fh:
        data = json.load(fh)
    if data.get("derived_sha256") != sha(derive_text(name)):
        raise SystemExit(f"{js}: recorded for another derived YAML: re-record with --own")
    return [st["stage"] for st in data["stages"] if not fits_by_dryrun(res, st["actual_peak_mib"])]


def answer_kind(res: PlanResult) -> Optional[str]:
    """How a plan that is the maintainers' own strategy is said (None: a plan of its own)."""
    if res.unchanged:
        return "unchanged"
    return "theirs, its select patterns that match nothing dropped (SW104)" if res.own_answer else None


def recompute_summary(est) -> str:
    """'17 full + 1 select (mlp)' from an estimate's layer rows."""
    counts: Dict[str, int] = {}
    for r in est.layers:
        if r.get("mtp"):
            continue
        c = r["choice"]
        if c == "none":
            continue
        key = "full" if c == "full" else "select (" + c.split(":", 1)[1] + ")" if c.startswith("select:") else c
        counts[key] = counts.get(key, 0) + 1
    return " + ".join(f"{n} {k}" for k, n in counts.items()) or "nothing"


def table(names: Sequence[str]) -> List[str]:
    """docs/plan.md's rows: one per stage of each recorded case. A case planned with DryRun of its
    own YAML (``calibrate``) has no estimate error to show: its estimate is fitted to that DryRun."""
    from swapwatch.memory.model import estimate

    rows = ["| maintainer YAML | budget | maintainers recompute | plan recomputes | stage | estimate | + error | "
            "+ fragments | + workspaces | pool need | DryRun used | DryRun actual | estimate error | fits |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in names:
        js = os.path.join(PLANS, f"{name}.json")
        if not os.path.exists(js):
            continue
        with open(js, encoding="utf-8") as fh:
            data = json.load(fh)
        res = plan(name, data.get("calibrate"))
        own = estimate(derived_path(name))
        share = (res.to_json()["recompute_flops"] / res.own["recompute_flops"]) if res.own.get("recompute_flops") else 0
        over = own_over(name, res)
        mine = answer_kind(res) or recompute_summary(res.planned) + (
            f" (theirs is over the pool by DryRun on stage {', '.join(map(str, over))})" if over
            else f" ({share:.0%} of their FLOPs)")
        by = {s["stage"]: s for s in data["stages"]}
        for st in res.to_json()["stages"]:
            d = by.get(st["stage"])
            m = st.get("margin_bytes", {})
            used = d["used_peak_mib"] if d else None
            act = d["actual_peak_mib"] if d else None
            rows.append(
                f"| `{CASES[name]['source']}` | {res.budget // MIB} MiB | {recompute_summary(own)} | {mine} | "
                f"{st['stage']} | {st['peak_bytes'] // MIB} | {m.get('model_error_bytes', 0) // MIB} | "
                f"{m.get('fragments_bytes', 0) // MIB} | {m.get('workspace_bytes', 0) // MIB} | "
                f"{st['pool_bytes'] // MIB} | {used if used else '-'} | {act if act else '-'} | "
                + ("calibrated to it | " if used and data.get("calibrate") else
                   f"{(st['peak_bytes'] / MIB - used) / used:+.1%} | " if used else "- | ")
                + ("yes" if act and fits_by_dryrun(res, act) else "no" if act else "-") + " |")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*")
    ap.add_argument("--stage", type=int, action="append")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--table", action="store_true")
    ap.add_argument("--derive", action="store_true", help="derive and plan only (no DryRun)")
    ap.add_argument("--own", action="store_true", help="DryRun the derived YAML itself (<name>.own.json)")
    args = ap.parse_args(argv)
    if args.list:
        for name, case in CASES.items():
            print(f"{name:14s} {case['source']}: {case['why']}")
        return 0
    if args.table:
        print("\n".join(table(args.names or list(CASES))))
        return 0
    for name in args.names:
        if args.own:
            record_own(name, args.stage or [0])
            continue
        if args.derive:
            derive(name)
            res = plan(name, CASES[name].get("calibrate"))
            print(name, answer_kind(res) or (recompute_summary(res.planned) if res.fits else res.message()))
            continue
        record(name, args.stage)
    return 0


if __name__ == "__main__":
    sys.exit(main())
