"""One decoder layer's saved tensors, and what a strategy leaves of them.

The family's data (``swapwatch/memory/<family>.yaml``) says, per op of the layer's cell tree, what
the op produces and what its backward needs. From that, for a set R of recomputed ops:

* kept on device = (what the backward of ops outside R needs, plus the inputs of ops in R) minus
  the outputs of ops in R: recomputed outputs are regenerated from their inputs during backward,
  so full recompute keeps only the layer input (Korthikanti et al.'s ``2sbh`` in fp16);
* regenerated = what the backward needs that R produces: it exists again, for one layer at a time,
  while that layer runs backward (the recompute transient);
* recompute cost = the forward FLOPs of the ops in R.

Which ops a pattern reaches is decided by the one matcher on the one layout (``swapwatch.engine.strategy``
walks ``swapwatch/layouts/<family>.yaml``): a cell target recomputes every op under it.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Dict, FrozenSet, Iterator, List, Optional, Sequence, Set, Tuple


from ..config.load import mapping
from ..engine import strategy
from ..model.patterns import under
from ..errors import InputError, NotModelled
from ..model.families import DEFAULT_FAMILY, tree_fine_grain
from ..layouts import load_layout
from .spec import ModelSpec, product
from .table_files import family_data, tables, variant_tags  # noqa: F401  (re-exported: the table files' reader)


@dataclass(frozen=True)
class Op:
    path: str
    ins: Tuple[str, ...]
    outs: Tuple[str, ...]
    saves: Tuple[str, ...]
    flops: Tuple[object, ...]
    #: what select_comm_recompute frees when its patterns reach this op (``comm_frees`` in the
    #: table: the gathered copy the communication after it would keep; :meth:`TensorTable.comm_freed`)
    comm_frees: Tuple[str, ...] = ()
    #: a multi-output primitive whose outputs the forward itself unpacks (``unpacked: true`` in the
    #: table: the SwiGlu / QKV splits): a backward of ANOTHER op reads them through a forward
    #: TupleGetItem, which MindSpore's offload pass does not move to host (:attr:`TensorTable.pinned`)
    unpacked: bool = False


@functools.lru_cache(maxsize=None)
def _has_experts(table: str) -> bool:
    """Whether the tensor table sizes routed experts: a weight row over the local experts (``el``,
    ModelSpec.symbols) in any of its layer kinds."""
    data = family_data(table)
    kinds = list((data.get("kinds") or {}).values()) or [data]
    return any("el" in (r.get("row", ()) if isinstance(r, dict) else r) for k in kinds for r in k.get("params", ()))


def row_shard(spec: ModelSpec, kind: Optional[str]) -> int:
    """Ranks the parallel optimizer splits one weight row over (TensorTable.params_div): 1 without
    it; ``all``: dp x tp x cp (tensor parallel does not split the row); ``experts``: dp x tp x cp / ep;
    ``none``: not split (``parallel_optimizer=False``: the norms, transformer/norm.py); else the
    data-parallel ranks (``ModelSpec.shard``)."""
    if not spec.optimizer_shard or kind is None:
        return spec.shard
    if kind == "none":
        return 1
    reps = spec.dp * spec.tp * spec.cp // (spec.ep if kind == "experts" else 1)
    limit = spec.optimizer_shard_size if spec.optimizer_shard_size > 0 else reps
    return max(1, min(reps, limit))


@dataclass(frozen=True)
class LayerCost:
    """Bytes of one layer for one micro-batch under one choice, and the recompute FLOPs."""

    kept: int            # on device from forward to backward
    host: int            # moved to host by swap (kept on device only inside the prefetch window)
    regen: int           # regenerated during this layer's backward
    flops: float         # forward FLOPs recomputed
    by_tensor: Tuple[Tuple[str, int], ...] = ()   # kept bytes per tensor, for the breakdown
    #: bytes the stage holds once for this layer, however many micro-batches are in flight, beside
    #: ``kept`` (which excludes them): the legacy layer's compute-dtype weight copies
    #: (:attr:`TensorTable.copies_once`)
    once: int = 0


def legacy_gathered(spec: ModelSpec) -> bool:
    """The legacy path with the optimizer shard on: each layer weight is all-gathered once per step
    and the gathered copy, already in the compute dtype, is what every micro-batch's matmul reads
    (``model.gathered_weights``)."""
    return not spec.mcore and spec.shard > 1


def kind_data(table: str, kind: Optional[str]) -> Optional[dict]:
    """The part of tensor table ``table`` for one layer kind (``dense`` / ``moe`` / ``mtp``): a table
    with ``kinds`` has one section per kind, a table without serves its family's first kind."""
    data = family_data(table)
    kinds = data.get("kinds")
    if kinds is None:
        return data
    return kinds.get(kind) if kind is not None else next(iter(kinds.values()))


