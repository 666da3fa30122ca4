"""``swapwatch estimate`` on a PyNative (r2.x) YAML: the same layers, what PyNative keeps for backward,
and what ``apply_ac``'s recompute and swap wrappers change (docs/estimate.md, "The PyNative path").

Why a module of its own: the static paths' figure comes from a LayerSetting ``Plan`` and MindSpore's graph
recompute pass; the PyNative trainer applies ``checkpoint_wrapper`` / ``swap_wrapper`` to module paths
(:class:`swapwatch.pynative.resolve.PynativePlan`) and runs op by op. What is shared is reused: the sizes are
read by :func:`swapwatch.memory.spec.spec_from_tree` (the r2.x keys mapped onto the names it reads, every
error put back on the r2.x key path), the per-op tensors are the family's tensor table
(:class:`swapwatch.memory.tensor_table.TensorTable`), the stage sum is :func:`swapwatch.memory.model.stage_memory`, the
output is the static estimate's renderer and JSON.

What PyNative keeps, as modelled here (``mindformers/pynative/distributed/activation_checkpoint.py:apply_ac``):

* **no wrapper**: every op's autograd record keeps what its backward needs (the table's ``saves``, plus
  what PyNative keeps beyond the graph path: ``PYNATIVE_KEEPS``); there is no graph-level memory reuse
  (SOMAS), so nothing beyond that is shared or folded;
* **a checkpointed region** (``checkpoint_wrapper``: a whole layer for ``full_recompute_layer``, a module for
  each ``select_module`` path) keeps only its inputs from outside the region; what its ops save is
  regenerated when its backward runs (early stop), one region at a time. Its outputs stay alive when an op
  outside the region saves them (they are ordinary tensors of the outer tape). Unlike the static graph pass
  (:meth:`TensorTable.effective`: a mark is dropped when a consumer of the output is not marked), a PyNative
  checkpoint is never voided by its consumers. ``exclude_op`` paths inside a full layer are left outside the
  region (their saves stay). MindSpore's reentrant cell recompute (the example model's) also keeps the
  region's output (``REENTRANT_CHECKPOINT``);
* **the backward order** (``_backward_order``): a layer's saved tensors are freed when its backward is
  done and the gradients are made as the backward goes, so the peak is the largest of "what layers
  ``0..i`` keep + layer ``i``'s recompute transient + the gradients made before it", not every gradient
  on top of every layer;
* **swap** (``swap_wrapper``): a swapped layer's saved tensors go to host (``policy_fn`` keeps only the
  decoder's non-hidden inputs on device, which the table has none of), an op swap moves what the ops under
  the path save; each swapped layer comes back ``default_prefetch`` layers ahead in backward, so the window
  is the ``default_prefetch`` largest swapped layers of the stage;
* **comm recompute** changes only what communication ops keep under sequence parallel: not sized (as on
  the static paths).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, FrozenSet, List, Optional, Sequence, Set, Tuple

from ..config import read_yaml
from ..config.tree import pretrained_config
from ..errors import ConfigError
from ..memory.model import Estimate, StageMemory
from ..model.patterns import under

#: synthetic static key -> the r2.x key path it came from (errors are reported at the latter)
PARALLEL_KEYS = {"parallel_config.data_parallel": "parallelism.data_parallel_shard",
                 "parallel_config.model_parallel": "parallelism.tensor_parallel",
                 "parallel_config.pipeline_stage": "parallelism.pipeline_parallel",
                 "parallel_config.context_parallel": "parallelism.context_parallel",
                 "parallel_config.expert_parallel": "parallelism.expert_parallel",
                 "parallel_config.use_seq_parallel": "parallelism.sequence_parallel",
                 "parallel_config.micro_batch_num": "training.global_batch_size",
                 "runner_config.batch_size": "training.local_batch_size"}
#: the defaults of the PyNative models' TransformerConfig (``pynative/transformers``: bf16 compute,
#: fp32 parameters, flash attention), which the r2.x YAML leans on when it leaves them out
PYNATIVE_DEFAULTS = {"compute_dtype": "bfloat16", "params_dtype": "float32", "use_flash_attention": True}

#: what an op's PyNative autograd record keeps beyond the graph path's ``saves`` (the table's), per table
#: family and op path: (name, the table tensor whose size it has). PyNative keeps every input its
#: bprop expander reads (MindSpore's ``REG_BPROP_BUILDER(...).SetUnusedInputs``: ``Mul`` leaves out only
#: its output, so it keeps both operands whichever needs a gradient), where the graph path's compiler
#: drops what a constant operand's gradient would need. The example model (swapwatch/examples/
#: tinyllama.py) multiplies the attention scores by the scale with ``Mul`` (keeps the scores) and writes
#: ``RMSNorm`` as ``Mul(x, rsqrt(...)) * weight`` (keeps the unweighted product beside ``x``); the
#: Ascend families' fused ``RmsNorm`` / ``FlashAttentionScore`` keep what their tables say
PYNATIVE_KEEPS: Dict[str, Dict[str, Tuple[Tuple[str, str], ...]]] = {
    "tinyllama": {"attention_norm.norm": (("attention_norm.unweighted", "xn1"),),
                  "ffn_norm.norm": (("ffn_norm.unweighted", "xn2"),),
                  "attention.flash_attention.mul": (("scores", "scores"),)},
}
#: table families run with MindSpore's own cell recompute (``Cell.recompute()``: use_reentrant, a
#: ``_RecomputeCell`` whose custom ``bprop`` receives the inputs, ``out`` and ``dout``, so its record keeps the
#: region's output as well): the example model (swapwatch/examples/train.py:apply_pynative). The r2.x
#: trainer's ``checkpoint_wrapper`` (saved-tensor hooks, ``early_stop``) keeps no output of its own
REENTRANT_CHECKPOINT = frozenset({"tinyllama"})

#: what PyNative DryRun L1 (one rank of MindFormers' own trainer, fixtures/dryrun/pynative/) leaves unchecked for
#: the models sized from ``pynative/tables`` (the header's ``unchecked`` line and the JSON's list)
UNCHECKED_TABLES = ("checked against PyNative DryRun L1 of one rank (docs/estimate.md, The PyNative path); "
                    "Ascend-side terms outside it unverified: kernel workspaces, HCCL buffers",)
#: what no check here covers (the header's ``unchecked`` line and the JSON's ``unchecked`` list)
UNCHECKED_ALWAYS = ("no DryRun for the PyNative path (DryRun compiles graphs): checked only against the example "
                    "model run in PyNative mode on CPU (docs/estimate.md)",
                    "Ascend-side terms unverified: kernel workspaces, the PyNative optimizer step, HCCL buffers")


def _spec_tree(data: Dict[str, Any], lines: Dict[str, int], source: Optional[str]
               ) -> Tuple[Dict[str, Any], Dict[str, int], Dict[str, str], Optional[str], FrozenSet[str], List[str]]:
    """The r2.x tree as the static names :func:`spec_from_tree` reads, the lines under those names, the map
    back to the r2.x key paths, the ``config.json`` merged, and the assumptions made on the way."""
    def section(name: str) -> Dict[str, Any]:
        value = data.get(name)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ConfigError(f"expected a mapping, got {value!r}", file=source, line=lines.get(name), key=name)
        return value

    model = section("model")
    par = section("parallelism")
    training = section("training")
    notes: List[str] = []
    back: Dict[str, str] = dict(PARALLEL_KEYS)
    mc = dict(model)             # the r2.x model keys are the HF names memory.spec.ALIASES knows
    hf, hf_path = pretrained_config({"pretrained_model_dir": model.get("pretrained_model_dir",
                                                                        data.get("pretrained_model_dir"))}, source)
    hf_keys: FrozenSet[str] = frozenset(k for k in hf if k not in mc)
    mc = {**PYNATIVE_DEFAULTS, **hf, **mc}
    if mc.get("seq_length") is None:           # the data loader's sequence (r2.x keeps it there too)
        dl = ((section("train_dataset").get("dataloader") or {}).get("config") or {})
        if isinstance(dl, dict) and dl.get("seq_length") is not None:
            mc["seq_length"] = dl["seq_length"]
            back["model.model_config.seq_length"] = "train_dataset.dataloader.config.seq_length"
    for k in mc:
        back.setdefault(f"model.model_config.{k}", f"model.{k}")
    dp = par.get("data_parallel_shard", 1)
    if dp == -1 or dp is None:
        dp = 1
        if "data_parallel_shard" in par:
            notes.append("parallelism.data_parallel_shard -1 (every rank left over) sized as 1: no FSDP shard")
    local = training.get("local_batch_size", 1)
    pp = par.get("pipeline_parallel", 1)
    mbn = 1
    if isinstance(pp, int) and pp > 1:
        gbs = training.get("global_batch_size", 1)
        if isinstance(gbs, int) and isinstance(local, int) and isinstance(dp, int) and local > 0 and dp > 0:
            mbn = max(1, gbs // (dp * local))
        chunks = par.get("pipeline_parallel_interleave_num", 1)
        notes.append(f"pipeline micro-batches taken as global_batch_size / (dp x local_batch_size) = {mbn}, "
                     + ("1F1B" if chunks == 1 else f"interleaved 1F1B over {chunks} chunks, the micro-batches in "
                        "flight per chunk taken as the static path's interleaved schedule's"))
    tree = {"model": {"model_config": mc},
            "parallel_config": {"data_parallel": dp, "model_parallel": par.get("tensor_parallel", 1),
                                "pipeline_stage": pp, "context_parallel": par.get("context_parallel", 1),
                                "expert_parallel": par.get("expert_parallel", 1), "micro_batch_num": mbn,
                                "use_seq_parallel": par.get("sequence_parallel", False),
                                "optimizer_shard": isinstance(dp, int) and dp > 1},
            "runner_config": {"batch_size": local},
            "optimizer": section("optimizer")}
    syn_lines = {syn: lines[real] for syn, real in back.items() if real in lines}
    syn_lines.setdefault("model.model_config", lines.get("model", 1))
    for sec in ("parallel_config", "runner_config"):
        syn_lines.setdefault(sec, lines.get("parallelism" if sec == "parallel_config" else "training", 1))
    for k, v in lines.items():
        if k.startswith("optimizer"):
            syn_lines[k] = v
    return tree, syn_lines, back, hf_path, hf_keys, notes


def pynative_spec(data: Dict[str, Any], lines: Dict[str, int], source: Optional[str]):
    """The sizes of an r2.x YAML (:class:`swapwatch.memory.spec.ModelSpec`), and the assumptions made.
    A missing or bad size is ConfigError (exit 2) at the r2.x key path (``model.hidden_size``)."""
    from ..memory.spec import spec_from_tree

    tree, syn_lines, back, hf_path, hf_keys, notes = _spec_tree(data, lines, source)
    try:
        spec = spec_from_tree(tree, syn_lines, source, hf_source=hf_path, hf_keys=hf_keys)
    except ConfigError as exc:
        if exc.key in back and exc.file == source:
            exc.key = back[exc.key]
            exc.line = lines.get(exc.key, exc.line)
        elif exc.key and exc.key.startswith("model.model_config.") and exc.file == source:
            exc.key = "model." + exc.key[len("model.model_config."):]
        raise
    spec.lines = dict(lines)
    # the r2.x trainer builds the mcore modules (bf16 logits kept for the loss, per-micro-batch weight
    # copies for the matmul backward: memory.tensor_table); the graph-only terms of the static model are
    # taken off per stage in estimate_pynative (the optimizer-step phase was measured on mcore graphs,
    # memory.model.optimizer_step; the gathered weights are the legacy graph's parallel optimizer's)
    spec.mcore = True
    return spec, notes


# -- per layer ----------------------------------------------------------------------------------

def _ops_under(fam: Any, paths: Sequence[str]) -> List[FrozenSet[int]]:
    return [frozenset(i for i, op in enumerate(fam.ops) if under(op.path, p)) for p in paths]


def layer_cost(fam: Any, la: Any) -> Tuple[str, Any]:
    """What one layer keeps for one micro-batch under ``la`` (:class:`LayerActions`), per the module
    docstring: checkpointed regions keep their outside inputs, every other op its saves."""
    from ..memory.tensor_table import LayerCost

    extra = PYNATIVE_KEEPS.get(fam.table, {})
    size = dict(fam.bytes)
    for pairs in extra.values():
        size.update((name, fam.bytes[like]) for name, like in pairs)

    def saves(i: int) -> Set[str]:
        op = fam.ops[i]
        return set(op.saves) | {name for name, _ in extra.get(op.path, ())}

    regions: List[FrozenSet[int]] = []
    if la.full:
        excluded = frozenset().union(*_ops_under(fam, la.exclude)) if la.exclude else frozenset()
        regions.append(fam.all_ops - excluded)
        label = "full" + (f"-exclude:{','.join(la.exclude)}" if la.exclude else "")
    elif la.select:
        regions = [r for r in _ops_under(fam, la.select) if r]
        label = "select:" + ",".join(la.select)
    else:
        label = "none"
    inside: Set[int] = set().union(*regions) if regions else set()
    kept: Set[str] = set()
    regen = 0
    held: List[Tuple[FrozenSet[int], Set[str]]] = []      # (region, the inputs its checkpoint keeps)
    for region in regions:
        made = {t for i in region for t in fam.ops[i].outs}
        ins = {t for i in region for t in fam.ops[i].ins if t not in made}
        kept.update(ins)
        # a reentrant checkpoint's record keeps the region's output too (REENTRANT_CHECKPOINT): a tensor of its
        # own, whatever the ops outside keep of it; a whole layer's output is the next layer's input, kept there
        outside = {t for i in range(len(fam.ops)) if i not in region for t in fam.ops[i].ins}
        for t in sorted(outside & made) if fam.table in REENTRANT_CHECKPOINT else ():
            size[f"{t}@checkpoint"] = size[t]
            kept.add(f"{t}@checkpoint")
        held.append((region, ins))
        regen = max(regen, sum(size[t] for t in set().union(*(saves(i) for i in region))))
    for i in range(len(fam.ops)):
        if i not in inside:
            kept.update(saves(i))
    host: Set[str] = set()
    if la.layer_swap:
        host = set(kept)
        label = "swap" if label == "none" else label + "+swap"
    elif la.op_swap:
        # what the swapped module's autograd holds: its ops' saves, or for a checkpoint inside it (a
        # select-recomputed cell swapped again: SwapWrapper(CheckpointWrapper(cell))) the checkpoint's inputs
        for region in _ops_under(fam, la.op_swap):
            host.update(t for i in region if i not in inside for t in saves(i))
            host.update(t for r, ins in held if r <= region for t in ins)
        host &= kept
        label += "+op_swap:" + ",".join(la.op_swap)
    device = [(t, size[t]) for t in sorted(kept) if t not in host] + list(fam.extra_by_tensor)
    flops = sum(fam.op_flops[i] for i in inside)
    return label, LayerCost(kept=sum(b for _, b in device), host=sum(size[t] for t in host), regen=regen,
                            flops=flops, by_tensor=tuple(device))


# -- the estimate -------------------------------------------------------------------------------

def estimate_pynative(path: str, model: Optional[str] = None, calibration: Any = None) -> Any:
    """``swapwatch estimate`` on the PyNative YAML at ``path``: an :class:`Estimate` of the static shape
    (same renderer, same JSON) with ``path: pynative`` and ``unchecked`` added."""
    from ..memory.tensor_table import TensorTable
    from ..memory.model import NO_CALIBRATION, stage_memory
    from ..model.plan import Plan
    from .resolve import plan_tree
    from ..model.families import ModelFamily
    from .layer_paths import family_key

    data, lines = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError("expected a mapping of config sections at the top level", file=path, line=1)
    # explain's own read (refusals of apply_ac put on the YAML's line, as explain gives them)
    cfg, plan = plan_tree(data, lines, path, family=model)
    spec, notes = pynative_spec(data, lines, path)
    if spec.num_layers != cfg.num_layers:
        spec.num_layers = cfg.num_layers
    # the family (families.py: the one registry) names its PyNative paths and the tensor table of its layers;
    # a MindFormers PyNative model is sized from its own layer table (pynative/tables/), the example model
    # (tinyllama) from the graph path's table with PyNative's extra keeps; a family whose layers differ by
    # kind (DeepSeek-V3: dense, MoE, MTP) sizes each on its kind's table
    table_family = family_key(cfg.family)
    if table_family != "tinyllama":
        return _estimate_from_tables(path, data, cfg, plan, spec, notes, table_family, calibration)
    family = ModelFamily(table_family, first_k_dense_replace=cfg.first_k_dense)
    kinds: Dict[Optional[str], Any] = {}

    def fam_of(i: int) -> Any:
        kind = None
        if len(family.kinds) > 1:
            kind = "mtp" if i >= cfg.num_layers else family.kind_of(i)
        if kind not in kinds:
            kinds[kind] = TensorTable(spec, table_family, f"model.model_type {cfg.family}", kind)
        return kinds[kind]

    prefetch = plan.sections["swap"].get("default_prefetch", 1) if cfg.swap.get("enable") else None
    costs, fams, pf, rows, mtp = [], [], [], [], []
    geo = cfg.stages             # apply_pp's split, the one PyNative explain / diff show (config.stage_split)
    assert geo is not None       # config.from_tree sets it
    for la in plan.layers:
        f = fam_of(la.layer)
        label, cost = layer_cost(f, la)
        stage = cfg.stage_of(la.layer)[0]
        row = {"layer": la.layer, "stage": stage, "choice": ("mtp:" if la.mtp else "") + label,
               "activation_bytes": cost.kept, "host_bytes": cost.host, "recompute_flops": cost.flops}
        if la.mtp:
            row["mtp"] = True
            mtp.append((f, cost))
        else:
            costs.append(cost)
            fams.append(f)
            pf.append(prefetch if cost.host else None)
        rows.append(row)
    fam = fams[0] if fams else fam_of(0)
    mixed = fams if any(f is not fam for f in fams) else None
    stages = [stage_memory(spec, fam, geo, p, costs, pf, mixed, mtp) for p in range(geo.pipeline_stage)]
    fsdp_grads = "grads" in str((data.get("parallelism") or {}).get("data_parallel_shard_strategy",
                                                                      "optim_grads_params"))
    grad_div = spec.shard if fsdp_grads and spec.shard > 1 else 1
    for st in stages:
        # the legacy graph's gathered weights (memory.model.gathered_weights) are not PyNative's: FSDP gathers
        # a layer's weights for its own forward / backward and frees them (reshard after forward); and its
        # default strategy (optim_grads_params) shards the gradients too, which the static parallel optimizer
        # keeps whole
        st.gathered = 0
        st.optimizer = 0
        st.static["grads"] //= grad_div
        # the input embedding's gradient comes last in backward (tied to the head: first, with the head's)
        late = 0 if spec.frozen_base or spec.tie_embeddings else spec.symbols()["v"] * spec.hidden * spec.param_bytes
        _backward_order(st, costs, geo, _layer_grads(spec, fams, grad_div), late // grad_div)
    splan = Plan(geometry=geo, swap=bool(cfg.swap.get("enable")), formative={}, layers=[])
    est = PynativeEstimate(config=path, family=table_family, spec=spec, plan=splan, fam=fam, stages=stages,
                           layers=rows, calibration=calibration or NO_CALIBRATION,
                           unmodelled=list(spec.unmodelled),
                           unchecked=list(UNCHECKED_ALWAYS) + notes + _not_sized(plan, table_family))
    return est


def _estimate_from_tables(path: str, data: Dict[str, Any], cfg: Any, plan: Any, spec: Any, notes: List[str],
                          key: str, calibration: Any) -> Any:
    """The estimate of a MindFormers PyNative model from its own layer table (``pynative/memory_model.py``,
    ``pynative/tables/<family>.yaml``): one stage per pipeline stage, each sized with the layers
    ``apply_pp`` gives it. A family with no table is refused in one line naming it."""
    from ..memory.model import NO_CALIBRATION
    from ..model.plan import Plan
    from . import memory_model as mm

    table_name = key
    if table_name not in mm.tabled_families():
        from ..errors import NotModelled

        raise NotModelled(f"model family {cfg.family!r} on the PyNative path",
                          f"no layer table in swapwatch/pynative/tables/; modelled: "
                          f"{', '.join(sorted(mm.tabled_families()))}",
                          file=path, line=spec.lines.get("model.model_type", spec.lines.get("model")),
                          key="model.model_type")
    geo = cfg.stages
    assert geo is not None
    tp = max(1, spec.tp)
    dp_shard = spec.dp if isinstance(spec.dp, int) and spec.dp > 1 else 1
    unchecked = list(UNCHECKED_TABLES)
    if tp > 1 or dp_shard > 1 or geo.pipeline_stage > 1 or spec.cp > 1 or spec.ep > 1:
        unchecked.append("sharding across ranks (tensor parallel divides heads, FFN and vocabulary; the FSDP "
                         "shard divides weights, gradients and optimizer states; pipeline stages hold "
                         "their layers and 1F1B's micro-batches in flight): PyNative DryRun here runs one "
                         "rank")
    prefetch = plan.sections["swap"].get("default_prefetch", 1) if cfg.swap.get("enable") else None
    rows: List[Dict[str, Any]] = []
    stages: List[StageMemory] = []
    per_stage: Dict[int, List[int]] = {}
    for la in plan.layers:
        per_stage.setdefault(cfg.stage_of(la.layer)[0], []).append(la.layer)
    first_table: Any = None
    for p in range(geo.pipeline_stage):
        ids = [i for i in per_stage.get(p, []) if i < cfg.num_layers]
        shape = mm.Shape(b=spec.batch, s=spec.seq, h=spec.hidden, heads=max(1, spec.heads // tp),
                         kv_heads=max(1, spec.kv_heads // tp), head_dim=spec.head_dim, ffn=spec.ffn // tp,
                         vocab=spec.vocab // tp, layers=len(ids), compute_bytes=spec.compute_bytes,
                         params_bytes=spec.param_bytes, tied=spec.tie_embeddings)
        table = mm.LayerTable(table_name, shape)
        first_table = first_table or table
        costs = []
        for la in plan.layers:
            if la.layer not in ids:
                continue
            c = table.cost(full=la.full, select=la.select, exclude=la.exclude if la.full else (),
                           layer_swap=la.layer_swap, op_swap=la.op_swap)
            costs.append(c)
            rows.append({"layer": la.layer, "stage": p, "choice": c.label, "activation_bytes": c.kept,
                         "host_bytes": c.host, "recompute_flops": c.flops})
        in_flight = min(geo.pipeline_stage - p, max(1, spec.micro_batch_num)) if geo.pipeline_stage > 1 else 1
        ph = mm.phases(shape, table, costs, prefetch, first=p == 0, last=p == geo.pipeline_stage - 1,
                       in_flight=in_flight, shard=dp_shard)
        stages.append(PynativeStage(stage=p, layers=ids, static={}, activations=0, swap_window=0, transient=0,
                                    workspace=0, head=0, phases=ph))
    splan = Plan(geometry=geo, swap=bool(cfg.swap.get("enable")), formative={}, layers=[])
    assert first_table is not None
    return PynativeEstimate(config=path, family=key, spec=spec, plan=splan, fam=first_table, stages=stages,
                            layers=rows, calibration=calibration or NO_CALIBRATION,
                            unmodelled=list(spec.unmodelled),
                            unchecked=unchecked + notes + _not_sized(plan, table_name, tabled=True))


class PynativeStage(StageMemory):
    """A stage of the PyNative model: its figures are :class:`memory_model.Phases`' (the graph path's
    StageMemory fields stay 0); the JSON keeps the static estimate's shape (DESIGN §3.3a)."""

    def __init__(self, *args: Any, phases: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.phases = phases

    def peak(self, cal: Any = None) -> int:
        """The larger step's peak, plus a calibration's residual when one is given (tune's launch offset:
        tune/memory_api.py:pynative_offset)."""
        return self.phases.peak() + int(round(getattr(cal, "residual", 0.0) or 0.0))

    @property
    def phase(self) -> str:
        return "optimizer" if self.phases.phase() == "optimizer" else "activations"

    def to_json(self, cal: Any = None, measured: Optional[int] = None) -> Dict[str, Any]:
        ph = self.phases
        base = ph.weights + ph.states + ph.shared
        act = ph.activation_phase() - base
        opt = ph.optimizer_steady - base
        on_opt = self.phase == "optimizer"
        parts = {} if on_opt else dict(ph.forward_end_parts if ph.forward_end >= ph.backward else ph.backward_parts)
        grads = ph.grads if on_opt else parts.pop("grads", 0)
        static = {"weights": ph.weights, "grads": grads, "optimizer_states": ph.states, "shared": ph.shared}
        dyn = opt - ph.grads if on_opt else act - grads
        out = {"stage": self.stage, "layers": self.layers, "peak_bytes": self.peak(), "peak_phase": self.phase,
               "activation_phase_bytes": act, "optimizer_step_bytes": opt,
               # the graph path's third phase (a single legacy stage's gradients at its backward's end,
               # memory/model.py:backward_end); PyNative's gradients are in the phases above
               "backward_end_bytes": 0,
               "components": {"static": sum(static.values()),
                              "activations": 0 if on_opt else parts.get("saved_activations", 0)
                              + parts.get("swap_prefetch_window", 0),
                              "other": dyn if on_opt else dyn - parts.get("saved_activations", 0)
                              - parts.get("swap_prefetch_window", 0)},
               "breakdown": {**static, "calibration_residual": 0,
                             "saved_activations": parts.get("saved_activations", 0),
                             "swap_prefetch_window": parts.get("swap_prefetch_window", 0),
                             "recompute_transient": parts.get("recompute_transient", 0),
                             "backward_workspace": 0, "head_and_logits": parts.get("head_and_logits", 0),
                             "gathered_weights": 0, "optimizer_step": dyn if on_opt else 0, "backward_end_gradients": 0,
                             "first_step_peak": ph.peak(steady=False)}}
        out["measured_peak_bytes"] = measured
        return out


def _layer_grads(spec: Any, fams: Sequence[Any], div: int) -> List[int]:
    """Gradient bytes of each layer (its weights' elements in the parameter dtype, split ``div`` ways as
    the FSDP strategy splits them; none for a frozen base under LoRA, as ``memory.model.static_parts``)."""
    from ..memory.spec import params_per_layer

    if spec.frozen_base:
        return [0] * len(fams)
    return [params_per_layer(spec, f.params_rows, f.mla_rows) * spec.param_bytes // div for f in fams]


def _backward_order(st: Any, costs: Sequence[Any], geo: Any, layer_grads: Sequence[int], late: int) -> None:
    """The activation phase and the gradients alive at the peak, in the order PyNative runs the backward.

    PyNative has no graph plan: a layer's saved tensors are freed when its backward is done (reference
    counts), and each gradient is a fresh tensor made by the backward op that computes it (the trainer
    reads them when the backward returns). So the backward of layer ``i`` holds what layers ``0..i`` keep,
    its own recompute transient, and the gradients made so far: the head's (first in backward), then those
    of the layers after ``i`` (the input embedding's comes last). The peak is the largest of these over
    the stage's layers, or the backward's end (every gradient, nothing kept). The static model instead
    adds every gradient and every layer's kept tensors to the largest transient
    (``memory.model.stage_memory``: the graph pool holds the gradients from the step's start and does not
    give back what the later layers freed). Measured on the example model (docs/estimate.md, The PyNative
    path): full recompute of layers 0-1 ahead of two plain layers peaks at the forward's end, with no
    gradient yet (47 MiB; the static sum said 65, the transient in backward order with every gradient 54).
    One micro-batch in flight on one stage; with a pipeline the static sum is kept (its micro-batches
    interleave their backwards)."""
    if geo.pipeline_stage > 1 or not st.layers:
        return
    ids = [i for i in st.layers if i < len(costs)]
    grads = st.static["grads"]
    made = max(0, grads - sum(layer_grads[i] for i in ids) - late)        # the head's, first in backward
    mtp_extra = st.activations - sum(costs[i].kept for i in ids)          # MTP layers (last stage) stay on top
    kept = sum(costs[i].kept for i in ids)
    best = (grads, 0, 0, grads)                                            # the backward's end
    for i in reversed(ids):
        cand = (kept + mtp_extra + costs[i].regen + made, kept, costs[i].regen, made)
        best = max(best, cand)
        kept -= costs[i].kept
        made += layer_grads[i]
    st.activations = best[1] + (mtp_extra if best[1] else 0)
    st.transient = max(best[2], st.transient if mtp_extra and best[1] else 0)
    st.static["grads"] = best[3]


def _not_sized(plan: Any, table_family: str, tabled: bool = False) -> List[str]:
    out = []
    if any(la.comm for la in plan.layers):
        out.append("recompute_comm: what communication ops keep is not sized (no effect in the figure)")
    if any(la.exclude and la.full for la in plan.layers):
        out.append("exclude_op: its saves are kept as the real checkpoint_exclude_wrapper keeps them; the "
                   "DryRun stand-in recomputes them (not checked)")
    if table_family != "tinyllama" and not tabled:
        out.append(f"the layer's tensors are the graph path's table (swapwatch/memory/{table_family}.yaml, "
                   f"matched on the PyNative module paths), not measured on the PyNative model")
    return out


@dataclass
class PynativeEstimate(Estimate):
    """The static :class:`Estimate` plus what the PyNative sizing leaves unchecked (``unchecked``; the
    JSON adds ``"path": "pynative"`` and that list, docs/DESIGN.md §3.3a); no ``--calibrate`` on this path."""

    unchecked_where: str = "PyNative (r2.x) path"
    calibrates: bool = False

    def to_json(self) -> Dict[str, Any]:
        out = super().to_json()
        out["path"] = "pynative"
        out["unchecked"] = list(self.unchecked)
        return out

    def dryrun_json(self) -> Dict[str, Any]:
        """PyNative DryRun L1's peaks beside the model's (``estimate --dryrun``): one simulated rank."""
        out = super().dryrun_json()
        out["level"] = "PyNative DryRun L1"
        return out


def attach_dryrun(est: Any, config: str) -> None:
    """``estimate --dryrun`` on an r2.x YAML: MindFormers' PyNative Trainer under PyNative DryRun
    (``pynative/dryrun.py``), its peaks set beside stage 0's. DryRunError (exit 1) names the log; what
    cannot run here is InputError (exit 2) with the reason."""
    from ..errors import InputError
    from ..memory.dryrun import StagePeak
    from . import dryrun

    data, lines = read_yaml(config)
    dryrun.one_rank_refusal(data if isinstance(data, dict) else {}, lines, config)
    reason = dryrun.available()
    if reason:
        raise InputError(f"--dryrun: PyNative DryRun is not available here: {reason}", file=config)
    res = dryrun.measure(config)
    est.dryrun = {0: StagePeak(stage=0, rank_id=0, used_bytes=res.used_bytes, actual_bytes=res.actual_bytes,
                               seconds=res.seconds, log_path=res.log_path)}

