"""Every log line grammar swapwatch reads, as data (one table per source), with the versions it covers.

Why data: MindFormers and MindSpore reword their lines between versions (``Pipeline id list:`` in
v1.3 vs ``Pipeline id list with start_stage:`` later; the exclude word ``off`` before 2025-03-25;
``HBM`` vs ``MOC``; two generations of step lines). Keeping each variant as a row here, with the
version note beside it, means a new MindFormers wording is a one-row change and no parser grows an
``if version`` branch (the Holistic-Trace-Analysis habit of versioned format tables).

Each message row says:

* ``name``      what the line is (the family parser switches on it);
* ``regex``     matched (``re.match``) against the *message* after the logger prefix is removed and
  whitespace runs are collapsed to one space (the swap lines embed runs of 27-35 spaces);
* ``starts``    the literal the message begins with, when it has a fixed one: in MindFormers-prefixed
  logs the scanner keeps an INFO record only if its message starts with one of these;
* ``needle``    a literal every such line contains (whitespace-run free), used to find candidate
  lines in logs without a MindFormers prefix;
* ``versions``  where the wording comes from.

The lines come from MindFormers' ``parallel_core/training_graph/transformer/utils.py:LayerSetting`` and
``core/callback/callback.py:MFLossMonitor``, and from MindSpore; their formats, as observed, are in
docs/mindspore-facts.md §2-§4.
"""
from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Tuple

from ..model import setting_lines


class Row(NamedTuple):
    name: str
    regex: str
    starts: Optional[str]
    needle: Optional[str]
    versions: str


def _row(kind: setting_lines.LineKind) -> Row:
    """A grammar row from a per-layer line kind of :mod:`swapwatch.model.setting_lines`."""
    return Row(kind.name, kind.regex, kind.head, kind.needle, kind.versions)


# --------------------------------------------------------------------------------------------
# Logger prefixes (docs/mindspore-facts.md §2). Tried in order; the first that matches splits the line.
# --------------------------------------------------------------------------------------------
PREFIXES: List[Tuple[str, str, str]] = [
    # (format name, regex with groups level/file/msg, note)
    ("mindformers_trimmed", r"^(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}) - \[(?P<file>[^\[\]\s]+):"
                            r"(?P<line>\d+)\] - (?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) - (?P<msg>.*)$",
     "docs render the stdout format without the logger name"),
    ("mindformers", r"^(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}) - (?P<name>.*?)\[(?P<file>[^\[\]\s]+):"
                    r"(?P<line>\d+)\] - (?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) - (?P<msg>.*)$",
     "MindFormers stdout handler (worker_N.log); logger name may embed a path (>= v1.5) or be plain"),
    ("mindformers_file", r"^\[(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\] (?P<ts>\d{4}-\d{2}-\d{2} "
                         r"\d{2}:\d{2}:\d{2},\d{3}) \[(?P<file>[^\]]+):(?P<line>\d+)\] (?P<func>[^:\s]+): (?P<msg>.*)$",
     "MindFormers file handlers: output/log/rank_N/info.log, error.log"),
    ("mindspore_cpp", r"^\[(?P<level>[A-Z]+)\] (?P<mod>[A-Z_]+)\((?P<pid>\d+),(?P<tid>[0-9a-fA-F]+),(?P<proc>[^)]*)\):"
                      r"(?P<ts>\d{4}-\d{2}-\d{2}-\d{2}:\d{2}:\d{2}\.\d+\.\d+) \[(?P<file>[^\]]+):(?P<line>\d+)\] "
                      r"(?P<func>[^\]]*)\] ?(?P<msg>.*)$",
     "MindSpore C++ glog (log_adapter.cc): [LEVEL] MOD(pid,tid_hex,proc):ts [file:line] Func] msg"),
    ("mindspore_py", r"^\[(?P<level>[A-Z]+)\] (?P<mod>[A-Z_]+)\((?P<pid>\d+):(?P<tid>\d+),(?P<proc>[^)]*)\):"
                     r"(?P<ts>\d{4}-\d{2}-\d{2}-\d{2}:\d{2}:\d{2}\.\d+\.\d*) \[(?P<file>[^\]]+):(?P<line>\d+)\] (?P<msg>.*)$",
     "MindSpore Python logger (log.py); the ms/us fraction is not zero-padded"),
    ("level_only", r"^\s*-?\s?(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) - (?P<msg>.*)$",
     "docs/issue excerpts that keep only '-INFO - msg'"),
]

