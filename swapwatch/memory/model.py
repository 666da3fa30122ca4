"""Predicted peak memory per pipeline stage: static + in-flight activations + backward transients.

Per stage (the worst rank of that stage), in bytes:

* **static**: the stage's weights, their gradients and the optimizer states. Weights and optimizer
  states are split over the optimizer-parallel ranks when the optimizer shard is on (MindSpore's
  parallel optimizer); gradients stay whole (the accumulation buffer). Matrices are split over
  model_parallel. The embedding sits on the first stage, the final norm and the head on the last.
* **activations**: what each layer keeps for backward (:mod:`swapwatch.memory.tensor_table`), times the
  micro-batches in flight when the stage starts its first backward: ``min(m, P - p)`` for 1F1B, the
  warm-up of the interleaved schedule per chunk otherwise (one micro-batch without pipeline: the
  gradient accumulation steps run one after another). Swapped tensors live on host except while their
  own layer runs its backward (:func:`swap_window`: MindSpore's prefetch is a few kernels ahead).
* **other**: the largest recompute transient of one layer, the backward's working set, and on the
  last stage the head's logits (compute dtype, fp32 copy and the loss' softmax).
* **optimizer step**: a second phase (:func:`optimizer_step`): the clipped gradients and AdamW's
  copy of every parameter. The stage's peak is static plus the larger of the two phases; which one
  is ``peak_phase`` in the JSON (docs/estimate.md).

Calibration (:mod:`swapwatch.memory.calibrate`) fits a residual added to the static part and a scale
on the rest: ``peak = static + residual + scale * (activations + other)``.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..engine import strategy
from ..config import load_config
from ..errors import NotModelled
from .swap_cost import make_link, plan_swaps
from .tensor_table import TensorTable, LayerCost, layout_kinds, table_for
from .spec import ModelSpec, params_per_layer, product, spec_from_config, unsharded_per_layer


@dataclass
class Calibration:
    """The fitted free terms: ``peak = static + residual + scale * dynamic``; ``fragmentation`` is
    measured actual / used peak (1.0 when the logs have no actual peak). ``transient_scale``
    (fitted from three runs or more, swapwatch/memory/calibrate.py): the scale of the per-step
    working set (recompute transient, head and loss) apart from the saved activations'; None:
    ``scale``. ``static_scale`` / ``workspace_scale``: 1 / None (as the per-step terms) where the
    measured peak is a device's; 0 / 0 when it is MindSpore's CPU pool, which holds neither the
    weights, gradients and optimizer states nor a separate backward workspace (docs/estimate.md,
    "Calibration")."""

    residual: float = 0.0
    scale: float = 1.0
    fragmentation: float = 1.0
    runs: List[Dict[str, Any]] = field(default_factory=list)
    fitted: bool = False
    transient_scale: Optional[float] = None
    static_scale: float = 1.0
    workspace_scale: Optional[float] = None

    def peak(self, static: float, dynamic: float) -> int:
        return int(round(self.static_scale * static + self.residual + self.scale * dynamic))

    def free_terms(self) -> int:
        """How many terms the fit set: the residual (a device's peak; the CPU pool has none, its
        ``static_scale`` is 0), the activation scale (1 when one device run pins the residual
        only), the per-step scale (three sources or more; two on the CPU pool). A refit with fewer
        is a weaker model than this one (memory/planner.py:held_out_error)."""
        return int(self.static_scale != 0) + int(self.scale != 1.0) + int(self.transient_scale is not None)

    def per_step(self, workspace: float, other: float) -> float:
        """The backward workspace and the other per-step bytes (head, gathered weights) in units
        of ``scale`` (what :meth:`peak` multiplies): the search's fixed part (memory/search.py)."""
        if (self.transient_scale is None and self.workspace_scale is None) or not self.scale:
            return workspace + other
        t = self.scale if self.transient_scale is None else self.transient_scale
        w = t if self.workspace_scale is None else self.workspace_scale
        return (w * workspace + t * other) / self.scale

    def to_json(self) -> Dict[str, Any]:
        out = {"residual_bytes": int(round(self.residual)), "activation_scale": round(self.scale, 4),
               "fragmentation": round(self.fragmentation, 4), "runs": self.runs}
        for key, v in (("transient_scale", self.transient_scale), ("workspace_scale", self.workspace_scale),
                       ("static_scale", None if self.static_scale == 1.0 else self.static_scale)):
            if v is not None:
                out[key] = round(v, 4)
        return out


NO_CALIBRATION = Calibration()       # read-only default: never mutated


