"""What ``swapwatch plan --budget`` is compared to, and what is held back from it (issue 35, points
1 and 2). The facts, each with its source, are in docs/estimate.md ("What the budget is checked
against"); this module is their one use.

**Two checks, apart.**

* *The pool.* ``context.max_device_memory`` caps MindSpore's own device memory pool (MindSpore
  ``plugin/ascend/res_manager/mem_manager/ascend_memory_adapter.cc``: ``AscendMemAdapter::Initialize``
  sizes the pool from it; ``mindspore.runtime.set_memory(max_size=)`` is the same cap), so the
  budget is compared with what that pool must hold: the predicted peak (what DryRun L1 calls the
  used peak), the model's error on it, the pool's fragments (DryRun's actual peak "with fragments"
  is what the allocator really holds), and the kernel workspaces DryRun L1 leaves out (allocated
  from the same pool in kernel-by-kernel mode). HCCL's buffers are not in the pool: HCCL allocates
  them itself (CANN HCCL, ``HCCL_BUFFSIZE``), beside it, for each communicator at its first
  collective (the communicators a rank runs one on: ``model.communicators``).
* *The card.* The pool's cap, HCCL's buffers and the runtime's own memory (:data:`RUNTIME_RESERVE`)
  must fit the HBM the runtime reports (a 64 GB Ascend 910B reports 62432 MiB). This is a property of
  ``max_device_memory`` and the communicators, which no recompute changes: said beside the plan,
  never fitted by recomputing.

**The margin's parts** (:class:`Margin`), each from what is known, none a flat guess:

* the model's error: the worst under-prediction of DryRun L1's used peak on the oracle tier's
  recorded stages of the same tensor table (``model_error.json``, written from the records by
  :func:`swapwatch.memory.calibrate.corpus_errors`), or with ``--calibrate`` the calibration's own
  miss (each run predicted from the others); a table with no recorded case takes
  :data:`UNKNOWN_ERROR`, said as such;
* fragments: a fraction of the part of the peak above static memory under ``memory_optimize_level:
  O0`` (MindSpore's dynamic pool): the worst the tensor table's full-shape DryRun stages showed, at
  least :data:`FRAGMENT_FRACTION`; under ``O1`` (SOMAS plans one static block) the worst the
  table's full-shape O1 stages showed, SeqPipe's apart: 0 without SeqPipe, 20 % with it (Qwen2.5-72B
  32k); with ``--calibrate`` the error part is never below the table's recorded error;
* kernel workspaces: :data:`WORKSPACE_FLOOR` or :data:`WORKSPACE_FRACTION` of the peak, the larger
  (a measured card run against DryRun L1: docs/estimate.md).
``--margin F`` replaces the three with a flat fraction of the budget (``--margin 0``: the model's
peak alone against the budget).
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Dict, Iterable, Optional

from ..errors import InputError
from ..text import fmt_size
from .keys import lever_key

MIB = 1 << 20
GIB = 1 << 30

#: HBM the runtime reports for one device (``aclrtGetMemInfo``'s total: what MindSpore logs as
#: "Device HBM memory size"), by device; a 64 GB 910B reports 62432 MiB (docs/estimate.md).
CARD_HBM = {"Ascend 910B (64 GB)": 62432 * MIB}
DEFAULT_CARD = "Ascend 910B (64 GB)"

#: Fragments the pool may hold, as a fraction of the peak above static memory, under
#: ``memory_optimize_level: O0``, for a tensor table whose own full-shape DryRun stages showed less
#: (or none were recorded): DryRun L1's actual - used peak on the maintainer YAMLs' full-shape stages
#: is 2.4-15.2 % of that part but on GLM4-9B's, whose table takes its own worst (30.7 %:
#: :func:`fragments_for`; docs/estimate.md "Fragmentation"); a bound, said as one.
FRAGMENT_FRACTION = 0.15

#: The model's error allowance for a tensor table with no recorded DryRun case (the figure the
#: uncalibrated margin used to be for every family).
UNKNOWN_ERROR = 0.10

#: Kernel workspaces (aclnn, allocated from MindSpore's pool; DryRun L1 leaves them out and level 2
#: needs an NPU): the larger of a floor and a fraction of the predicted peak. A 910B card run of
#: Qwen2.5-7B against DryRun L1 of the same job used 16 / 127 MiB more (no / full recompute)
#: (docs/estimate.md "What the budget is checked against").
WORKSPACE_FLOOR = 512 * MIB
WORKSPACE_FRACTION = 0.015

#: What the runtime (rts, the driver) holds on the card outside MindSpore's pool and HCCL's
#: buffers, from one real-card run (docs/estimate.md): the card check counts it.
RUNTIME_RESERVE = 350 * MIB

#: The recorded errors per tensor table (memory/calibrate.py:corpus_errors, tools/plan_margin_table.py).
MODEL_ERROR_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "model_error.json")

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?i?B?|)\s*$", re.IGNORECASE)
#: Every unit is a power of two, ``GB`` included: a budget is most often copied from the YAML's
#: ``context.max_device_memory: "58GB"``, which MindSpore reads as 58 x 2**30 bytes
#: (``mindspore/context.py:_Context.set_max_device_memory`` takes the number before ``GB`` as a
#: float; ``ccsrc/plugin/device/ascend/hal/device/ascend_memory_adapter.cc:
#: AscendMemAdapter::GetDeviceMemSizeFromContext`` multiplies it by ``kGBToByte``, ``1024 << 20``),
#: and prints ``M`` for 2**20 bytes. A decimal reading (54.02 GiB for 58GB) planned 4 GiB short of
#: the YAML's own limit (docs/units.md).
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40,
          "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40,
          "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}


def parse_size(text: str, flag: str = "--budget") -> int:
    """``58GiB`` / ``58GB`` / ``45MB`` / ``62914560`` -> bytes, exactly. Every unit is a power of 2,
    as MindSpore reads ``max_device_memory`` (:data:`_UNITS`; docs/units.md). ``flag``: the option
    the size came from, named in the message (``--budget``, ``--host-memory``).

    A budget under 1 MiB is refused rather than planned: no training step fits in it, so it is a
    forgotten unit (``--budget 58``) or a unit one step too small (``58K``), and the message names
    the size that was probably meant instead of answering ``no strategy fits 0.0 MiB``."""
    m = _SIZE.match(str(text))
    if not m or m.group(2).upper() not in _UNITS:
        raise InputError(f"{flag}: {text!r} is not a size (e.g. 58GiB, 45MB, 62914560)")
    number, unit = m.group(1), m.group(2)
    value = int(Fraction(number) * _UNITS[unit.upper()])     # exact: a float overflows
    if Fraction(number) <= 0:
        raise InputError(f"{flag}: {text!r} must be more than 0 bytes")
    if value >= 1 << 63:
        raise InputError(f"{flag}: {text[:40]!r} is more than any device holds (2**63 bytes)")
    if value < 1 << 20:
        meant = _meant(number, unit)
        what = "has no unit, so it is" if not unit else "is"
        raise InputError(f"{flag} {text.strip()} {what} {value:,} byte(s), less than 1 MiB: "
                         f"did you mean {flag} {meant}?")
    return value


def _meant(number: str, unit: str) -> str:
    """The budget a too-small one most likely stood for: a bare number (or bytes) below 1024 in GiB,
    the unit a device's memory is counted in, a larger one in MiB (MindSpore's ``M``); a K or M
    size the same number one unit up, in GiB (GB, G)."""
    if not unit or unit.upper() == "B":
        return f"{number}GiB" if float(number) < 1024 else f"{number}MiB"
    return number + "G" + unit[1:]


def max_device_memory(context: Optional[Dict[str, Any]]) -> Optional[int]:
    """``context.max_device_memory`` in bytes, as MindSpore reads it and as :func:`parse_size` reads
    a budget (``"58GB"`` is 58 x 1024**3). None when unset or not a size."""
    raw = (context or {}).get("max_device_memory")
    if raw is None:
        return None
    try:
        return parse_size(str(raw))
    except InputError:
        return None


def model_errors() -> Dict[str, Any]:
    with open(MODEL_ERROR_FILE, encoding="utf-8") as fh:
        return json.load(fh)


def workspace_bound() -> "tuple[int, float, str]":
    """(floor bytes, fraction of the peak, why) of the kernel workspaces a stage's pool holds beyond
    DryRun L1's figure: the larger of the two."""
    return WORKSPACE_FLOOR, WORKSPACE_FRACTION, (f"kernel workspaces max({fmt_size(WORKSPACE_FLOOR)}, "
                                                 f"{WORKSPACE_FRACTION:.1%} of the peak) (a card run against "
                                                 f"DryRun L1)")