#: Literal that every MindFormers stdout record contains right before its level (prefixed mode needle).
MF_RECORD = b"] - "
#: Levels as they follow MF_RECORD, and the length of "LEVEL - ".
MF_LEVELS: Dict[bytes, int] = {b"INFO - ": 7, b"WARNING - ": 10, b"ERROR - ": 8, b"CRITICAL - ": 11}

# --------------------------------------------------------------------------------------------
# LayerSetting and config lines (LayerSetting's logger calls; regexes run on whitespace-collapsed messages)
# --------------------------------------------------------------------------------------------
FORMATIVE_KEYS = ("layer_recompute", "select_recompute", "select_comm_recompute", "select_recompute_exclude",
                  "select_comm_recompute_exclude", "layer swap", "op swap")

LAYERSETTING: List[Row] = [
    Row("layer_list", r"num_layers per stage: (?P<v>.*)$", "num_layers per stage", "num_layers per stage", "all"),
    Row("layer_accu", r"Accumulated num_layers per stage: (?P<v>.*)$", "Accumulated num_layers", "num_layers per stage",
        "all"),
    Row("pp_ids", r"Pipeline id list(?P<with> with start_stage)?: (?P<v>.*)$", "Pipeline id list", " id list",
        "'with start_stage' since v1.5; v1.3 logged 'Pipeline id list:'"),
    Row("interleave_ids", r"Interleave id list: (?P<v>.*)$", "Interleave id list", " id list", "all"),
    Row("formative", r"Formative (?P<k>" + "|".join(FORMATIVE_KEYS) + r"): (?P<v>.*)$", "Formative ", "Formative ",
        "all; 'layer swap'/'op swap' only with swap support (r1.5+)"),
    Row("initial", r"initial (?P<k>\w+_config) from dict: (?P<v>.*)$", "initial ",
        "from dict", "core/parallel_config.py build_parallel_config"),
    # the per-layer lines: written and read by swapwatch.model.setting_lines (one place for their wording)
    _row(setting_lines.FULL_RECOMPUTE),
    _row(setting_lines.SELECT),
    _row(setting_lines.LAYER_SWAP),
    _row(setting_lines.OP_SWAP),
    Row("pattern_removed", r"The pattern (?P<pattern>.+) in (?P<key>select(?:_comm)?_recompute) conflicts with "
                           r"select(?:_comm)?_recompute_(?:exclude|off) and will be removed\.$", "The pattern ",
        "ecompute", "'_off' keys before 2025-03-07"),
    _row(setting_lines.CELL_NOT_OP),
    *(_row(k) for k in setting_lines.CONFLICT_KINDS),
    Row("pp_interleave_reset", r"Current MindSpore version do not pipeline interleave\. `pp_interleave_num` is set "
                               r"to 1\.$", "Current MindSpore", "pipeline interleave", "all"),
    Row("empty_config", r"The input config (?P<section>\w+) is empty\.$", "The input config", "The input config",
        "template.py"),
    Row("regex_timeout", r"(?P<text>.+) Please check and fix it\.$", None, "Please check and fix it",
        "r1.6+/master regex.fullmatch(timeout=1)"),
]

# --------------------------------------------------------------------------------------------
# PyNative path (r2.x) lines: MindFormers 2.1.0 mindformers/pynative/distributed/activation_checkpoint.py
# (maps, Set lines, no-match warnings, [Recompute Config]/[Swap Config] errors) and pynative/trainer/trainer.py
# (world size). "Set full/select/select comm recompute" and the comm "expected to be operation" line are the
# LAYERSETTING rows above (same words); the rows here are the PyNative-only wordings.
# --------------------------------------------------------------------------------------------
PYNATIVE: List[Row] = [
    *(_row(k) for k in setting_lines.PYNATIVE_KINDS),
    Row("pyn_no_match", r"(?P<label>select_module|exclude_op|comm_select_module|op_swap) pattern '(?P<key>.*)' did "
                        r"not match any module in the model, please check your (?:recompute|swap) config\.$",
        None, "did not match any module", "2.1.0 WARNING"),
    Row("pyn_config_error", r"\[(?P<tag>Recompute|Swap) Config\] (?P<text>.*)$", "[", "Config] ",
        "2.1.0 ERROR before the exception; the exclude_op-without-mode WARNING has the same tag"),
    Row("world_size", r"Current world size: (?P<n>\d+)\.$", "Current world size", "Current world size",
        "pynative trainer: apply_ac runs only when world size > 1"),
]

