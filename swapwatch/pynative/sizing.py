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

* **no wrapper**: every op's autograd record keeps what its backward needs (the table's ``saves``); there is
  no graph-level memory reuse (SOMAS), so nothing beyond that is shared or folded;
* **a checkpointed region** (``checkpoint_wrapper``: a whole layer for ``full_recompute_layer``, a module for
  each ``select_module`` path) keeps only its inputs from outside the region; what its ops save is
  regenerated when its backward runs (early stop), one region at a time. Its outputs stay alive when an op
  outside the region saves them (they are ordinary tensors of the outer tape). Unlike the static graph pass
  (:meth:`TensorTable.effective`: a mark is dropped when a consumer of the output is not marked), a PyNative
  checkpoint is never voided by its consumers. ``exclude_op`` paths inside a full layer are left outside the
  region (their saves stay);
* **swap** (``swap_wrapper``): a swapped layer's saved tensors go to host (``policy_fn`` keeps only the
  decoder's non-hidden inputs on device, which the table has none of), an op swap moves what the ops under
  the path save; each swapped layer comes back ``default_prefetch`` layers ahead in backward, so the window
  is the ``default_prefetch`` largest swapped layers of the stage;
* **comm recompute** changes only what communication ops keep under sequence parallel: not sized (as on
  the static paths).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Optional, Sequence, Set, Tuple

import numpy as np