def measured_need(actual: int) -> int:
    """What the pool must hold on a stage DryRun L1 ran: its actual peak (fragments in) and the kernel
    workspaces it leaves out (:func:`workspace_bound`); "fits by DryRun" is this within the budget."""
    return actual + int(max(WORKSPACE_FLOOR, WORKSPACE_FRACTION * actual))


@dataclass
class Margin:
    """What the pool check holds back besides the predicted peak (module docstring)."""

    error: float                     # fraction of the predicted peak
    error_why: str
    fragments: float                 # fraction of the peak above static memory
    fragments_why: str
    workspace: int                   # bytes per stage at least
    workspace_why: str
    workspace_fraction: float = 0.0  # of the predicted peak, when more than ``workspace``
    flat: Optional[float] = None     # --margin: a fraction of the budget instead of the parts

    def cap(self, budget: int, static: float) -> int:
        """The highest predicted peak whose pool need is within ``budget`` on a stage with
        ``static`` bytes of weights, gradients and optimizer states (the need grows with the peak:
        the lower of the caps of the workspace's two forms)."""
        if self.flat is not None:
            return int(budget * (1.0 - self.flat))
        base = 1.0 + self.error + self.fragments
        return int(min((budget - self.workspace + self.fragments * static) / base,
                       (budget + self.fragments * static) / (base + self.workspace_fraction)))

    def parts(self, peak: int, static: float) -> Dict[str, int]:
        """Per stage, the bytes each part adds to the predicted peak."""
        if self.flat is not None:
            return {"model_error_bytes": 0, "fragments_bytes": 0, "workspace_bytes": 0}
        return {"model_error_bytes": int(round(self.error * peak)),
                "fragments_bytes": int(round(self.fragments * max(0.0, peak - static))),
                "workspace_bytes": int(round(max(self.workspace, self.workspace_fraction * peak)))}

    def need(self, peak: int, static: float) -> int:
        """What the pool must hold for a stage predicted at ``peak``."""
        return peak + sum(self.parts(peak, static).values())

    def to_json(self) -> Dict[str, Any]:
        if self.flat is not None:
            return {"flat_fraction": self.flat}
        return {"model_error_fraction": round(self.error, 4), "model_error_source": self.error_why,
                "fragments_fraction_above_static": round(self.fragments, 4), "fragments_source": self.fragments_why,
                "workspace_bytes": self.workspace, "workspace_fraction": self.workspace_fraction,
                "workspace_source": self.workspace_why}

    def line(self) -> str:
        if self.flat is not None:
            return f"--margin {self.flat:g}: {self.flat:.0%} of the budget held back instead of the margin's parts"
        return (f"pool check: predicted peak + {self.error:.1%} model error ({self.error_why}) + fragments "
                f"{self.fragments:.0%} of the peak above static ({self.fragments_why}) + {self.workspace_why}")