# --------------------------------------------------------------------------------------------
# Per-step training lines (MFLossMonitor.print_output_info): one regex per generation, tried in order.
# --------------------------------------------------------------------------------------------
_STEP_HEAD = (r"\{ ?Epoch:\[\s*(?P<epoch>\d+)/\s*(?P<epochs>\d+)\], step:\[\s*(?P<step>\d+)/\s*(?P<steps>\d+)\], ")
_STEP_TAIL = (r"(?P<sep>(?: \w+_loss: [^,]+,)*) per_step_time: (?P<ms>[\d.]+)ms,(?: lr: (?P<lr>[^,]+),)? "
              r"overflow cond: (?P<ovf>[^,]+), loss_scale: (?P<scale>[^,]+?)(?:, global_norm: (?P<gn>[^,]+?))?"
              r"(?:, train_throughput_per_npu: (?P<tflops>[\d.eE+-]+)T)?\s*$")
STEPS: List[Row] = [
    Row("step_sink", _STEP_HEAD + r"loss: (?P<loss>[-\w.+]+)," + _STEP_TAIL, "{ Epoch:", "{ Epoch:",
        "sink mode: dev '%5.3f', master '{:5.6f}', optional lm/mtp losses (master)"),
    Row("step_nonsink", _STEP_HEAD + r"loss:\[\s*(?P<loss>[^/\]]+)/\s*(?P<mean>[^\]]+)\]," + _STEP_TAIL, "{ Epoch:",
        "{ Epoch:", "non-sink: loss:[current/epoch mean]"),
]

# --------------------------------------------------------------------------------------------
# Memory lines (docs/mindspore-facts.md §3)
# --------------------------------------------------------------------------------------------
#: Ascend DevMemStatistics keys -> MemoryEvent.metric (values are integer MB followed by 'M').
ASCEND_MEMORY_KEYS: Dict[str, str] = {
    "Device MOC memory size": "device_size",        # MindSpore >= 2.5
    "Device HBM memory size": "device_size",        # older builds
    "MindSpore Used memory size": "used_size",
    "Used peak memory usage (without fragments)": "used_peak",
    "Actual peak memory usage (with fragments)": "actual_peak",
    "Actual peak memory usage": "actual_peak",      # two-pointer adapter with pool recycle
    "Total Static Memory size": "static",
    "Total Dynamic memory size": "dynamic",
    "Dynamic memory size of this graph": "graph_dynamic",
}
ASCEND_MEMORY_RE = (r"(?P<k>Device (?:MOC|HBM) memory size|MindSpore Used memory size|Used peak memory usage "
                    r"\(without fragments\)|Actual peak memory usage(?: \(with fragments\))?|Total Static Memory size|"
                    r"Total Dynamic memory size|Dynamic memory size of this graph): (?P<mb>\d+)M")
#: The needle that starts an Ascend block (its first line) and the OOM line; the rest is read ahead.
ASCEND_NEEDLE = b"emory size: "
OOM_RE = r"Out of Memory!!! Request memory size: (?P<n>\d+)B"
#: CPU pool lines printed at exit with GLOG_v=1 or MS_SUBMODULE_LOG_v={PRE_ACT:1}: (regex, metric)
CPU_MEMORY: List[Tuple[str, str]] = [
    (r"(?<![A-Za-z] )(?<!actual )peak used mem:\s*(?P<mb>\d+)M", "pool_peak"),
    (r"actual peak used mem:\s*(?P<mb>\d+)M", "pool_actual_peak"),
    (r"[Tt]otal allocated mem:\s*(?P<mb>\d+)M", "pool_total"),
]
CPU_NEEDLE = b"peak used mem:"
MB = 1024 * 1024