def layout_kinds(family: str) -> List[str]:
    """The layer kinds (``swapwatch/layouts/<family>.yaml`` ``layouts``) of a layout family."""
    from ..layouts import family_data as layout_data

    return list(layout_data(family)["layouts"])


def table_for(family: str, origin: str = "") -> Tuple[str, FrozenSet[str]]:
    """The tensor table of the layout family ``family``; a family without one, or whose table lacks
    one of its layer kinds, is bad input (exit 2): planning its YAML on another family's tree would
    be a silently wrong answer."""
    found = tables().get(family)
    where = f" ({origin})" if origin else ""
    if found is None:
        raise NotModelled(f"model family {family!r}{where}",
                          f"no memory model for it; families with one: {', '.join(sorted(tables()))}")
    data = family_data(found[0])
    if "kinds" in data:
        missing = [k for k in layout_kinds(family) if k not in data["kinds"]]
        if missing:
            raise NotModelled(f"the {', '.join(missing)} layers of model family {family!r}{where}",
                              f"no memory model for them in swapwatch/memory/{found[0]}.yaml")
    return found


class TensorTable:
    """The tensor table of ``family`` sized for ``spec`` (one rank, one micro-batch)."""

    def __init__(self, spec: ModelSpec, family: str = DEFAULT_FAMILY, origin: str = "", kind: Optional[str] = None):
        self.name = self.layout_family = family
        self.spec = spec
        self.table, tags = table_for(family, origin)
        #: the layer kind this object sizes (a family's layers may differ: DeepSeek-V3's dense, MoE and
        #: MTP layers); None: the family's first kind
        if kind is None and "kinds" in family_data(self.table):
            kind = layout_kinds(family)[0]
        self.kind = kind
        data = kind_data(self.table, kind)
        assert data is not None, (family, kind)     # table_for checked every kind is there
        self.data = data
        sym = spec.symbols()
        #: an op with ``variant`` tags is in the layer only when every tag holds: flash / plain from
        #: use_flash_attention, gqa / mha from the kv heads, interleaved / not_interleaved from the
        #: legacy Llama's fine-grain interleave (spec.fine_grain), the rest from the layout family
        #: (``families`` in the table); a tensor with tags has 0 bytes unless they hold
        active = tags | {"flash" if spec.flash else "plain", "gqa" if spec.kv_heads < spec.heads else "mha",
                         "interleaved" if spec.fine_grain > 1 else "not_interleaved"}
        if spec.num_experts > 1 and not _has_experts(self.table):
            # a dense table would size the MoE layers as dense ones: DryRun L1 of Mixtral-8x7B's stage 0
            # (legacy LlamaForCausalLM with moe_config: 16 layers of 8 experts, EP2) holds 56882 MiB
            # where the dense llama table gives 35330 (-37.9 %; mixtral_8x7b_finetune_r160_s0)
            raise NotModelled(f"mixture of experts on model family {family!r}",
                              f"{spec.num_experts} experts: swapwatch/memory/{self.table}.yaml sizes dense layers only",
                              file=spec.source)
        if family_data(self.table).get("requires_flash") and not spec.flash:
            raise NotModelled(f"model family {family!r} without flash attention",
                              f"model.model_config.use_flash_attention is False; swapwatch/memory/{self.table}.yaml "
                              f"tables the FlashAttention path only", file=spec.source)
        dbytes = {"compute": spec.compute_bytes, "softmax": spec.softmax_bytes, "norm": spec.norm_bytes,
                  "residual": spec.residual_bytes, "float32": 4,
                  # a weight's compute-dtype copy: nothing when the parameter already has that dtype,
                  # nor on the legacy path under the optimizer shard, where the one all-gathered
                  # compute-dtype copy of the stage serves every micro-batch (model.gathered_weights)
                  "weight_copy": spec.compute_bytes if spec.param_bytes != spec.compute_bytes
                  and not legacy_gathered(spec) else 0}

        def present(o: dict) -> bool:
            return variant_tags(o) <= active

        #: the weights' compute-dtype copies (``dtype: weight_copy``): kept like activations, never swapped
        #: on the legacy path (:meth:`movable`)
        self.weight_copies: FrozenSet[str] = frozenset(
            name for name, t in data["tensors"].items() if t.get("dtype") == "weight_copy")
        #: the legacy layer's weight copies are held once per stage, not once per micro-batch in
        #: flight: the legacy layers cast each fp32 weight in ``construct`` (``models/llama/
        #: llama_layer.py``, ``modules/layers.py:Linear.construct``), and in the graph MindSpore
        #: unrolls for the pipeline every micro-batch's Cast of a weight has the same input, so the
        #: compiled graph holds one (the cast is moved out of the layer's scope: a swapped Qwen2.5
        #: layer copies none of them to host, ``movable``), alive until the layer's last backward
        #: reads it; a layer recompute marks whole regenerates its copy in its backward and keeps
        #: none. DryRun L1 of the two legacy YAMLs with fp32 weights, no optimizer shard and several
        #: micro-batches in flight: Qwen2.5-14B 8k stage 0 (4 in flight) +10.5 % with a copy per
        #: micro-batch, -0.6 % with one per stage; Llama-3.1-70B stage 0 (8 in flight) +62.8 % and
        #: +27.4 % (docs/estimate.md "The maintainer YAMLs above their card"). The mcore layers'
        #: copies are per micro-batch (DryRun L1 on the Qwen3-32B cuts agrees within 4 % with 4 in
        #: flight, and a layer swap takes them to host). Under the optimizer shard the weight_copy
        #: dtype is 0 bytes here: the all-gathered copy is counted once (``model.gathered_weights``).
        self.copies_once = not spec.mcore
        #: full recompute is a level plan may choose: not under SeqPipe, which MindFormers 2.1.0 rejects
        #: with recompute_config.recompute set (memory.keys, _rejected)
        self.full_allowed = spec.seq_split == 1
        self.bytes: Dict[str, int] = {
            name: product(t["shape"], sym) * dbytes[t.get("dtype", "compute")] if present(t) else 0
            for name, t in data["tensors"].items()}

        self.ops: List[Op] = [
            Op(o["path"], tuple(o["in"]), (o["out"],) + tuple(o.get("also_out", ())), tuple(o["saves"]),
               tuple(o["flops"]), tuple(o.get("comm_frees", ())), bool(o.get("unpacked")))
            for o in data["ops"] if present(o)]
        self.op_flops = [float(product(list(o.flops), sym)) for o in self.ops]
        #: weight rows (a row ``{variant: tag, row: [...]}`` counts only when its tag holds)
        self.params_rows: List[List[object]] = [
            r["row"] if isinstance(r, dict) else r for r in data["params"]
            if not isinstance(r, dict) or present(r)]
        #: per weight row, the ranks the parallel optimizer splits it over: MindSpore shards a
        #: parameter over every rank holding the same slice of it, so a row tensor parallel does
        #: not split (``opt_shard: all``: SequenceParallelLinear, the router, eh_proj) is split over
        #: dp x tp, the local experts (``opt_shard: experts``) over dp x tp / ep (1 when ep covers
        #: them), the others over dp; at most ``optimizer_weight_shard_size``. DryRun L1's tracker
        #: on the DeepSeek-V3 cut (dp4 tp8 ep32) shows exactly these Weight blocks (docs/estimate.md)
        self.params_div: List[int] = [
            row_shard(spec, r.get("opt_shard") if isinstance(r, dict) else None) for r in data["params"]
            if not isinstance(r, dict) or present(r)]
        #: the rows size MLA's projections themselves (else spec.params_per_layer swaps them in)
        self.mla_rows = bool(family_data(self.table).get("mla_rows"))
        self.all_ops: FrozenSet[int] = frozenset(range(len(self.ops)))
        #: tensor -> the ops consuming it in forward (a tensor with none leaves the layer)
        self.consumers: Dict[str, List[int]] = {}
        #: tensor -> the ops producing it
        self.producers: Dict[str, List[int]] = {}
        for i, op in enumerate(self.ops):
            for t in op.ins:
                self.consumers.setdefault(t, []).append(i)
            for t in op.outs:
                self.producers.setdefault(t, []).append(i)
        self.layout = load_layout(f"{family}:{kind}" if kind else family)
        #: the cells whose select recompute MindSpore cannot compile on this layer
        #: (``uncompilable_select`` in the table: :meth:`cells_reached`)
        self.uncompilable: FrozenSet[str] = frozenset(
            c["cell"] for c in data.get("uncompilable_select", ()) if present(c))
        #: the cells the layer never calls (``uncalled_cells``): a select pattern reaching one of them
        #: as a cell marks nothing (:meth:`ops_reached`)
        self.uncalled: FrozenSet[str] = frozenset(
            c["cell"] for c in data.get("uncalled_cells", ()) if present(c))
        #: the select groups plan combines: those on this layer, none reaching a cell MindSpore cannot
        #: compile select recompute of here
        self.groups: List[Tuple[str, List[str]]] = [
            (g["name"], list(g["patterns"])) for g in data.get("select_groups", [])
            if present(g) and not self.cells_reached(g["patterns"], self.uncompilable)]
        #: what the layer marks for recompute itself when built (``swapwatch/layouts`` ``preset``:
        #: Qwen3-MoE / DeepSeek-V3's ``mlp.experts.swiglu``), and what it marks more when
        #: select_recompute is set at all (legacy LLamaAttention without flash: its core ops)
        from ..layouts import load_layer_info

        info = load_layer_info(f"{family}:{kind}" if kind else family) if family != DEFAULT_FAMILY else {}
        self.preset_ops = self._ops_at(p for p, v in (info.get("preset") or {}).items() if v.get("recompute"))
        self.preset_select_ops = self._ops_at(
            p for p, v in (info.get("preset_if_select_recompute") or {}).items() if v.get("recompute"))
        #: tensors swap leaves on device: MindSpore's offload pass (``frontend/parallel/pass/
        #: offload_activation.cc``, OffloadActivationOptimizer::GetActivationOffloadInfo) moves a forward
        #: node's output to host when a backward node reads it and the node's primitive carries the
        #: offload flag; an output of an ``unpacked`` op read by another op's backward is read through
        #: the forward's TupleGetItem, whose primitive carries none. DryRun L1's tracker on the 8k
        #: Qwen3-32B cut with ``op_swap: mlp`` holds both SwiGlu split outputs (the ``SplitWithSize``
        #: blocks, 200 MiB fp32 each per layer and micro-batch) from forward to backward while
        #: everything else of the MLP goes to host (docs/estimate.md "Swap under DryRun L1")
        self.pinned: FrozenSet[str] = frozenset(
            t for i, op in enumerate(self.ops) if op.unpacked for t in op.outs
            if any(t in o.saves for j, o in enumerate(self.ops) if j != i))
        #: full recompute marks the layer cell: the ops producing the layer's output stay
        self.layer_boundary = frozenset(i for i, op in enumerate(self.ops) if op.outs[0] not in self.consumers)
        #: the backward's own working set: the gradient of the largest tensor and its input's
        self.workspace = 2 * max(self.bytes[t] for o in self.ops for t in o.outs)
        #: bytes the layer holds beyond its ops' tensors for the stage (the MTP layer's own
        #: embedding output and head logits, SeqPipe's whole-sequence key / value: ``extra`` in the
        #: table), per micro-batch (per sequence chunk under SeqPipe); an entry of 0 bytes
        #: (``seqpipe_kv`` without SeqPipe) is left out of the breakdown
        self.extra_by_tensor: Tuple[Tuple[str, int], ...] = tuple(
            (name, n) for name, t in (data.get("extra") or {}).items()
            for n in [product(t["shape"], sym) * dbytes[t.get("dtype", "compute")]] if n)

    def _ops_at(self, paths) -> FrozenSet[int]:
        wanted = list(paths)
        return frozenset(i for i, op in enumerate(self.ops) if any(under(op.path, p) for p in wanted))

    # -- what a choice keeps ------------------------------------------------------------------
    def effective(self, marked: FrozenSet[int], boundary: FrozenSet[int] = frozenset()) -> FrozenSet[int]:
        """The ops really recomputed when ``marked`` are marked for recompute: those a cell-style
        mark recomputes (:meth:`_by_consumers`) and those a primitive segment brings back
        (:meth:`_by_segments`)."""
        return self._by_consumers(marked, boundary) | self._by_segments(marked, boundary)

    def _by_consumers(self, marked: FrozenSet[int], boundary: FrozenSet[int]) -> FrozenSet[int]:
        """A marked op is recomputed when every forward consumer of its output is marked too (else
        the output stays alive for that consumer and the mark is dropped), and a marked cell keeps
        its own output (``boundary``: the ops producing it are marked but not recomputed).
        Dropping one op can void its producers in turn, hence the fixed point."""
        eff = set(marked - boundary)
        accept = set(marked)
        changed = True
        while changed:
            changed = False
            for i in sorted(eff):
                users = self.consumers.get(self.ops[i].outs[0], [None])    # side outputs: its own backward
                if any(j is None or j not in accept for j in users):
                    eff.discard(i)
                    accept.discard(i) if i not in boundary else None
                    changed = True
        return frozenset(eff)

    def _segments(self, ops: FrozenSet[int]) -> Iterator[Set[int]]:
        """The connected segments of the op indices ``ops`` (joined through a tensor one of them makes
        and another uses), in the order of their first op: the unit MindSpore's recompute pass clones
        (:meth:`_by_segments`) and runs again before a backward (:meth:`_net_regen`)."""
        seen: Set[int] = set()
        for start in sorted(ops):
            if start in seen:
                continue
            seg: Set[int] = set()
            todo = [start]
            while todo:
                i = todo.pop()
                if i in seg:
                    continue
                seg.add(i)
                for t in self.ops[i].outs:
                    todo.extend(j for j in self.consumers.get(t, []) if j in ops)
                todo.extend(j for t in self.ops[i].ins for j in self.producers.get(t, []) if j in ops)
            seen |= seg
            yield seg

    def _by_segments(self, marked: FrozenSet[int], boundary: FrozenSet[int]) -> FrozenSet[int]:
        """MindSpore's recompute pass clones a connected segment of marked primitives when one of
        the tensors it hands to an op outside it is needed by that op's backward; the tensors inside
        come back with it. Measured on the tiny Llama's compiled IR (docs/mindspore-facts.md, the
        ``add_recomputation`` dump): ``feed_forward.mul`` + ``w1.activation.silu`` give no clone (the
        product goes to ``w2``'s input ``reshape``, whose backward needs nothing, and ``w2``'s matmul
        keeps the reshaped copy); adding ``feed_forward.w2.reshape`` clones all three (the reshaped
        copy is what the unmarked matmul's backward needs). That is SW110's fix, credited here, and
        SW211's finding before launch."""
        out: set = set()
        for seg in self._segments(marked - boundary):
            made = {t for i in seg for t in self.ops[i].outs}
            if any(t in made for j, op in enumerate(self.ops) if j not in seg for t in op.saves):
                out |= seg
        return frozenset(out)

    @functools.lru_cache(maxsize=None)  # noqa: B019 - one TensorTable per command; the cache is the search's memo
    def cost(self, marked: FrozenSet[int], boundary: FrozenSet[int] = frozenset(),
             swapped: FrozenSet[str] = frozenset(), layer_swap: bool = False,
             comm_freed: FrozenSet[str] = frozenset()) -> LayerCost:
        """Bytes kept / regenerated / swapped and FLOPs recomputed when the ops ``marked`` (indices
        into ``ops``; ``boundary``: outputs of marked cells) are marked for recompute, the tensors
        ``swapped`` (or, with ``layer_swap``, everything kept a swap can move: :meth:`movable`) go to
        host and the gathered copies ``comm_freed`` are re-gathered in backward instead of kept
        (:meth:`comm_freed`)."""
        recomputed = self.effective(marked, boundary)
        produced = {t for i in recomputed for t in self.ops[i].outs}
        kept = self.kept(recomputed, comm_freed)
        needed = {t for i, op in enumerate(self.ops) for t in (op.ins if i in recomputed else op.saves)}
        saves_all = {t for o in self.ops for t in o.saves}
        regen = sum(self.bytes[t] for t in saves_all & produced)
        if self.spec.mcore and recomputed:
            regen = self._net_regen(recomputed, frozenset(needed - produced))
        movable = set(self.movable(kept, recomputed))
        on_host = movable if layer_swap else movable & set(swapped)
        device = [(t, self.bytes[t]) for t in kept if t not in on_host] + list(self.extra_by_tensor)
        once = sum(b for t, b in device if t in self.weight_copies) if self.copies_once else 0
        return LayerCost(kept=sum(b for _, b in device) - once, host=sum(self.bytes[t] for t in on_host),
                         regen=regen, flops=sum(self.op_flops[i] for i in recomputed),
                         by_tensor=tuple(device), once=once)

    def kept(self, recomputed: FrozenSet[int], comm_freed: FrozenSet[str] = frozenset()) -> Tuple[str, ...]:
        """The tensors kept from the forward to the backward (sorted) when the ops ``recomputed``
        (:meth:`effective`) are recomputed: what the backward of the other ops needs and the inputs of
        the recomputed ones, less what recompute makes again and the gathered copies ``comm_freed``."""
        needed: Set[str] = set()
        for i, op in enumerate(self.ops):
            needed.update(op.ins if i in recomputed else op.saves)
        produced = {t for i in recomputed for t in self.ops[i].outs}
        return tuple(sorted(needed - produced - comm_freed))

    def movable(self, tensors, recomputed: FrozenSet[int] = frozenset()) -> Tuple[str, ...]:
        """Those of ``tensors`` a swap can move to host: made by an op of the layer, not read by an op
        ``recomputed``, not left on device by the offload pass (:attr:`pinned`), and not a weight's
        compute-dtype copy held once per stage (:attr:`copies_once`: the legacy path). MindSpore's
        offload pass copies out only outputs of the marked cell's own primitives: the layer's input
        comes from the cell before it; on the legacy Llama layer the cast of a weight is moved out of
        the layer's scope when the graph is compiled (DryRun's compiled graph of a swapped Qwen2.5
        layer copies out 18 tensors per micro-batch, none of them a weight: docs/mindspore-facts.md
        §7), while the mcore layer's copies go to host with the rest (DryRun L1 on the Qwen3-32B cuts:
        a layer swap leaves the stage at its optimizer floor, 11643 MiB, only with the weight copies
        gone: docs/estimate.md "Swap under DryRun L1"). An output a recomputed op reads is not
        swapped (MindFormers' SWAP documentation, "Used together with Recomputation", point 2; SW202)."""
        read = {t for i in recomputed for t in self.ops[i].ins}
        return tuple(t for t in tensors if t in self.producers and t not in read and t not in self.pinned
                     and not (self.copies_once and t in self.weight_copies))

    def _net_regen(self, recomputed: FrozenSet[int], kept: FrozenSet[str]) -> int:
        """What a layer's recomputation adds at its backward, over what that backward has already
        freed: per connected segment of recomputed ops (the grouping of :meth:`_by_segments`), the
        bytes it regenerates that a backward needs, less the kept tensors that only ops after the
        segment's last user (forward order) need. MindSpore runs a recomputed segment just before
        the backward of the first node (in backward order) that uses it, so those ops' backward
        has run and freed what they kept. Full recompute is one segment used up to the layer's
        last matmul: nothing is freed before it, the whole regeneration counts. A select set of
        ``mlp.activation_func.silu`` (its output needed by ``mul``'s backward) comes back after
        ``linear_fc2``'s backward freed that matmul's input and weight copy: DryRun L1 on the
        Qwen3-32B cut frees silu's whole output per layer and micro-batch in flight, 800 MiB on
        the first stage, with no transient above it (docs/estimate.md). Used on the mcore path
        only (``ModelSpec.mcore``): on the example model's CPU pool (graph mode) the select
        attention core + MLP case falls 10 % low with it, and the legacy DryRun L1 cases have no
        select recompute to check it on; elsewhere the whole regeneration counts."""
        needers: Dict[str, List[int]] = {}
        for i, op in enumerate(self.ops):
            for t in (op.ins if i in recomputed else op.saves):
                needers.setdefault(t, []).append(i)
        saves_all = {t for o in self.ops for t in o.saves}
        worst = 0
        for seg in self._segments(recomputed):
            back = {t for i in seg for t in self.ops[i].outs} & saves_all
            if not back:
                continue
            last = max(j for j, op in enumerate(self.ops) if back & set(op.saves))
            freed = sum(self.bytes[t] for t in kept if min(needers.get(t, [-1])) > last)
            worst = max(worst, sum(self.bytes[t] for t in back) - freed)
        return max(0, worst)

    def comm_freed(self, lp: strategy.LayerPlan) -> FrozenSet[str]:
        """The gathered copies select comm recompute frees at one layer: ``comm_frees`` of the ops
        its patterns reach (MindFormers sets ``recompute_comm_op`` on those primitives, and MindSpore
        then re-runs the communication after them in backward instead of keeping its output), minus
        what select_comm_recompute_exclude reaches. LayerSetting.set_recompute applies it only to a
        layer not fully recomputed (``parallel_core/training_graph/transformer/utils.py``).

        Measured with DryRun L1 on the Qwen3-32B cut at TP8 with sequence parallel (pair
        ``qwen3_32b_l8_tp8_sp_none`` -> ``_comm``, default pattern ``.*\\.norm``: -280 MiB on stage 0, 4
        micro-batches x 2 layers x the attention's gathered input ``xn1g``). The memory tracker of
        the ``_comm`` case has no forward AllGather block alive at the peak, and still a 40 MiB
        ``mlp/linear_fc1/Cast`` block per layer and micro-batch: the MLP's gathered input is kept by
        linear_fc1's cast after the gather, which comm recompute does not touch, so only
        ``input_layernorm.norm`` frees anything (qwen3.yaml). The re-gathered copy lives for the
        weight-gradient matmul only and is not at DryRun's peak: not added to the transient.
        """
        if lp.full_recompute or not lp.select_comm_recompute:
            return frozenset()
        marked, _ = self.ops_reached(lp.select_comm_recompute, "comm")
        if lp.select_comm_recompute_exclude:
            marked = marked - self.ops_reached(lp.select_comm_recompute_exclude, "comm_exclude")[0]
        return frozenset(t for i in marked for t in self.ops[i].comm_frees)

    def forward_flops(self) -> float:
        return sum(self.op_flops)

    # -- patterns -> ops ----------------------------------------------------------------------
    def matches(self, pattern: str, mode: str = "recompute") -> bool:
        """Whether ``pattern`` reaches anything in the family's layer tree (what SW104 asks of a
        select pattern), whether or not the table sizes what it reaches."""
        return bool(strategy.walk(self.layout, pattern, mode).targets)

    def ops_reached(self, patterns: Sequence[str], mode: str = "recompute") -> Tuple[FrozenSet[int], FrozenSet[int]]:
        """(marked, boundary): the ops the patterns reach on the family's tree with MindFormers'
        walk, and among them those producing a reached cell's output (a cell reaches its ops)."""
        marked, boundary = set(), set()
        for pat in patterns:
            for t in strategy.walk(self.layout, pat, mode).targets:
                if t.kind == "cell" and t.path in self.uncalled:
                    continue              # never called: its recompute mark has no effect
                inside = [i for i, op in enumerate(self.ops)
                          if under(op.path, t.path)]
                marked.update(inside)
                if t.kind == "cell":
                    for i in inside:
                        users = self.consumers.get(self.ops[i].outs[0], [None])
                        if any(j is None or j not in inside for j in users):
                            boundary.add(i)
        return frozenset(marked), frozenset(boundary)

    def cells_reached(self, patterns: Sequence[str], cells: FrozenSet[str]) -> FrozenSet[str]:
        """Those of ``cells`` that select recompute ``patterns`` reach as cells on this layer (MindFormers'
        walk: the cell itself, not an op or sub-cell inside it)."""
        if not cells:
            return frozenset()
        return frozenset(t.path for pat in patterns for t in strategy.walk(self.layout, pat, "recompute").targets
                         if t.kind == "cell" and t.path in cells)

    def outputs_of(self, ops: FrozenSet[int]) -> FrozenSet[str]:
        return frozenset(t for i in ops for t in self.ops[i].outs)

    def layer_choice(self, lp: strategy.LayerPlan) -> Tuple[str, LayerCost]:
        """What MindFormers applies at one layer (``lp``) -> its label and cost.

        Full recompute marks the whole layer cell (its output is the boundary) but the excluded
        ops; select recompute the ops its patterns reach. Select comm recompute frees the gathered
        copies of :meth:`comm_freed` (only where the table names them: ``comm_frees``). Swaps voided
        by recompute (``swap_overridden``) move nothing.
        """
        label, marked, boundary = self.marks(lp)
        layer_swap = lp.layer_swap is not None and not lp.layer_swap_voided
        swapped: FrozenSet[str] = frozenset()
        live_ops = [p for p in lp.op_swap if not lp.op_swap_voided(p)]
        if live_ops:
            swapped = self.outputs_of(self.ops_reached(live_ops, "swap")[0])
        if layer_swap:
            label = f"swap:{lp.layer_swap}" if label == "none" else f"{label}+swap:{lp.layer_swap}"
        elif live_ops:
            label += "+op_swap:" + ",".join(f"{p}={lp.op_swap[p]}" for p in live_ops)
        return label, self.cost(marked, boundary, swapped, layer_swap, self.comm_freed(lp))

    def marks(self, lp: strategy.LayerPlan) -> Tuple[str, FrozenSet[int], FrozenSet[int]]:
        """(label, marked, boundary) of the recompute MindFormers applies at one layer: full recompute
        marks the layer cell but the excluded ops, select the ops its patterns reach (and the kind's
        preset marks), none the preset marks alone."""
        if lp.full_recompute:
            excluded, _ = self.ops_reached(lp.select_recompute_exclude, "exclude")
            return "full", self.all_ops - excluded, self.layer_boundary
        if lp.select_recompute:
            marked, boundary = self.ops_reached(lp.select_recompute)
            return ("select:" + ",".join(lp.select_recompute), marked | self.preset_ops | self.preset_select_ops,
                    boundary)
        return "none", self.preset_ops, frozenset()

    def prefetch_of(self, lp: strategy.LayerPlan) -> Optional[int]:
        """The backward_prefetch of what this layer swaps (the largest, when several)."""
        vals = []
        if lp.layer_swap is not None and not lp.layer_swap_voided:
            vals.append(lp.layer_swap)
        vals += [p for k, p in lp.op_swap.items() if not lp.op_swap_voided(k)]
        ints = [v for v in vals if isinstance(v, int)]
        return max(ints) if ints else (1 if vals else None)