def table_error(table: str, family: str, seqpipe: bool = False,
                unmodelled: Optional[Iterable[str]] = None) -> "tuple[float, str]":
    """(fraction, why): the worst under-prediction on the recorded DryRun stages of ``table``; with
    ``unmodelled`` (the keys the YAML's estimate leaves out), only on the stages whose left-out lever
    keys (recompute, swap: ``keys.lever_key``) the YAML leaves out too (``by_unmodelled``): a stage's
    miss on a lever the estimate says it does not size (the plain Llama layer's select comm recompute
    adds a cast: -6.7 %) is that lever's effect, not the model's error on a YAML without it (issue 35:
    the error "for that family and strategy kind").
    The SeqPipe stages' (``seqpipe_worst_error``: memory/calibrate.py:corpus_errors) count for a SeqPipe
    YAML only (``seqpipe``: memory.keys modelled it), beside the others; never less than the worst
    under-prediction of a planned YAML's DryRun stage (``held_out``: calibrate.plan_errors), which the
    model had not seen: Qwen3-30B-A3B's plan missed by -1.1 % on a stage where the qwen3_moe table's 8
    in-sample stages gave 0.48 %, and Qwen2.5-14B 8k's plan by the margin alone by -3.7 % (docs/plan.md);
    and never less than the miss of a plan of this table that DryRun put over its budget (``held_out``
    ``by_table``: DeepSeek-V3's plan of no recompute, -57 % on stage 1)."""
    row = model_errors().get("tables", {}).get(table)
    if not row:
        return UNKNOWN_ERROR, f"no DryRun case of the {table} tensor table recorded: {UNKNOWN_ERROR:.0%} assumed"
    worst = max(0.0, -row["worst_error"])
    of = "" if family == table or family in row.get("families", []) else f", none of {family} itself"
    n = row["stages"]
    if unmodelled is not None and row.get("by_unmodelled"):
        have = {k for k in unmodelled if lever_key(k)}
        fits = [v for k, v in row["by_unmodelled"].items() if set(filter(None, k.split(","))) <= have]
        worst = max([0.0] + [-v["worst_error"] for v in fits])
        used = sum(v["stages"] for v in fits)
        if used < n - row.get("seqpipe_stages", 0):
            of += f", {used} of them: those leaving out no recompute / swap key this YAML has not"
    n_seq = row.get("seqpipe_stages", 0)
    if seqpipe and n_seq:
        worst = max(worst, -row.get("seqpipe_worst_error", 0.0))
        of += f", its {n_seq} SeqPipe stage(s) among them"
    elif n_seq:
        of += f", its {n_seq} SeqPipe stage(s) apart"
    why = (f"worst under-prediction on the {n} recorded DryRun L1 stages of the {table} "
           f"tensor table{of}, in-sample")
    held = model_errors().get("held_out") or {}
    failed = (held.get("by_table") or {}).get(table)
    if failed and failed["covers"] > max(worst, held.get("covers", 0.0)):
        # a plan of this table DryRun put over its budget: its miss is this table's (calibrate.plan_errors)
        return failed["covers"], (f"a plan of the {table} tensor table DryRun L1 put over its budget missed by "
                                  f"{failed['worst_error']:.1%} ({failed['worst_case']}, held out; docs/plan.md): "
                                  f"the table is not trusted closer than that")
    floor = held.get("covers", 0.0)
    if floor > worst:
        return floor, (f"worst under-prediction on the {held['stages']} DryRun L1 stages of planned YAMLs, held out "
                       f"({held['worst_case']}; the {table} tensor table's {row['stages']} in-sample stages "
                       f"show {worst:.1%})")
    return worst, why