# --------------------------------------------------------------------------------------------
# msrun, MindSpore warnings, tracebacks, SWAPWATCH
# --------------------------------------------------------------------------------------------
EXIT_RE = r"Worker process (?P<pid>\d+) exit with exception\. Error code: (?P<code>-?\d+)\."
EXIT_NEEDLE = b"exit with exception. Error code: "
OFFLOAD_RE = r"Offload does not take effect outside the scope of the lazy_inline Cell\.?\s*(?P<rest>.*)$"
OFFLOAD_NEEDLE = b"Offload does not take effect outside"
#: The primitive of the node an offload warning names (``ValueNode<Primitive> PrimFunc_BatchMatMul``):
#: MindSpore 2.10 WarningOffloadOutsideLazyInline, one line per marked node (SW112 counts them).
OFFLOAD_PRIM_RE = r"ValueNode<Primitive> (?:PrimFunc_)?(?P<prim>\w+)"
TRACEBACK_NEEDLE = b"Traceback (most recent call last)"
SWAPWATCH_NEEDLE = b'SWAPWATCH {"'
#: Rank evidence in a log's head (the file name wins when it has a number; SWAPWATCH events win over both).
RANK_RES = [rb"This node \d+ rank id: (\d+)", rb"\brank id: ?(\d+)", rb"\bRANK_ID[=: ]+(\d+)", rb'"rank":\s?(\d+)']

#: MindFormers config-check and LayerSetting input errors (``LayerSetting._check_inputs`` and
#: ``_format_recompute_list``, ``modules/transformer/transformer.py:TransformerSwapConfig``,
#: ``tools/check_rules.py:_rule_recompute``, ``tools/register/template.py``): an
#: exception or ERROR line matching one of these is a ``config_error`` notice (name = which check).
CONFIG_ERRORS: List[Tuple[str, str]] = [
    ("offset_shape", r"offset\.shape\[-[12]\] should equal to `(?:pp|pp_interleave_num)`"),
    ("offset_sum", r"The sum of `offset` \(.*\) should equal to remainder of `num_layers`"),
    ("offset_negative", r"(?:Head|Tail) stage has negative layers|Some middle stage has fewer than 1 layer"),
    ("illegal_list", r"Illegal input list for (?:select_recompute|recompute)"),
    ("swap_layers", r"Invalid (?:layer_swap|op_swap)[^\n]*configuration"),
    ("swap_type", r"(?:layer_swap|op_swap) must be a list or dict"),
    ("check_type", r"Type of (?:swap|default_prefetch|layer_swap|op_swap)[\w.()]* must be"),
    ("check_recompute_type", r"If the type of \w+ is list or tuple, the type of element of it must be int"),
    ("check_swap_dict", r"Layer info of \w+ must be list when enabling swap"),
    ("check_length", r"length of \w+ should be equal or less than pipeline_stage number"),
    ("unexpected_key", r"The config '\w+' gets an unexpected key"),
    ("recompute_once", r"The recompute interface can be configured only once"),
]


def message_rows() -> List[Row]:
    """All rows whose lines come through the MindFormers logger (LayerSetting + PyNative + steps)."""
    return LAYERSETTING + PYNATIVE + STEPS


def mf_info_starts() -> Tuple[bytes, ...]:
    """Message starts that make an INFO record a candidate in MindFormers-prefixed logs."""
    return tuple(sorted({r.starts.encode() for r in message_rows() if r.starts}))


def raw_needles() -> Tuple[bytes, ...]:
    """Message-level needles for logs without the MindFormers stdout prefix (raw / info.log / docs)."""
    return tuple(sorted({r.needle.encode() for r in message_rows() if r.needle}))


#: Needles searched in every log whatever its prefix (MindSpore/msrun/raw lines), and how many
#: following lines the family may need (read ahead from the same buffer).
ANYWHERE: Dict[bytes, int] = {
    CPU_NEEDLE: 0,
    ASCEND_NEEDLE: 12,
    EXIT_NEEDLE: 0,
    OFFLOAD_NEEDLE: 0,
    SWAPWATCH_NEEDLE: 0,
    TRACEBACK_NEEDLE: 400,
}