@functools.lru_cache(maxsize=64)
def _structural(family: str, kind: Optional[str], flash: bool, gqa: bool, fine_grain: int = 1) -> "TensorTable":
    experts = 4 if _has_experts(table_for(family, "")[0]) else 0
    spec = ModelSpec(source=None, num_layers=2, hidden=64, heads=4, kv_heads=2 if gqa else 4, ffn=128, seq=32,
                     vocab=256, head_dim=16, flash=flash, num_experts=experts, top_k=2, moe_ffn=32,
                     mla={"q_lora_rank": 32, "kv_lora_rank": 16, "qk_rope_head_dim": 16, "qk_nope_head_dim": 16,
                          "v_head_dim": 16}, shared_experts=1, fine_grain=fine_grain)
    return TensorTable(spec, family, kind=kind)


def _layers_of(cfg: object, layout_key: str) -> Optional[List["TensorTable"]]:
    """The structural tables (:func:`_structural`) of the layer ``layout_key`` names in the YAML ``cfg``
    (a TrainingConfig, its merged tree): the flash / GQA variants and the fine-grain interleaved layer
    its keys make. A config read back from a log has no model_config: which legacy Llama layer
    MindFormers built is then unknown at model_parallel > 1, and both are returned (a rule answers
    only where they agree). None when the family has no tensor table."""
    family, _, kind = layout_key.partition(":")
    if family not in tables():
        return None
    tree = getattr(cfg, "tree", None) or {}
    model, pc = mapping(tree.get("model")), mapping(tree.get("parallel_config"))
    mc = mapping(model.get("model_config"))
    flash = mc.get("use_flash_attention", tree.get("use_legacy") is False) is not False
    heads = mc.get("num_heads", mc.get("num_attention_heads"))
    kv = mc.get("n_kv_heads", mc.get("num_key_value_heads", mc.get("multi_query_group_num")))
    gqa = isinstance(heads, int) and isinstance(kv, int) and kv < heads
    unknown = not mc and pc.get("model_parallel", 1) not in (None, 1) and tree.get("use_legacy") is not False
    try:
        return [_structural(family, kind or None, flash, gqa, g)
                for g in ((1, 2) if unknown else (tree_fine_grain(tree),))]
    except InputError:
        return None