def inflight(P: int, V: int, m: int, p: int, n: int = 1) -> List[int]:
    """Micro-batches of each chunk (interleave) that stage ``p`` holds at its first backward; with
    SeqPipe (``n`` = seq_split_num > 1), sequence chunks of a micro-batch (:func:`seqpipe_inflight`)."""
    if P == 1:
        return [1] * V
    if n > 1:
        return list(seqpipe_inflight(P, V, m, p, n))
    if V == 1:
        return [max(1, min(m, P - p))]
    warm = min((P - p - 1) * 2 + (V - 1) * P + 1, m * V)
    counts = [0] * V
    for k in range(warm):
        counts[(k // P) % V] += 1
    return [max(1, c) for c in counts]


@functools.lru_cache(maxsize=None)
def seqpipe_inflight(P: int, V: int, m: int, p: int, n: int) -> Tuple[int, ...]:
    """Sequence chunks of each interleave chunk that stage ``p`` holds at its first backward under
    MindSpore's seqpipe scheduler (``frontend/parallel/pipeline_transformer/seqpipe_scheduler.cc``).

    ``SeqpipeScheduler::ExtractDataStruct``: the forwards before the first backward number
    ``warm_up = (P - 1 - p) * bias + (V - 1) * cycle0 * n + n - 1`` (``bias`` 1 without interleave, 2
    with; ``cycle0`` the first entry of ``ComputeCycleList``: the micro-batches of one round, P, the
    remainder of m / P spread over the rounds, m when m < P), at most ``m * V * n - 1``.
    ``MakeExecuteOrder`` then runs one more forward and the first backward, and from there one
    backward per forward (the oldest micro-batch, its last sequence chunk first): the stage holds
    ``warm_up + 1`` chunk activations at its first backward and never more. ``ExecuteOrder`` walks
    the forwards round by round, interleave chunk by chunk, micro-batch by micro-batch, sequence
    chunk by sequence chunk, which says which interleave chunk each one belongs to. With n = 1 and
    m a multiple of P this is the interleaved 1F1B count of :func:`inflight`."""
    cycles = [m] if m < P else [P] * (m // P)
    for i in range(m - len(cycles) * P if m >= P else 0):
        cycles[i % len(cycles)] += 1
    warm = min((P - 1 - p) * (1 if V == 1 else 2) + (V - 1) * cycles[0] * n + n - 1, m * V * n - 1)
    counts = [0] * V
    k = 0
    for cyc in cycles:
        for v in range(V):
            for _ in range(cyc * n):
                if k > warm:
                    return tuple(counts)
                counts[v] += 1
                k += 1
    return tuple(counts)


def stage_params(spec: ModelSpec, fam: TensorTable, stage: int, n_layers: int,
                 layer_params: Optional[int] = None) -> Tuple[int, int]:
    """(every weight element of one rank of ``stage``, those of them outside the optimizer shard).

    Outside the shard: a legacy input embedding (``spec.embedding_shard``; DryRun L1's tracker on the
    Qwen2.5-7B cut's first stage shows embedding_weight and its adam_m / adam_v at the full [vocab,
    hidden], docs/estimate.md), and parameters below ``parallel_optimizer_threshold``
    (``spec.unsharded_per_layer``; the final norm on the last stage). With kinds that differ
    (``layer_params``) the family's rows stand for every layer's small ones (norms and biases:
    kilobytes)."""
    sym = spec.symbols()
    params = n_layers * params_per_layer(spec, fam.params_rows, fam.mla_rows) if layer_params is None else layer_params
    if stage == 0:
        params += sym["v"] * spec.hidden
    if stage == spec.pp - 1:
        params += spec.hidden
        if not (spec.tie_embeddings and spec.pp == 1):
            params += sym["v"] * spec.hidden
    whole = sym["v"] * spec.hidden if stage == 0 and not spec.embedding_shard and spec.shard > 1 else 0
    whole += n_layers * unsharded_per_layer(spec, fam.params_rows)
    if stage == spec.pp - 1 and spec.shard > 1 and spec.hidden * spec.param_bytes < spec.shard_threshold_kb * 1024:
        whole += spec.hidden
    return params, whole


def backward_end(spec: ModelSpec, fam: TensorTable, stage: int, n_layers: int,
                 layer_params: Optional[int] = None) -> int:
    """Bytes above static at the end of the backward of a job without a gradient buffer
    (``spec.grad_buffer`` False: one legacy stage, no accumulation); 0 otherwise (the buffer is in
    the static part).

    ``wrapper/wrapper.py:MFTrainOneStepCell`` hands each gradient to its reduction (a ReduceScatter
    into the optimizer's shard, an AllReduce for a parameter outside it) as the backward makes it.
    DryRun L1's memory tracker (docs/estimate.md "A single stage's gradients"):

    * the reduction's input, the whole gradient, is freed only when a kernel on the compute stream
      first reads the reduction's output. With 16-bit weights at ``jit_level: O0`` that is the
      gradient's own cast to fp32 (``_grad_scale``), right after its reduction: the GLM3-6B YAML frees
      each whole gradient tens of kernels after it is made. At O1 graph-kernel fusion moves that
      cast into the clip's reduction after the backward, and fp32 gradients need no cast: the
      Qwen1.5-7B YAML (O1, fp32 weights) holds every whole gradient of its layers and head to the
      backward's end (24704 + 2374 MiB of ``Grad_Cast`` blocks), as do 4-layer cuts of it at O0 with
      fp32 weights and at O1 with fp16 ones;
    * without data parallel nothing reduces a gradient, so every whole one waits for the optimizer
      (not recorded: the r1.5.0 YAMLs are all DP8);
    * the reductions' outputs stay to the optimizer: the shards in the weights' dtype, or in fp32
      where O0 casts them at once (GLM3);
    * the input embedding's gradient (``UnsortedSegmentSum``, whole) is the backward's last, and
      outside the shard its AllReduce makes a second whole copy.

    At the optimizer step they are gone (the O1 update fuses the clip in, ``legacy_optimizer_step``),
    and before the backward none is made yet: this is a third phase beside the activations' and the
    optimizer's. A single stage's activations shrink as its backward goes and the gradients grow, so
    the two ends are the phase peaks: the first backward (activations) and this one (Qwen1.5-7B's
    full recompute: 52490 MiB, DryRun L1 52549)."""
    if spec.grad_buffer or spec.frozen_base:
        return 0
    params, whole = stage_params(spec, fam, stage, n_layers, layer_params)
    pb = spec.param_bytes
    emb = spec.symbols()["v"] * spec.hidden if stage == 0 else 0
    # without data parallel nothing reduces them: every whole gradient waits for the optimizer (not
    # recorded; the r1.5.0 YAMLs are all DP8)
    held = (params - emb) * pb if spec.jit_level != "O0" or pb == 4 or spec.dp == 1 else 0
    # the reductions' outputs: none without data parallel
    shard_bytes = 4 if spec.jit_level == "O0" and pb < 4 else pb
    reduced = (params - whole) * shard_bytes // spec.shard + whole * pb if spec.dp > 1 else 0
    return held + emb * pb + reduced


def static_parts(spec: ModelSpec, fam: TensorTable, stage: int, n_layers: int,
                 layer_params: Optional[int] = None, layer_local: Optional[int] = None) -> Dict[str, int]:
    """Weights, gradients and optimizer states of one rank of ``stage`` (bytes). ``layer_params``:
    the weight elements of the stage's layers when they differ by kind (dense / MoE / MTP: the
    experts' share under expert parallel is in each kind's ``params`` rows), else ``n_layers`` of
    ``fam``'s."""
    sym = spec.symbols()
    params, whole = stage_params(spec, fam, stage, n_layers, layer_params)
    pb = spec.param_bytes
    # LoRA (pet_config): the frozen base weights carry no gradients and no optimizer states; the
    # adapters' own (rank r per target matrix) are negligible beside them and left out
    trained = 0 if spec.frozen_base else params
    whole_trained = 0 if spec.frozen_base else whole
    states = spec.state_bytes * spec.optimizer_states
    # without a gradient buffer (spec.grad_buffer) the gradients are the backward's own: backward_end
    grads = trained * pb if spec.grad_buffer else 0
    out = {"weights": (params - whole) * pb // spec.shard + whole * pb, "grads": grads,
           "optimizer_states": (trained - whole_trained) * states // spec.shard + whole_trained * states}
    if layer_local is not None:
        # mcore, per-row optimizer shard (``layer_local``: the layers' weight elements on this rank,
        # TensorTable.params_div); the embedding and head split over dp as above
        local = layer_local + (params - (layer_params or 0) - whole) // spec.shard + whole
        out["weights"] = local * pb
        out["optimizer_states"] = 0 if spec.frozen_base else local * states
    if spec.mcore and spec.optimizer_swap:
        # optimizer.swap: AdamW's states are host Parameters (core/optim/adamw.py:AdamW.clone_state,
        # device='CPU'); DryRun L1's tracker has them in the host pool, outside the device's peak
        out["optimizer_states"] = 0
    if spec.seq_split > 1:
        # SeqPipe's caches, compute-dtype Parameters of each layer's attention (models/llama/
        # llama_transformer.py:LLamaAttention.__init__): key_cache and value_cache
        # [batch x dp, kv heads, seq, head_dim] split (dp, mp, cp, 1), and key_cache_grad /
        # value_cache_grad [batch, kv heads / mp, seq / cp, head_dim], where MindSpore's
        # _VirtualAssignKvCache bprop accumulates the later chunks' key / value gradients: four
        # [b, akv, skv, d] per layer on every rank
        out["kv_caches"] = 4 * n_layers * sym["b"] * sym["hkv"] * sym["skv"] * spec.compute_bytes
    return out


def swap_optimizer_step(spec: ModelSpec, sizes: Sequence[int], grads: int) -> int:
    """Bytes above static at the optimizer step of an mcore stage whose AdamW states live on host
    (``optimizer.swap: True``), ``sizes`` the weight elements of this rank in the order AdamW takes
    them (embedding, each layer's rows, the MTP block, the head), ``grads`` the static part's
    gradient bytes.

    DryRun L1's memory tracker on the DeepSeek-V3 cut (docs/estimate.md): ClipGradNorm returns the
    clipped gradient of every parameter at once (``ClipGradNorm/Mul``, fp32, the optimizer's shard);
    for each parameter in turn AdamW brings its two states to the device (``AdamW/MoveTo``), and
    those device copies stay until the end of the step, while the parameter's clipped gradient is
    freed by its update, which holds three temporaries the size of the parameter (two
    ``AdamW/Mul``, one ``TensorMove``). The peak is at the update ``i`` with the largest
    ``2 * states(<= i) + clipped(>= i) + 3 * size_i``: 10452 + 1460 + 2688 MiB at the MTP layer's
    experts there. Without pipeline (``MFTrainOneStepCell``, one stage) there is no gradient
    accumulation buffer: the backward's whole gradients, counted in the static part, are gone by
    then (reduce-scattered, then clipped), so they are taken off; with pipeline stages the
    buffer stays (the Qwen3 cases' ``accu_grads``)."""
    total, done, worst = sum(sizes), 0, 0
    for w in sizes:
        worst = max(worst, 2 * (done + w) * spec.state_bytes + (total - done) * spec.param_bytes + 3 * w * 4)
        done += w
    return max(0, worst - (grads if spec.pp == 1 else 0))


def optimizer_step(spec: ModelSpec, fam: TensorTable, stage: int, n_layers: int,
                   layer_params: Optional[int] = None) -> int:
    """Bytes above static at the optimizer step of one rank of ``stage`` (a second peak phase: the
    stage's peak is static plus the larger of this and the activation phase).

    After the backward, ``wrapper/wrapper.py:MFPipelineWithLossScaleCell.construct`` (and
    MFTrainOneStepCell) scales the gradients and ``core/clip_grad.py:ClipGradNorm.construct`` returns
    a clipped copy of every gradient (fp32, all alive: the optimizer consumes them one by one); then
    ``core/optim/adamw.py:_update_run_op`` computes ``next_param = param_fp32 * (1 - lr * wd)`` for
    every parameter, which needs no gradient, so the kernel-by-kernel executor runs all of them before
    the first update. Each update then holds two temporaries the size of its parameter and frees that
    parameter's clipped gradient and ``next_param``: the peak is at the update ``i`` (parameters in
    the order the optimizer takes them: embedding, each layer's weights, head) with the largest
    ``2 * size_i - 2 * sum(size_j for j < i)``. DryRun L1's memory tracker on Qwen3-32B shows
    exactly these blocks at the peak (first stage: the embedding's two temporaries; last stage: a
    layer's linear_fc1) (docs/estimate.md). The legacy path (``jit_level: O1``) has its own form:
    :func:`legacy_optimizer_step`.
    """
    if not n_layers and stage not in (0, spec.pp - 1):
        return 0
    if not spec.mcore:
        return legacy_optimizer_step(spec, fam, stage, n_layers, layer_params)
    sym = spec.symbols()
    parts = static_parts(spec, fam, stage, n_layers, layer_params)
    params = parts["grads"] // spec.param_bytes            # every parameter of the stage, whole
    emb = sym["v"] * spec.hidden
    order = ([emb] if stage == 0 else []) + [product(row, sym) for row in fam.params_rows] * max(1, n_layers) + \
        ([emb] if stage == spec.pp - 1 else [])
    temps, done = 0, 0
    for size in order:
        temps = max(temps, 2 * size - 2 * done)
        done += size
    return parts["grads"] + 4 * params // spec.shard + 4 * temps // spec.shard


def legacy_optimizer_step(spec: ModelSpec, fam: TensorTable, stage: int, n_layers: int,
                          layer_params: Optional[int] = None) -> int:
    """The optimizer step of the legacy path (``jit_level: O1``), bytes above static.

    ``core/optim/adamw.py:_update_run_op`` computes ``next_param = cast(param, fp32) * (1 - lr * wd)``
    for every parameter before the first update (graph-kernel fusion: one ``GraphKernel_Mul_split``
    per parameter, fp32, on the rank's optimizer shard), and the update of a parameter holds two
    fp32 temporaries its size (``TensorMove``). Unlike the mcore path no clipped copy of the
    gradients is alive then (O1 fuses the clip into the update). DryRun L1's memory tracker on the
    Qwen2.5-7B cut's first stage (full recompute) has its peak there: every layer weight's
    ``next_param`` (its optimizer shard, 889 MiB), and the input embedding's ``next_param`` and two
    ``TensorMove`` blocks, each the whole fp32 [vocab, hidden] (the embedding is outside the
    optimizer shard: ``spec.embedding_shard``), 3 x 2079 MiB, with the embedding updated first
    (docs/estimate.md, "The legacy optimizer step and the first stage"). Measured with MindFormers'
    AdamW on Ascend (DryRun L1) only: 0 for another optimizer or off Ascend (``spec.hccl``: the
    example model's CPU configs, whose pool this step was never measured on).
    """
    if not spec.hccl or spec.optimizer.lower().replace("_", "") != "adamw":
        return 0
    sym = spec.symbols()
    emb = sym["v"] * spec.hidden
    emb_split = 1 if not spec.embedding_shard else spec.shard
    # parameters in the order the optimizer takes them (embedding, each layer's weights, head), each
    # its fp32 next_param on this rank; updating one frees its next_param only (no clipped copy)
    layers = [product(row, sym) for row in fam.params_rows] * n_layers if layer_params is None else [layer_params]
    shard = spec.shard            # a property: read once, not once per layer row (plan's split search)
    order = ([4 * emb // emb_split] if stage == 0 else []) + [4 * size // shard for size in layers] + \
        ([4 * emb // shard] if stage == spec.pp - 1 and not (spec.tie_embeddings and spec.pp == 1) else [])
    temps, done = 0, 0
    for size in order:
        temps = max(temps, 2 * size - done)
        done += size
    return sum(order) + temps


#: HCCL's shared buffer per communicator, MB (HCCL_BUFFSIZE's default); each communicator holds two
#: (send and receive), outside MindSpore's memory pool (CANN HCCL user guide, HCCL_BUFFSIZE)
HCCL_BUFFSIZE_MB = 200


def communicators(spec: ModelSpec) -> int:
    """HCCL communicators one rank holds buffers for: the groups its compiled graph runs a collective
    on that have more than one rank (docs/estimate.md "The communicators a rank opens", with the
    records this was read from).

    Not one per parallel dimension: HCCL allocates a communicator's 2 x HCCL_BUFFSIZE at its first
    operator, not when MindSpore creates the group (CANN hcomm ``HcclCommunicator::ExecOp``), so a
    group no operator uses (mcore's own ``dp-`` group) and the one-rank group the legacy path creates
    cost nothing; and MindSpore's semi-auto parallel puts a collective on the group of its rank list,
    so two roles over the same ranks share one communicator. Which groups carry operators is read off
    DryRun L1's ``comm_execute_order.csv`` (a stage's first rank) on the jobs of
    ``fixtures/dryrun/hccl_groups.json``, legacy and mcore:

    * the world (a barrier and an all-reduce at start);
    * pipeline: its group (all-reduce) and its ``Send`` group (send / receive): two;
    * tensor parallel: one group; on mcore two over the same ranks (its ``tp-`` group and the
      auto-parallel one: the first stage's gathers, MoE's all-to-all when expert = tensor parallel),
      both apart from the world even where they span every rank (Qwen3-MoE on one stage);
    * data parallel: one (the gradients' reduce, the optimizer shard's gathers; legacy MoE's all-to-all
      too, expert parallel being taken out of data parallel);
    * legacy, data and tensor parallel: the stage's data x tensor ranks (Llama2-70B, Mixtral-8x7B,
      Qwen2-57B, all sequence parallel and optimizer-sharded);
    * the inputs' broadcast: over one data-parallel replica's tensor x pipeline ranks on the legacy
      path with ``vocab_emb_dp`` (on the tensor-parallel group or the world without it); on mcore
      over the first and last stages' tensor ranks (DeepSeek-V3, data parallel 4; the world at 1);
    * expert parallel where it is neither of the above (DeepSeek-V3's 32 = data x tensor on mcore;
      a legacy expert_parallel below data_parallel: one more, not recorded);
    * context parallel: one group, not recorded.
    """
    size = {"pp": spec.pp, "dp": spec.dp, "cp": spec.cp, "tp": spec.tp}

    def ranks(*axes: str) -> frozenset:
        """This rank's group along ``axes``: the axes of more than one rank say which ranks."""
        return frozenset(a for a in axes if size[a] > 1)

    groups = {ranks("pp", "dp", "cp", "tp"), ranks("pp"), ranks("dp"), ranks("cp")}
    if spec.mcore:
        # its tp- group and the auto-parallel one (which carries MoE's all-to-all at expert = tensor
        # parallel), both apart from the world even over every rank; an expert group of other ranks;
        # the first and last stages' broadcast group
        own = 2 * (spec.tp > 1) + (spec.ep > 1 and spec.ep != spec.tp) + \
            (spec.dp > 1 and spec.tp > 1 and spec.pp > 1)
    else:
        groups |= {ranks("tp"), ranks("dp", "tp")}
        if spec.vocab_emb_dp:
            groups.add(ranks("tp", "cp", "pp"))
        own = int(spec.ep > 1 and spec.ep != spec.dp)       # expert parallel below data parallel
    groups.discard(frozenset())
    return len(groups) + own + (spec.pp > 1)


def not_in_dryrun(spec: ModelSpec) -> Dict[str, Any]:
    """What DryRun L1 (and so ``peak_bytes``) leaves out, estimated on its own: HCCL's communication
    buffers (2 x HCCL_BUFFSIZE per communicator, HCCL_BUFFSIZE from the environment, default 200 MB).
    Kernel workspaces (aclnn, DryRun level 2, needs an NPU) are not estimated: null. A job off Ascend
    (``ModelSpec.hccl`` False) has no HCCL communicators."""
    import os

    raw = os.environ.get("HCCL_BUFFSIZE", "")
    mb = int(raw) if raw.isdigit() and int(raw) > 0 else HCCL_BUFFSIZE_MB
    n = communicators(spec) if spec.hccl and spec.dp * spec.tp * spec.pp * spec.cp > 1 else 0
    return {"communicators": n, "hccl_buffsize_mb": mb, "communication_buffers_bytes": n * 2 * (mb << 20),
            "kernel_workspace_bytes": None}


def head_bytes(spec: ModelSpec, stage: int, chunks: int = 1) -> int:
    """Last stage: the final norm's tensors, the head weight's compute-dtype copy and the loss' tensors
    at the loss' peak (the end of its forward: DryRun L1's tracker holds no layer's backward beside
    them, ``ModelSpec.loss_apart``).

    The head is a ColumnParallelLinear (``tensor_parallel/layers.py:ColumnParallelLinear.construct``
    casts its weight to the compute dtype; the matmul's backward keeps that copy when the parameter
    is fp32).

    mcore (``parallel_core/training_graph/loss_func.py``): ``_LogSoftmax.construct`` casts the logits to
    fp32 and ``_NLLLoss.construct`` keeps the one-hot labels, the log-softmax, their product and its
    negation: four fp32 tensors per logit, the compute-dtype logits already freed. Beside them the
    final norm's fp32 input and compute-dtype output (``final_layernorm``, ``[b, s / tp, h]`` under
    sequence parallel) and, under sequence parallel, the head matmul's all-gathered compute-dtype
    input ``[b, s, h]``. DryRun L1's tracker on the Qwen3-32B and Qwen3-MoE cuts' last stages names
    every one of these blocks (docs/estimate.md "The mcore last stage").

    On the legacy path the compute-dtype logits are not among them: ``models/llama/llama.py:
    LlamaForCausalLM.construct`` (and ``models/glm2/glm2.py:ChatGLM2ForConditionalGeneration.construct``)
    cast the head's output to fp32 before the loss, and nothing's backward needs the compute-dtype
    logits (the head's matmul keeps its input and weight, the cast nothing), so they are freed at the
    cast; ``core/loss/loss.py:_LogSoftmax.bprop`` / ``_NLLLoss.bprop`` then hold the three fp32
    tensors (unchanged when the compute dtype is fp32: no cast, the logits are the loss' input).
    On the Qwen2.5-7B cut's last stage (152k vocabulary, 8k tokens) the bf16 logits are 2.3 GiB of
    what the model had over DryRun L1 there (docs/estimate.md).

    ``chunks``: SeqPipe's sequence chunks in flight on the last stage (``seqpipe_inflight``; 1 without
    it; legacy only, MindFormers rejects SeqPipe on mcore). Each chunk runs the head and the loss on
    its own tokens (``modules/seq_pipe.py:SequenceSplit`` calls the whole network per chunk and adds
    the chunks' losses), and every chunk's forward runs before the first backward there: the chunks
    before the last keep what their backward reads, the head matmul's compute-dtype input
    ``[b, s, h]`` and ``_NLLLoss.bprop``'s two fp32 inputs (the log-softmax and the one-hot labels,
    ``[b, s, v]`` each), while the last chunk is at the loss' peak above. Found on the held-out
    ``qwen2_5_72b_32k_l16_split4`` stage 7, where one chunk's head was 25.6 % low (docs/estimate.md
    "SeqPipe").
    """
    if stage != spec.pp - 1:
        return 0
    sym = spec.symbols()
    b, s, sq, h, c = sym["b"], sym["s"], sym["sq"], spec.hidden, spec.compute_bytes
    weight_copy = sym["v"] * h * c if spec.param_bytes != c else 0
    if spec.mcore and spec.loss_apart:
        gathered_input = b * s * h * c if sym["sg"] else 0
        return b * sq * h * (4 + c) + gathered_input + b * s * sym["v"] * 16 + weight_copy
    # legacy; and the r2.x PyNative trainer's mcore modules (pynative/sizing.py: no graph, the loss'
    # backward with the compute-dtype logits and three fp32 tensors, checked on the example model's
    # CPU runs: docs/estimate.md "The PyNative path")
    logits = c if spec.mcore or c == 4 else 0
    # the loss' fp32 tensors per logit: O1 fuses _NLLLoss' Sub, Exp and ReduceSum into one kernel
    # (the logits' cast, OneHot, GraphKernel_Sub_Exp_ReduceSum_split: 3); at O0 they stay apart and
    # the cast is freed by the first Sub (OneHot, _LogSoftmax's Sub, _NLLLoss' Exp and Sub: 4,
    # DryRun L1's tracker on the GLM3-6B r1.5.0 YAML: 4 x 4064 MiB; docs/estimate.md "A single
    # stage's gradients"); measured on Ascend only: the example model's CPU runs keep the O1 form
    loss = 16 if spec.jit_level == "O0" and not spec.mcore and spec.hccl else 12
    # the legacy layer under sequence parallel gathers the final norm's output whole in fp32 and casts
    # it for the head (DryRun L1's tracker on the Llama2-70B cuts' last stage: 128 + 64 MiB where the
    # local [b, s / tp, h] part is 16; docs/estimate.md "The plain Llama layer under sequence parallel")
    norm = b * s * h * (4 + c) if sym["sg"] and not spec.mcore else b * sq * h * c
    kept = b * s * h * c + b * s * sym["v"] * 8
    return norm + b * s * sym["v"] * (logits + loss) + (chunks - 1) * kept + weight_copy


def gathered_weights(spec: ModelSpec, fam: TensorTable, n_layers: int, layer_params: Optional[int] = None,
                     stage: Optional[int] = None) -> int:
    """Legacy path with the optimizer shard on: the whole (all-gathered) weights of the stage's layers,
    held from the forward to the end of the backward (bytes).

    MindSpore's parallel optimizer stores each layer weight split over the optimizer ranks and inserts
    an AllGather before its first use; with ``parallel_optimizer_comm_recompute: False`` (the legacy
    Llama / Qwen2.5 YAMLs) the gathered weight is not re-gathered for the backward, so it stays alive
    from the first micro-batch's forward to the last one's backward: once per stage, not per
    micro-batch. DryRun L1's memory tracker on the Llama2-70B cut (TP4 PP2, dp 2, fp16 weights, first
    stage) shows exactly these blocks at the peak: ``Default/AllGather-op*`` of 112 / 112 / 112 / 32 /
    4 / 4 / 32 MiB per layer (w1 w2 w3 wq wk wv wo at TP4), 1632 MiB for its 4 layers, alive from the
    first forward to the optimizer step (docs/estimate.md). The embedding and the head are not
    gathered there. Measured on the legacy path only (``models/llama/llama.py``); the mcore cases run
    without the optimizer shard: 0 there.

    The gather is in the compute dtype: MindSpore casts the weight's shard before the AllGather, so
    with fp32 parameters and bf16 compute (the Qwen2.5-7B YAML) every gathered block is bf16. DryRun
    L1's communication order on the Qwen2.5-7B cut's last stage (``comm_execute_order.csv``) shows
    them: AllGather ``(896, 3584) BFloat16 -> (3584, 3584) BFloat16`` (wq, wo), ``(4736, 3584) ->
    (18944, 3584)`` (w1, w3), ``(128, 3584) -> (512, 3584)`` (wk, wv), ``(896, 18944) -> (3584, 18944)``
    (w2), one per layer weight and per step, not per micro-batch. That copy is the one every
    micro-batch's matmul reads, so the layer tables' per-micro-batch weight copies (``weight_copy``)
    are 0 here (``family.legacy_gathered``).

    On the first stage (``stage`` 0) an input embedding inside the optimizer shard (``spec.
    embedding_shard``: GLM4's ``models/glm2/glm2.py:ChatGLM2Model`` builds ``GLMEmbedding(...,
    parallel_optimizer=True)``) is gathered too, whole and in the parameters' dtype: its ``Gather``
    reads the parameter itself and the cast to the compute dtype comes after the lookup
    (``models/llama/llama_layer.py:LlamaEmbedding.construct``). DryRun L1's tracker on the GLM4-9B
    cut's first stage shows it alive at the peak, ``AllGather-op0`` of the fp32 [vocab, hidden]
    (2368 MiB), beside the layers' bf16 gathers (docs/estimate.md, "The legacy optimizer step and
    the first stage"). The Llama / Qwen2.5 embedding (``LlamaEmbedding(..., parallel_optimizer=
    config.parallel_optimizer)``, default False) stays whole in static memory and is not gathered.
    """
    if spec.mcore or spec.shard <= 1 or not n_layers:
        return 0
    params = n_layers * params_per_layer(spec, fam.params_rows, fam.mla_rows) if layer_params is None \
        else layer_params
    embedding = spec.symbols()["v"] * spec.hidden * spec.param_bytes if stage == 0 and spec.embedding_shard else 0
    # a parameter the shard leaves whole (below parallel_optimizer_threshold) is not gathered
    return (params - n_layers * unsharded_per_layer(spec, fam.params_rows)) * spec.compute_bytes + embedding


@dataclass
class StageMemory:
    """Unscaled parts of one stage's peak."""

    stage: int
    layers: List[int]
    static: Dict[str, int]
    activations: int
    swap_window: int
    transient: int
    workspace: int
    head: int
    optimizer: int = 0
    gathered: int = 0
    #: the head and loss apart in time from the layers' recompute and workspace (ModelSpec.loss_apart)
    loss_apart: bool = False
    #: the gradients at the backward's end of a job without a gradient buffer (:func:`backward_end`)
    backward_end: int = 0

    @property
    def static_total(self) -> int:
        return sum(self.static.values())

    def step_parts(self, t: float = 1.0, w: float = 1.0) -> Tuple[float, float, float, float]:
        """(transient, workspace, head, gathered) at the activation phase's peak, weighed by ``t``
        (the per-step scale) and ``w`` (the workspace's). With ``loss_apart`` the loss' tensors
        and the layers' recompute plus workspace are never alive together: the peak holds the
        larger side and the other is 0 here (docs/estimate.md "The legacy last stage")."""
        tr, ws, hd = t * self.transient, w * self.workspace, t * self.head
        if self.loss_apart:
            tr, ws, hd = (0.0, 0.0, hd) if hd > tr + ws else (tr, ws, 0.0)
        return tr, ws, hd, t * self.gathered

    @property
    def activation_phase(self) -> int:
        return self.activations + self.swap_window + int(sum(self.step_parts()))

    @property
    def late(self) -> int:
        """The larger of the phases no strategy moves: the optimizer step and the backward's end."""
        return max(self.optimizer, self.backward_end)

    @property
    def phase(self) -> str:
        """Which phase makes the peak: ``activations`` (the first backward), ``backward_end`` (the
        gradients of a job without a gradient buffer: :func:`backward_end`) or ``optimizer``."""
        if self.late <= self.activation_phase:
            return "activations"
        return "backward_end" if self.backward_end > self.optimizer else "optimizer"

    @property
    def dynamic(self) -> int:
        return max(self.activation_phase, self.late)

    def scaled_dynamic(self, cal: Calibration) -> float:
        """``dynamic`` in units of ``cal.scale`` (the saved activations' scale): with a
        ``transient_scale`` the activation phase's per-step terms are weighed by it."""
        if (cal.transient_scale is None and cal.workspace_scale is None) or not cal.scale:
            return self.dynamic
        t = cal.scale if cal.transient_scale is None else cal.transient_scale
        w = t if cal.workspace_scale is None else cal.workspace_scale
        return max(self.activations + self.swap_window + sum(self.step_parts(t, w)) / cal.scale, self.late)

    def peak(self, cal: Calibration = NO_CALIBRATION) -> int:
        return cal.peak(self.static_total, self.scaled_dynamic(cal))

    def to_json(self, cal: Calibration = NO_CALIBRATION, measured: Optional[int] = None) -> Dict[str, Any]:
        s = cal.scale
        acts = self.activations + self.swap_window
        # components and breakdown add up to the peak: the parts of the phase that makes it (the
        # other phase's total is beside them)
        phase = self.phase
        late = phase != "activations"      # the optimizer step or the backward's end
        act_part = (lambda v: 0) if late else (lambda v: int(round(s * v)))
        t = s if cal.transient_scale is None else cal.transient_scale
        w = t if cal.workspace_scale is None else cal.workspace_scale
        parts = self.step_parts(t, w)
        other = sum(parts)
        step_part = (lambda v: 0) if late else (lambda v: int(round(v)))
        # the CPU pool holds no static part (static_scale 0): the residual carries it off
        res = cal.residual - (1 - cal.static_scale) * self.static_total
        return {"stage": self.stage, "layers": self.layers, "peak_bytes": self.peak(cal), "peak_phase": phase,
                "activation_phase_bytes": int(round(s * acts + other)),
                "optimizer_step_bytes": int(round(s * self.optimizer)),
                "backward_end_bytes": int(round(s * self.backward_end)),
                "components": {"static": int(round(self.static_total + res)),
                               "activations": act_part(acts),
                               "other": int(round(s * self.late)) if late else int(round(other))},
                "breakdown": {**self.static, "calibration_residual": int(round(res)),
                              "saved_activations": act_part(self.activations),
                              "swap_prefetch_window": act_part(self.swap_window),
                              "recompute_transient": step_part(parts[0]),
                              "backward_workspace": step_part(parts[1]),
                              "head_and_logits": step_part(parts[2]),
                              "gathered_weights": step_part(parts[3]),
                              "optimizer_step": int(round(s * self.optimizer)) if phase == "optimizer" else 0,
                              "backward_end_gradients": int(round(s * self.backward_end))
                              if phase == "backward_end" else 0},
                "measured_peak_bytes": measured}


def swap_window(chunk: Sequence[LayerCost]) -> int:
    """Bytes a swapped layer's backward brings back above the first backward's activations, for the
    layers of one chunk in forward order (one micro-batch: the one whose backward runs).

    MindSpore moves an offloaded tensor back ``backward_prefetch`` KERNELS before its first backward
    user (``plugin/ascend/graph_optimizer/pass/heterogeneous/insert_pre_fetch_depend.cc``,
    ``InsertPreFetchDepend::CalExecutionOrder``: the MoveTo to the device runs after the kernel
    ``prefetch`` positions before that user), and a layer's backward is tens of kernels (about 42 a
    layer and micro-batch on the Qwen3-32B cut's execution order), so a swapped layer's tensors are
    back only while that layer runs its backward, never a whole layer ahead. By then the layers after
    it have run theirs and freed what they kept for that micro-batch: at layer ``i`` the device holds
    ``host_i`` more and ``sum(kept_j, j > i)`` less than at the first backward. DryRun L1 on the 8k
    Qwen3-32B cut: layer 0 swapped under a kept layer 1 adds nothing (15627 MiB; the previous window,
    a whole layer at the first backward, was 1597 MiB too high there), the last layer swapped adds
    its own (docs/estimate.md "Swap under DryRun L1")."""
    worst, later = 0, 0
    for cost in reversed(chunk):
        if cost.host:
            worst = max(worst, cost.host - later)
        later += cost.kept
    return worst


def stage_memory(spec: ModelSpec, fam: TensorTable, geo: strategy.Geometry, stage: int,
                 costs: Sequence[LayerCost], prefetch: Sequence[Optional[int]] = (),
                 layer_fams: Optional[Sequence[TensorTable]] = None,
                 mtp: Sequence[Tuple[TensorTable, LayerCost]] = ()) -> StageMemory:
    """The parts of ``stage``'s peak for per-layer ``costs`` (indexed by global layer id).
    ``prefetch``: per layer, a prefetch distance in LAYERS (the r2.x PyNative trainer's
    ``default_prefetch``); the graph path passes none: its ``backward_prefetch`` counts kernels and
    a swapped layer comes back during its own backward (:func:`swap_window`).
    ``layer_fams``: each layer's tensor table when the family's layers differ by kind; ``mtp``: the
    MTP layers (on the last stage, one micro-batch in flight there) with their costs."""
    P, V = geo.pipeline_stage, geo.pp_interleave_num
    counts = inflight(P, V, spec.micro_batch_num, stage, spec.seq_split)
    layers: List[int] = []
    act = 0
    window = 0
    for v in range(V):
        start, n = geo.chunk_starts[v][stage], geo.layer_list[v][stage]
        chunk = list(range(start, start + n))
        layers += chunk
        act += counts[v] * sum(costs[i].kept for i in chunk) + sum(costs[i].once for i in chunk)
        if any(prefetch):
            # the r2.x PyNative trainer's swap (pynative/sizing.py): default_prefetch LAYERS come back at
            # a time, the largest swapped layers of the stage
            swapped = sorted(((costs[i].host, prefetch[i] if i < len(prefetch) else None) for i in chunk
                              if costs[i].host), reverse=True)
            if swapped:
                depth = max((p or 1) for _, p in swapped)
                window = max(window, sum(h for h, _ in swapped[:depth]))
        else:
            window = max(window, swap_window([costs[i] for i in chunk]))
    # the largest recompute transient on top of everything kept. Crediting it with what the layers
    # after it have freed by its backward looked right on paper and broke budgets on real MindSpore
    # (bench/plan.py: a plan predicted 44.2 MiB measured 48 MiB): the pool does not give that back
    transient = max((costs[i].regen for i in layers), default=0)
    fams = [layer_fams[i] if layer_fams else fam for i in layers]
    layer_params: Optional[int] = None
    workspace = max((f.workspace for f in fams), default=0)
    if layer_fams or mtp:
        layer_params = sum(params_per_layer(spec, f.params_rows, f.mla_rows) for f in fams)
        if stage == geo.pipeline_stage - 1:
            for mf, mc in mtp:
                layer_params += params_per_layer(spec, mf.params_rows, mf.mla_rows)
                act += counts[-1] * mc.kept
                transient = max(transient, mc.regen)
                workspace = max(workspace, mf.workspace)
    # mcore tables that split some weight rows otherwise than over dp under the optimizer shard
    # (TensorTable.params_div: DeepSeek-V3's experts, its sequence-parallel projections)
    mtp_fams = [mf for mf, _ in mtp] if stage == geo.pipeline_stage - 1 else []
    row_fams = fams + mtp_fams
    layer_local: Optional[int] = None
    sym = spec.symbols()
    if spec.mcore and spec.optimizer_shard and any(d != spec.shard for f in row_fams for d in f.params_div):
        layer_local = sum(product(r, sym) // d for f in row_fams for r, d in zip(f.params_rows, f.params_div))
        if layer_params is None:
            layer_params = sum(params_per_layer(spec, f.params_rows, f.mla_rows) for f in row_fams)
    static = static_parts(spec, fam, stage, len(layers), layer_params, layer_local)
    if spec.mcore and spec.optimizer_swap:
        emb = sym["v"] * spec.hidden // spec.shard
        sizes = ([emb] if stage == 0 else []) + \
            [product(r, sym) // d for f in row_fams for r, d in zip(f.params_rows, f.params_div)] + \
            ([emb] if stage == spec.pp - 1 and not (spec.tie_embeddings and spec.pp == 1) else [])
        optimizer = swap_optimizer_step(spec, sizes, static["grads"])
    else:
        optimizer = optimizer_step(spec, fam, stage, len(layers), layer_params)
    # SeqPipe: the last stage holds every sequence chunk of its micro-batch through the loss (head_bytes)
    head = head_bytes(spec, stage, counts[-1] if spec.seq_split > 1 else 1)
    return StageMemory(stage=stage, layers=layers, static=static,
                       activations=act, swap_window=window, transient=transient,
                       workspace=workspace if layers else 0, head=head,
                       optimizer=optimizer, loss_apart=spec.loss_apart,
                       backward_end=backward_end(spec, fam, stage, len(layers), layer_params),
                       gathered=gathered_weights(spec, fam, len(layers), layer_params, stage))


@dataclass
class Estimate:
    """``swapwatch estimate``'s answer: per stage the predicted peak and its parts, per layer the
    choice and what it keeps (DESIGN §3.3a)."""

    config: str
    family: str
    spec: ModelSpec
    plan: strategy.Plan
    fam: TensorTable
    stages: List[StageMemory]
    layers: List[Dict[str, Any]]
    calibration: Calibration = field(default_factory=Calibration)
    measured: Dict[int, int] = field(default_factory=dict)
    budget_bytes: Optional[int] = None
    #: memory-relevant keys the model leaves out (swapwatch.memory.keys): the figure is then a bound
    unmodelled: List[str] = field(default_factory=list)
    #: stage -> ``swapwatch.memory.dryrun.StagePeak`` (``estimate --dryrun``)
    dryrun: Dict[int, Any] = field(default_factory=dict)
    #: what no check covers on the sizer's path (the text header's ``<unchecked_where>, unchecked:`` line),
    #: and whether ``--calibrate`` can fit it: the sizer of each code path says (``codepaths``)
    unchecked: List[str] = field(default_factory=list)
    unchecked_where: str = ""
    calibrates: bool = True
    #: stage -> ``swap_cost.StageSwaps``: what each swap costs (a stage without a swap is absent), and
    #: the ``swap_cost.Link`` it was priced with
    swaps: Dict[int, Any] = field(default_factory=dict)
    link: Optional[Any] = None

    def to_json(self) -> Dict[str, Any]:
        cal = self.calibration
        out = {"config": self.config, "family": self.family, "budget_bytes": self.budget_bytes,
               "stages": [st.to_json(cal, self.measured.get(st.stage)) for st in self.stages],
               "not_in_peak": not_in_dryrun(self.spec),
               "layers": [{**row, "activation_bytes": int(round(cal.scale * row["activation_bytes"]))}
                          for row in self.layers],
               "unmodelled": list(self.unmodelled)}
        if cal.fitted:
            out["calibration"] = cal.to_json()
        if self.dryrun:
            out["dryrun"] = self.dryrun_json()
        if self.swaps:
            out["swap"] = self.swap_json()
        return out

    def host_bytes(self, stage: int) -> int:
        """Bytes one rank of ``stage`` holds on host at its first backward: every micro-batch in
        flight keeps its swapped activations there (``inflight``)."""
        geo = self.plan.geometry
        counts = inflight(geo.pipeline_stage, geo.pp_interleave_num, self.spec.micro_batch_num, stage,
                          self.spec.seq_split)
        host = {row["layer"]: row["host_bytes"] for row in self.layers if not row.get("mtp")}
        total = 0
        for v in range(geo.pp_interleave_num):
            start = geo.chunk_starts[v][stage]
            total += counts[v] * sum(host.get(i, 0) for i in range(start, start + geo.layer_list[v][stage]))
        return total

    def swap_json(self) -> Dict[str, Any]:
        """Each swap's bytes, copy times, compute windows and exposed time per micro-batch, per stage,
        with the host memory it takes (DESIGN §3.3a ``swap``; swap_cost.py)."""
        link = self.link
        per_rank = {st: self.host_bytes(st) for st in self.swaps}
        ranks = link.ranks_per_node if link is not None else 1
        node = max(per_rank.values(), default=0) * ranks
        stages = []
        for st, sw in sorted(self.swaps.items()):
            stages.append({"stage": st, "exposed_seconds_per_micro_batch": round(sw.exposed_seconds, 9),
                           "exposed_seconds_per_step": round(sw.exposed_seconds * self.spec.micro_batch_num, 9),
                           "forward_seconds": round(sw.forward_seconds, 9),
                           "backward_seconds": round(sw.backward_seconds, 9),
                           "window_bytes": self.stages[st].swap_window, "host_bytes_per_rank": per_rank[st],
                           "swaps": [c.to_json() for c in sw.costs]})
        host_mem = link.host_memory if link is not None else None
        return {"link": link.to_json() if link is not None else None, "host_bytes_per_node": node,
                "host_fits": None if host_mem is None else node <= host_mem,
                "hides": all(c.hides for sw in self.swaps.values() for c in sw.costs), "stages": stages}

    def dryrun_json(self) -> Dict[str, Any]:
        """DryRun L1's peaks beside the model's (``estimate --dryrun``, docs/estimate.md)."""
        peaks = {st.stage: st.peak(self.calibration) for st in self.stages}
        rows = []
        for stage, p in sorted(self.dryrun.items()):
            model = peaks[stage]
            rows.append({"stage": stage, "rank_id": p.rank_id, "model_peak_bytes": model,
                         "used_peak_bytes": p.used_bytes, "actual_peak_bytes": p.actual_bytes,
                         "error": round((model - p.used_bytes) / p.used_bytes, 4) if p.used_bytes else None,
                         "seconds": p.seconds, "log": p.log_path})
        return {"level": "DryRun L1", "stages": rows}


def estimate_plan(path: str, cfg: Any, plan: strategy.Plan, spec: ModelSpec,
                  calibration: Calibration = NO_CALIBRATION, link: Optional[Any] = None) -> Estimate:
    """Predict the peaks of an already resolved plan (``plan`` reuses it for its own output), on the
    tensor table of the plan's model family (the one ``explain`` names); its swaps priced with
    ``link`` (a ``swap_cost.Link``; default the documented device's, said as assumed)."""
    fam = memory_family(spec, plan)
    kind_fams, mtp_fams = layer_families(spec, plan, fam)
    costs: List[LayerCost] = []
    layer_fams: List[TensorTable] = []
    rows = []
    for lp, lf in zip(plan.layers, kind_fams):
        label, cost = lf.layer_choice(lp)
        costs.append(cost)
        layer_fams.append(lf)
        rows.append({"layer": lp.layer, "stage": lp.stage, "choice": label, "activation_bytes": cost.kept,
                     "host_bytes": cost.host, "recompute_flops": cost.flops})
    mtp = []
    for lp, mf in zip(plan.mtp, mtp_fams):
        label, cost = mf.layer_choice(lp)
        label = "mtp:" + label
        mtp.append((mf, cost))
        rows.append({"layer": lp.layer, "stage": lp.stage, "choice": label, "activation_bytes": cost.kept,
                     "host_bytes": cost.host, "recompute_flops": cost.flops, "mtp": True})
    geo = plan.geometry
    mixed = layer_fams if any(f is not fam for f in layer_fams) else None
    # swap: what each swap costs in time on MindSpore's schedule, where backward_prefetch counts kernels
    # (swap_cost.py, docs/mindspore-facts.md §7); its memory is swap_window's
    swaps: Dict[int, Any] = {}
    if any(r["host_bytes"] for r in rows):
        link = link if link is not None else make_link()
        swaps = plan_swaps(plan.layers, layer_fams, geo, link)
    stages = [stage_memory(spec, fam, geo, p, costs, (), mixed, mtp) for p in range(geo.pipeline_stage)]
    return Estimate(config=path, family=fam.name, spec=spec, plan=plan, fam=fam, stages=stages, layers=rows,
                    calibration=calibration, unmodelled=list(spec.unmodelled), swaps=swaps,
                    link=link if swaps else None)


def layer_families(spec: ModelSpec, plan: strategy.Plan,
                   fam: TensorTable) -> Tuple[List[TensorTable], List[TensorTable]]:
    """The tensor table of each decoder layer's kind (``plan.layers`` order) and of each MTP layer
    (DeepSeek-V3: dense below first_k_dense_replace, MoE above, the MTP layer; one object per kind,
    ``fam`` for the family's own kind). ``estimate`` sizes layers with them and ``plan`` searches
    with them (memory.search.Kinds)."""
    by_key: Dict[str, TensorTable] = {}

    def fam_of(layer: int, mtp: bool = False) -> TensorTable:
        key = plan.layout_key(layer, mtp) if plan.family is not None else None
        kind = key.partition(":")[2] if key and ":" in key else None
        if key is None or kind is None or kind == (fam.kind or layout_kinds(fam.name)[0]):
            return fam
        if key not in by_key:
            by_key[key] = TensorTable(spec, fam.name, plan.fam.origin, kind)
        return by_key[key]

    return [fam_of(lp.layer) for lp in plan.layers], [fam_of(lp.layer, True) for lp in plan.mtp]


def memory_family(spec: ModelSpec, plan: strategy.Plan) -> TensorTable:
    """The tensor table for ``plan``'s model family (``swapwatch.model.families``: what the YAML names, or
    ``--model``), sized by ``spec``; exit 2 when that family has none yet, never another family's."""
    check_family(plan)
    return TensorTable(spec, plan.fam.name, plan.fam.origin)


def planning_family(spec: ModelSpec, plan: strategy.Plan) -> TensorTable:
    """The tensor table ``plan`` takes its levels (select sets) from: the family's, or when its layers
    differ by kind (dense / MoE / MTP) the kind that keeps most without recompute; each layer is then
    priced on its own kind (memory.search.Kinds)."""
    fam = memory_family(spec, plan)
    kinds = [k for k in layout_kinds(fam.name) if k != "mtp"]
    if len(kinds) < 2:
        return fam
    fams = [fam] + [TensorTable(spec, fam.name, plan.fam.origin, k) for k in kinds if k != (fam.kind or kinds[0])]
    return max(fams, key=lambda f: (f.cost(frozenset()).kept, params_per_layer(spec, f.params_rows, f.mla_rows)))


def check_family(plan: strategy.Plan) -> None:
    """Exit 2 unless the plan's model family has a tensor table (before the sizes are read: a
    family without one should say so, not ask for a size key the table would not use)."""
    mf = plan.fam
    if not mf.known:
        raise NotModelled(f"model family {mf.name!r} ({mf.origin})",
                          "no memory model for it; --model names a known family: `swapwatch families`")
    table_for(mf.name, mf.origin)


def plan_of(path: str, model: Optional[str] = None, text: Optional[str] = None) -> Tuple[Any, strategy.Plan, ModelSpec]:
    """Config, plan and sizes of the YAML at ``path``, the family detected as ``explain`` does
    (``text``: that YAML as text, e.g. plan's written copy, read with no temporary file)."""
    if model is not None:
        from ..model.families import from_name

        from_name(model)                  # an unknown --model is bad input before anything else
    cfg = load_config(path, text=text)
    plan = strategy.plan(cfg, model=model)
    check_family(plan)
    spec = spec_from_config(cfg)
    return cfg, plan, spec


def estimate(path: str, model: Optional[str] = None, calibration: Calibration = NO_CALIBRATION,
             text: Optional[str] = None, link: Optional[Any] = None) -> Estimate:
    """Predicted peak per stage of the strategy the YAML at ``path`` asks for (``model``: the
    ``--model`` family, default the one the YAML names; ``text``: see :func:`plan_of`; ``link``: what
    its swaps are priced with, see :func:`estimate_plan`)."""
    cfg, plan, spec = plan_of(path, model, text)
    return estimate_plan(path, cfg, plan, spec, calibration, link)