def fragments_for(memory_optimize_level: str, table: str, seqpipe: bool = False) -> "tuple[float, str]":
    """(fraction of the peak above static, why) of the fragments MindSpore's pool may hold: under O1 the
    worst the tensor table's full-shape O1 DryRun stages showed, SeqPipe's apart (``seqpipe``: the
    YAML splits its sequence), 0 where they show none; under O0 the worst the table's full-shape DryRun
    stages showed (``model_error.json``, :func:`swapwatch.memory.calibrate.corpus_errors`), never less
    than :data:`FRAGMENT_FRACTION`."""
    row = model_errors().get("tables", {}).get(table) or {}
    if str(memory_optimize_level).upper() == "O1":
        key = "fragments_o1_seqpipe" if seqpipe else "fragments_o1"
        worst, n = row.get(f"{key}_worst") or 0.0, row.get(f"{key}_stages", 0)
        what = "SeqPipe " if seqpipe else ""
        if worst > 0:
            return worst, (f"memory_optimize_level O1: SOMAS plans one block, but the worst of the {n} full-shape "
                           f"{what}O1 DryRun L1 stage(s) of the {table} tensor table ({row[f'{key}_case']}) held "
                           f"this beside it, in-sample")
        return 0.0, (f"memory_optimize_level O1: SOMAS plans one block, no fragment on the {n} full-shape {what}O1 "
                     f"DryRun L1 stage(s) of the {table} tensor table")
    worst, n = row.get("fragments_worst"), row.get("fragments_stages", 0)
    if worst is not None and worst > FRAGMENT_FRACTION:
        return worst, (f"MindSpore's dynamic pool (O0): the worst of the {n} full-shape DryRun L1 stage(s) of the "
                       f"{table} tensor table ({row['fragments_case']}), in-sample")
    seen = (f"the {table} tensor table's {n} full-shape DryRun L1 stage(s) show at most {worst:.1%}"
            if worst is not None else f"no stage of the {table} tensor table recorded at full shape")
    return FRAGMENT_FRACTION, f"MindSpore's dynamic pool (O0): a bound at least {FRAGMENT_FRACTION:.0%}; {seen}"