def frees_nothing(cfg: object, layout_key: str, patterns: Sequence[str]) -> Optional[FrozenSet[str]]:
    """The op paths ``patterns`` reach on the layer of ``layout_key`` when MindSpore would recompute
    none of them (every reached op's output feeds an op outside the set, so each mark is dropped:
    :meth:`TensorTable.effective`); None when the set recomputes something, reaches nothing, or the
    family has no tensor table. A cell the layer never calls (``uncalled_cells``: the interleaved
    Llama layer's attention) is among the paths: its mark has no effect. Structure only
    (:func:`_layers_of`): the interleaved Llama layer's w2 reads the SiLU-Mul product itself, so
    MindFormers' default select set does free it there (docs/estimate.md "Fine-grain interleave")."""
    fams = _layers_of(cfg, layout_key)
    if fams is None:
        return None
    reached: FrozenSet[str] = frozenset()
    for fam in fams:
        marked, boundary = fam.ops_reached(list(patterns))
        void = fam.cells_reached(list(patterns), fam.uncalled)
        if (not marked and not void) or (marked and fam.effective(marked, boundary)):
            return None
        reached |= frozenset(fam.ops[i].path for i in marked) | void
    return reached


def _cells_on_every_layer(cfg: object, layout_key: str, patterns: Sequence[str], which: str) -> FrozenSet[str]:
    """The cells of each structural table's ``which`` attribute (``uncalled`` / ``uncompilable``) that
    ``patterns`` reach, on every layer the YAML may build (:func:`_layers_of`): empty where they disagree."""
    found = [fam.cells_reached(list(patterns), getattr(fam, which)) for fam in _layers_of(cfg, layout_key) or []]
    return frozenset.intersection(*found) if found else frozenset()


def never_called(cfg: object, layout_key: str, patterns: Sequence[str]) -> FrozenSet[str]:
    """The cells ``patterns`` reach on the layer of ``layout_key`` in the YAML ``cfg`` that the layer
    never calls (``uncalled_cells``: their recompute marks nothing)."""
    return _cells_on_every_layer(cfg, layout_key, patterns, "uncalled")


def cannot_compile(cfg: object, layout_key: str, patterns: Sequence[str]) -> FrozenSet[str]:
    """The cells ``patterns`` reach on the layer of ``layout_key`` in the YAML ``cfg`` whose select
    recompute MindSpore cannot compile there (``uncompilable_select`` in the family's table)."""
    return _cells_on_every_layer(cfg, layout_key, patterns, "uncompilable")