from ..config import read_yaml
from ..config.tree import _pretrained_config
from ..errors import ConfigError
from ..memory.model import Estimate
from ..patterns import under

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
#: PyNative layer-path family -> the tensor table's layout family (swapwatch/memory/<table>.yaml)
TABLE_FAMILY = {"qwen3": "qwen3", "deepseek_v3_mtp": "deepseek_v3", "tinyllama": "tinyllama"}

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
    hf, hf_path = _pretrained_config({"pretrained_model_dir": model.get("pretrained_model_dir",
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
        notes.append(f"pipeline micro-batches taken as global_batch_size / (dp x local_batch_size) = {mbn}, "
                     f"1F1B, layers split evenly (pipeline_parallel_layers_per_stage not read)")
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
        held.append((region, ins))
        regen = max(regen, sum(fam.bytes[t] for t in {t for i in region for t in fam.ops[i].saves}))
    for i, op in enumerate(fam.ops):
        if i not in inside:
            kept.update(op.saves)
    host: Set[str] = set()
    if la.layer_swap:
        host = set(kept)
        label = "swap" if label == "none" else label + "+swap"
    elif la.op_swap:
        # what the swapped module's autograd holds: its ops' saves, or for a checkpoint inside it (a
        # select-recomputed cell swapped again: SwapWrapper(CheckpointWrapper(cell))) the checkpoint's inputs
        for region in _ops_under(fam, la.op_swap):
            host.update(t for i in region if i not in inside for t in fam.ops[i].saves)
            host.update(t for r, ins in held if r <= region for t in ins)
        host &= kept
        label += "+op_swap:" + ",".join(la.op_swap)
    device = [(t, fam.bytes[t]) for t in sorted(kept) if t not in host] + list(fam.extra_by_tensor)
    flops = sum(fam.op_flops[i] for i in inside)
    return label, LayerCost(kept=sum(b for _, b in device), host=sum(fam.bytes[t] for t in host), regen=regen,
                            flops=flops, by_tensor=tuple(device))


# -- the estimate -------------------------------------------------------------------------------

def _geometry(num_layers: int, pp: int, source: str, lines: Dict[str, int]):
    """Even split over the stages, the remainder on the last ones (pipeline_parallel_layers_per_stage
    'auto' is not read: an assumption the header states when pp > 1)."""
    from ..strategy import _split

    if pp > num_layers:
        raise ConfigError(f"{pp} pipeline stages for {num_layers} layers", file=source,
                          line=lines.get("parallelism.pipeline_parallel"), key="parallelism.pipeline_parallel")
    base, rem = divmod(num_layers, pp)
    counts = [base + (1 if s >= pp - rem else 0) for s in range(pp)]
    layer_list = np.array([counts], np.int32)
    return _split(num_layers, pp, 1, np.zeros((1, pp), np.int32), layer_list)


def estimate_pynative(path: str, model: Optional[str] = None, calibration: Any = None) -> Any:
    """``swapwatch estimate`` on the PyNative YAML at ``path``: an :class:`Estimate` of the static shape
    (same renderer, same JSON) with ``path: pynative`` and ``unchecked`` added."""
    from ..memory.tensor_table import TensorTable
    from ..memory.model import NO_CALIBRATION, stage_memory
    from ..plan import Plan
    from .explain import explain_tree
    from .layer_paths import family_key

    data, lines = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError("expected a mapping of config sections at the top level", file=path, line=1)
    # explain's own read (refusals of apply_ac put on the YAML's line, as explain gives them)
    ex = explain_tree(data, lines, path, family=model)
    cfg, plan = ex.config, ex.plan
    spec, notes = pynative_spec(data, lines, path)
    if spec.num_layers != cfg.num_layers:
        spec.num_layers = cfg.num_layers
    key = family_key(cfg.family)
    table_family = TABLE_FAMILY[key]
    kinds: Dict[Optional[str], Any] = {}

    def fam_of(i: int) -> Any:
        kind = None
        if table_family == "deepseek_v3":
            kind = "mtp" if i >= cfg.num_layers else ("dense" if i < cfg.first_k_dense else "moe")
        if kind not in kinds:
            kinds[kind] = TensorTable(spec, table_family, f"model.model_type {cfg.family}", kind)
        return kinds[kind]

    prefetch = plan.sections["swap"].get("default_prefetch", 1) if cfg.swap.get("enable") else None
    costs, fams, pf, rows, mtp = [], [], [], [], []
    geo = _geometry(cfg.num_layers, spec.pp, path, lines)
    for la in plan.layers:
        f = fam_of(la.layer)
        label, cost = layer_cost(f, la)
        stage = geo.pp_ids[la.layer] if la.layer < cfg.num_layers else spec.pp - 1
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
    for st in stages:
        _backward_order(st, costs, geo, spec)
        # the legacy graph's gathered weights (memory.model.gathered_weights) are not PyNative's: FSDP gathers
        # a layer's weights for its own forward / backward and frees them (reshard after forward); and its
        # default strategy (optim_grads_params) shards the gradients too, which the static parallel optimizer
        # keeps whole
        st.gathered = 0
        st.optimizer = 0
        if fsdp_grads and spec.shard > 1:
            st.static["grads"] //= spec.shard
    splan = Plan(geometry=geo, swap=bool(cfg.swap.get("enable")), formative={}, layers=[])
    est = PynativeEstimate(config=path, family=table_family, spec=spec, plan=splan, fam=fam, stages=stages,
                           layers=rows, calibration=calibration or NO_CALIBRATION,
                           unmodelled=list(spec.unmodelled),
                           unchecked=list(UNCHECKED_ALWAYS) + notes + _not_sized(plan, table_family))
    return est


def _backward_order(st: Any, costs: Sequence[Any], geo: Any, spec: Any) -> None:
    """PyNative frees a layer's saved tensors when its backward is done (reference counts, no graph plan),
    so a layer's recompute transient is on top of what the layers *before* it keep, not all of them: the
    activation phase is the largest ``kept(0..i) + regen(i)`` over the stage's layers ``i``, backward order.
    The static model keeps the transient on top of everything (``memory.model.stage_memory``: the graph
    pool did not give back what the later layers freed). Measured on the example model (docs/estimate.md,
    The PyNative path): full recompute of layers 0-1 before two plain layers is 47 MiB where the static
    sum says 65 MiB; this order says 54 MiB. One micro-batch in flight on one stage; with a pipeline the
    static sum is kept (its micro-batches interleave their backwards)."""
    if geo.pipeline_stage > 1 or not st.layers:
        return
    best, total = (-1, 0, 0), 0
    for i in st.layers:
        if i >= len(costs):
            continue
        total += costs[i].kept
        cand = (total + costs[i].regen, total, costs[i].regen)
        best = max(best, cand)
    mtp_extra = st.activations - total                  # MTP layers (last stage) stay on top
    st.activations, st.transient = best[1] + mtp_extra, max(best[2], st.transient if mtp_extra else 0)


def _not_sized(plan: Any, table_family: str) -> List[str]:
    out = []
    if any(la.comm for la in plan.layers):
        out.append("recompute_comm: what communication ops keep is not sized (no effect in the figure)")
    if table_family != "tinyllama":
        out.append(f"the layer's tensors are the graph path's table (swapwatch/memory/{table_family}.yaml, "
                   f"matched on the PyNative module paths), not measured on the PyNative model")
    return out


@dataclass
class PynativeEstimate(Estimate):
    """The static :class:`Estimate` plus what the PyNative sizing leaves unchecked (``unchecked``; the
    JSON adds ``"path": "pynative"`` and that list, docs/DESIGN.md §3.3a)."""

    unchecked: List[str] = field(default_factory=list)

    def to_json(self) -> Dict[str, Any]:
        out = super().to_json()
        out["path"] = "pynative"
        out["unchecked"] = list(self.unchecked)
        return out


def render(est: Any, fmt: str) -> str:
    """The static renderer's output with the ``unchecked`` line under the header (table format)."""
    from ..memory.render import render_estimate

    text = render_estimate(est, fmt)
    if fmt == "json":
        return text
    head, sep, rest = text.partition("\n\n")
    head = head.replace("--calibrate RUN_DIR fits the allocator's share", "no --calibrate on this path")
    return head + "\nPyNative (r2.x) path, unchecked: " + "; ".join(est.unchecked) + sep + rest