@dataclass
class Card:
    """The card check: MindSpore's pool cap + HCCL's buffers + the runtime within the HBM."""

    pool: int
    pool_source: str
    hccl: int
    hbm: int
    device: str

    runtime: int = RUNTIME_RESERVE

    @property
    def left(self) -> int:
        """What the card has left after the pool, HCCL and the runtime's own memory."""
        return self.hbm - self.pool - self.hccl - self.runtime

    @property
    def fits(self) -> bool:
        return self.left >= 0

    @property
    def below_recommended(self) -> bool:
        """MindSpore warns when the card's memory outside the pool is under 1/16 of the HBM
        (ascend_memory_adapter.cc: "It may lead to Out Of Memory in HCCL or other components")."""
        return self.hbm - self.pool < self.hbm // 16

    def line(self) -> str:
        head = (f"card: {self.pool_source} {fmt_size(self.pool)} + HCCL buffers {fmt_size(self.hccl)} + runtime "
                f"{fmt_size(self.runtime)} of the {fmt_size(self.hbm)} an {self.device} reports")
        if not self.fits:
            return (f"{head}: over by {fmt_size(-self.left)}: HCCL or the runtime would run out of memory; "
                    f"a context.max_device_memory of at most {self.hbm - self.hccl - self.runtime >> 30}GB leaves "
                    f"them room")
        warn = " (MindSpore warns: outside its pool is under 1/16 of the HBM; it runs)" if self.below_recommended \
            else ""
        return f"{head}: {fmt_size(self.left)} to spare{warn}"

    def to_json(self) -> Dict[str, Any]:
        return {"pool_bytes": self.pool, "pool_source": self.pool_source, "hccl_bytes": self.hccl,
                "runtime_bytes": self.runtime, "hbm_bytes": self.hbm, "device": self.device, "left_bytes": self.left,
                "fits": self.fits}


def card_check(context: Optional[Dict[str, Any]], budget: int, hccl: int, device: str = DEFAULT_CARD) -> Card:
    """The card check for a job whose pool is capped at ``context.max_device_memory`` (or, unset, at
    the budget planned to)."""
    mdm = max_device_memory(context)
    return Card(pool=mdm if mdm is not None else budget,
                pool_source="context.max_device_memory" if mdm is not None else "the budget",
                hccl=hccl, hbm=CARD_HBM[device], device=device)
