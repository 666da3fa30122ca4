"""Model and parallel sizes of a training job: everything the memory model multiplies.

Why a module of its own: ``swapwatch.config`` reads what the *strategy* needs (layer count,
stages, the two strategy sections); the memory model needs the sizes beside them (hidden, heads,
ffn, sequence, vocabulary, dtypes, MoE and MLA sizes, the parallel degrees, the micro-batch). They
are read here from the SAME merged config object explain reads (:attr:`TrainingConfig.tree`, with
``pretrained_model_dir/config.json`` merged under ``model_config`` as MindFormers does), never from
the file a second time, with the same one-line errors (file:line, key path), and turned into the
per-rank symbols of the family's tensor table (``swapwatch/memory/llama.yaml``).

Where keys have several names in MindFormers YAMLs (legacy ``model_config`` vs mcore / Hugging Face
names) the first one present wins, in the order listed in :data:`ALIASES`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Dict, FrozenSet, List, Optional, Tuple

from ..config import INT64_MAX, TrainingConfig, load_config, nearest
from ..errors import ConfigError
from ..model.families import interleaved_layer

MC = "model.model_config"
POC = "parallel.parallel_optimizer_config"
#: our name -> the model_config keys MindFormers YAMLs use for it, first present wins
ALIASES: Dict[str, Tuple[str, ...]] = {
    "hidden_size": ("hidden_size",),
    "num_heads": ("num_heads", "num_attention_heads"),
    "n_kv_heads": ("n_kv_heads", "num_key_value_heads", "num_query_groups", "multi_query_group_num"),
    "intermediate_size": ("intermediate_size", "ffn_hidden_size"),
    "seq_length": ("seq_length", "max_position_embeddings"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
    "num_layers": ("num_layers", "num_hidden_layers"),
    "num_experts": ("num_experts", "n_routed_experts"),
    "top_k": ("num_experts_per_tok", "moe_router_topk"),
    "moe_intermediate_size": ("moe_intermediate_size", "moe_ffn_hidden_size"),
    "head_dim": ("head_dim", "kv_channels"),
}
#: model_config defaults of the mcore config classes a maintainer YAML leans on (it leaves the
#: sizes out): ``models/deepseek3/configuration_deepseek_v3.py:DeepseekV3Config.__init__``
MODEL_DEFAULTS: Dict[str, Dict[str, Any]] = {
    "deepseek_v3": {"vocab_size": 129280, "hidden_size": 7168, "intermediate_size": 18432,
                    "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 128,
                    "num_key_value_heads": 128, "n_shared_experts": 1, "n_routed_experts": 256,
                    "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "v_head_dim": 128,
                    "qk_nope_head_dim": 128, "num_experts_per_tok": 8, "max_position_embeddings": 4096},
}
#: ``register_mf_model_parameter(seq_length=4096)`` of every mcore config class in MindFormers 2.1.0
MCORE_SEQ_LENGTH = 4096
#: ``model_config.pet_config.pet_type`` values that freeze the base weights
#: (``models/build_model.py:build_network`` -> ``get_pet_model``: LoRA and its variants)
LORA_TYPES = frozenset({"lora", "slora", "ptuning2", "prefix_tuning"})
#: bytes per element of the dtype names MindFormers YAMLs use
DTYPE_BYTES = {"float32": 4, "fp32": 4, "float16": 2, "fp16": 2, "bfloat16": 2, "bf16": 2}
#: optimizer states per parameter (each in the parameter's dtype), by ``optimizer.type``
OPTIMIZER_STATES = {"adamw": 2, "adam": 2, "fusedadamw": 2, "adamweightdecay": 2, "lamb": 2,
                    "came": 2, "momentum": 1, "sgd": 0}
#: optimizers whose states are fp32 whatever the parameters' dtype: MindFormers' AdamW (and PmaAdamW,
#: its subclass) clones them ``initializer(init, shape=old_param.shape, dtype=mstype.float32)``
#: (``core/optim/adamw.py:AdamW.clone_state``), and the FP32StateAdamWeightDecay of older MindFormers
#: YAMLs says so in its name (2.1.0 has no such class; its AdamW does the same); others clone the
#: parameter (its dtype)
FP32_STATE_OPTIMIZERS = {"adamw", "pmaadamw", "fp32stateadamweightdecay"}


@dataclass
class ModelSpec:
    """Sizes of one training job, per the YAML (defaults are MindFormers' LlamaConfig's)."""

    source: Optional[str]
    num_layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    seq: int
    vocab: int
    head_dim: int
    batch: int = 1                      # runner_config.batch_size: the micro-batch per rank
    compute_bytes: int = 2
    softmax_bytes: int = 4
    norm_bytes: int = 4                 # layernorm_compute_type: the norms' fp32 copy of their input
    residual_bytes: int = 2             # mcore fp32_residual_connection: 4, else the compute dtype
    param_bytes: int = 4
    optimizer: str = "adamw"
    optimizer_states: int = 2
    state_bytes: int = 4                # bytes per optimizer-state element (FP32_STATE_OPTIMIZERS: 4)
    #: the input embedding is split by the optimizer shard like the other weights; not on the legacy
    #: path's LlamaForCausalLM unless model_config.parallel_optimizer (models/llama/llama.py:
    #: LlamaEmbedding(..., parallel_optimizer=config.parallel_optimizer), LlamaConfig's default False)
    embedding_shard: bool = True
    flash: bool = False
    num_experts: int = 0
    top_k: int = 1
    moe_ffn: int = 0
    tie_embeddings: bool = False
    # MLA (DeepSeek): recorded and counted in the weights; the layer tensors stay the Llama ones
    mla: Dict[str, int] = field(default_factory=dict)
    #: MoE's shared experts (DeepSeek-V3 ``n_shared_experts``, default 1 in DeepseekV3Config) and
    #: the dense layers' FFN width beside the experts' (``intermediate_size``)
    shared_experts: int = 0
    dense_ffn: int = 0
    dp: int = 1
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    micro_batch_num: int = 1
    seq_parallel: bool = False
    #: parallel_config.vocab_emb_dp (TransformerOpParallelConfig's default True): on the legacy path a
    #: data-parallel replica's ranks share a communicator of their own (model.communicators)
    vocab_emb_dp: bool = True
    optimizer_shard: bool = False
    optimizer_shard_size: int = 0       # 0: all data-parallel ranks
    #: parallel_optimizer_config.parallel_optimizer_threshold (KB): a parameter whose slice on the rank
    #: is smaller stays whole (MindSpore: "Parallel optimizer: the size of ... is smaller than the
    #: threshold"; its default and MindFormers' 64)
    shard_threshold_kb: int = 64
    mcore: bool = False                 # use_legacy: False (parallel_core/training_graph)
    #: the last stage's loss and the layers' recomputed backward are apart in time, so the activation
    #: phase holds the larger of the two, not their sum (model.StageMemory.step_parts). DryRun L1's
    #: tracker shows it on the legacy path at ``jit_level: O1`` (the Qwen2.5 cut's last stage:
    #: docs/estimate.md "The legacy last stage"), at O0 (the GLM3-6B r1.5.0 YAML: "A single stage's
    #: gradients") and on mcore (the Qwen3-32B and Qwen3-MoE cuts: "The mcore last stage"); a legacy
    #: config at O2 (GE), which nobody measured, keeps the sum
    loss_apart: bool = False
    #: ``context.jit_config.jit_level``; absent, MindSpore 2.x graph mode's O0 (kernel by kernel, no
    #: graph-kernel fusion: the GLM3-6B r1.5.0 YAML sets none and its DryRun L1 blocks have no
    #: ``GraphKernel_`` kernel). O1 fuses the loss' and the optimizer's element-wise kernels
    jit_level: str = "O0"
    #: ``runner_config.gradient_accumulation_steps`` (1: none)
    grad_accumulation: int = 1
    #: the legacy Llama layer's fine-grain interleave: each layer runs its linears on this many
    #: sequence parts (models/llama/llama_interleave.py:LLamaDecodeLayerInterleave, built by
    #: models/llama/llama.py:LlamaModel when models/utils.py:check_fine_grain_interleave_valid holds:
    #: fine_grain_interleave > 1 and model_parallel > 1); 1: the plain layer (and on every other path)
    fine_grain: int = 1
    #: SeqPipe (legacy ``parallel_config.seq_split_num`` with MindSpore's ``seqpipe`` scheduler, where
    #: :mod:`swapwatch.memory.keys` classifies it modelled; else 1): each micro-batch runs as this many
    #: sequence chunks (``modules/seq_pipe.py:SequenceSplit``), the pipeline's unit of work
    #: (:func:`swapwatch.memory.model.inflight`); the layer tensors are one chunk's (``s`` in
    #: :meth:`symbols`) and the attention reads the key / value of the whole sequence (``skv``)
    seq_split: int = 1
    #: optimizer.swap: AdamW's states live on host (core/optim/adamw.py:AdamW.clone_state, device='CPU')
    optimizer_swap: bool = False
    #: the job's collectives go through HCCL (``context.device_target`` Ascend, MindFormers' default):
    #: a CPU / GPU job (the example model's runs) has no HCCL buffers (model.not_in_dryrun)
    hccl: bool = True
    #: dotted key -> line, for messages
    lines: Dict[str, int] = field(default_factory=dict)
    #: LoRA / ``pet_config``: the base weights are frozen (no gradients, no optimizer states)
    frozen_base: bool = False
    #: memory-relevant key paths the model leaves out (:mod:`swapwatch.memory.keys`)
    unmodelled: List[str] = field(default_factory=list)

    @property
    def grad_buffer(self) -> bool:
        """Whether the whole gradients live in a buffer through the step (the static part), or only
        from the backward that makes them to the backward's end (:func:`swapwatch.memory.model.
        backward_end`). A buffer: every pipeline stage (``accu_grads``, MindFormers'
        ``MFPipelineWithLossScaleCell``), gradient accumulation, and the mcore path (measured only with
        pipeline stages, or with the optimizer states on host: ``model.swap_optimizer_step``). None:
        a single-stage legacy job without accumulation, whose ``MFTrainOneStepCell`` hands each
        gradient to its reduction as the backward makes it (DryRun L1's tracker on the Qwen1.5-7B and
        GLM3-6B r1.5.0 YAMLs: no gradient block before the backward, docs/estimate.md "A single
        stage's gradients"). Off Ascend (``hccl`` False: the example model's CPU runs, whose pool
        peak holds no static part, ``Calibration.static_scale`` 0) the gradients stay in the static
        part the CPU records were fitted with: the phase was measured under DryRun L1 only."""
        return self.mcore or self.pp > 1 or self.grad_accumulation > 1 or not self.hccl

    def symbols(self) -> Dict[str, int]:
        """Per-rank sizes of the family's tensor table (see ``swapwatch/memory/llama.yaml``)."""
        tp, cp = self.tp, self.cp
        # SeqPipe: the layers run on one chunk of seq_split at a time (models/llama/llama.py:
        # LlamaModel.construct gets the chunk from SequenceSplit); skv, the whole sequence the
        # chunk's attention reads from the key / value caches (llama_transformer.py:LLamaAttention)
        skv = max(1, self.seq // cp)
        s = max(1, skv // self.seq_split)
        moe = self.num_experts > 0
        ffn = self.moe_ffn if moe and self.moe_ffn else self.ffn
        local_experts = max(1, self.num_experts // self.ep) if moe else 1
        sq = max(1, s // tp) if self.seq_parallel else s
        # sg: what an all-gather over tp adds to a sequence-parallel tensor (0 without it)
        return {"b": self.batch, "s": s, "sq": sq, "sg": s - sq, "skv": skv, "sc": skv - s,
                "h": self.hidden, "hq": self.heads * self.head_dim // tp,
                "hkv": max(1, self.kv_heads * self.head_dim // tp), "at": max(1, self.heads // tp),
                "d": self.head_dim, "ft": max(1, ffn // tp), "k": self.top_k if moe else 1,
                "fw": max(1, ffn // tp) * local_experts, "v": max(1, self.vocab // tp),
                "hqkv": (self.heads + 2 * self.kv_heads) * self.head_dim // tp,
                "akv": max(1, self.kv_heads // tp), **self.moe_mla_symbols()}

    def moe_mla_symbols(self) -> Dict[str, int]:
        """The MoE and MLA sizes of ``swapwatch/memory/qwen3_moe.yaml`` / ``deepseek_v3.yaml``.

        MoE (``parallel_core/training_graph/transformer/moe/moe_layer.py:MoELayer.construct``): the
        layer folds tensor parallel into the token split (``local_reshape_permute`` to ``dp_cp``), so
        a rank routes ``sm = s / tp`` tokens per micro-batch row; after the dispatch all-to-all it
        holds ``sm * k`` of them for its ``el = E / ep`` experts (the even load DryRun assumes:
        ``token_dispatcher.py:MoEAlltoAllTokenDispatcher.preprocess_with_dryrun``). Expert weights
        are split by expert parallel only (``fm``: an expert's FFN width, whole).
        MLA (``multi_latent_attention.py``): ``ql`` / ``kvl`` the low ranks, ``dn`` / ``dr`` / ``dv``
        the nope / rope / value head dims; ``hqk = at (dn + dr)`` and ``hv = at dv`` per rank."""
        tp = self.tp
        at = max(1, self.heads // tp)
        s = max(1, self.seq // self.cp)
        e = max(1, self.num_experts)
        fm = self.moe_ffn or self.ffn
        ml = self.mla
        dn = ml.get("qk_nope_head_dim", self.head_dim)
        dr = ml.get("qk_rope_head_dim", 0)
        dv = ml.get("v_head_dim", self.head_dim)
        return {"e": e, "el": max(1, e // self.ep), "fm": fm, "sm": max(1, s // tp),
                "fd": max(1, (self.dense_ffn or self.ffn) // tp),
                "fs": max(1, self.shared_experts * fm // tp),
                "ql": ml.get("q_lora_rank", 0) or 1, "kvl": ml.get("kv_lora_rank", 0) or 1,
                "dn": dn, "dr": max(1, dr), "dv": dv, "dqk": dn + dr,
                "hqk": at * (dn + dr), "hv": at * dv, "hkr": at * dr or 1}

    @property
    def shard(self) -> int:
        """Ranks the optimizer parallel splits weights and optimizer states over (1 when off)."""
        if not self.optimizer_shard:
            return 1
        size = self.optimizer_shard_size if self.optimizer_shard_size > 0 else self.dp
        return max(1, min(size, self.dp))


def load_spec(path: str) -> ModelSpec:
    """The sizes of the YAML at ``path``, read through :func:`swapwatch.config.load_config` (the one
    reader); ConfigError (exit 2) names file, line and key."""
    return spec_from_config(load_config(path, check_rules=False))


def spec_from_config(cfg: TrainingConfig) -> ModelSpec:
    """The sizes of the merged config explain reads (issue 23: memory takes the same object). A key
    that came from ``pretrained_model_dir/config.json`` is reported at that file. Every other key is
    classified (:func:`swapwatch.memory.keys.check`): an auto-parallel YAML is refused (exit 2), the
    memory-relevant keys the model leaves out are recorded in ``unmodelled``."""
    from .keys import MODELLED, SEQ_SPLIT_KEY, check

    report = check(cfg.tree, cfg.source, cfg.lines)
    spec = spec_from_tree(cfg.tree, cfg.lines, cfg.source, hf_source=cfg.hf_source, hf_keys=cfg.hf_keys)
    # the pipeline geometry is the config's, as explain and the plan read it (the stage count wherever the
    # YAML puts it, validated once), never a second reading of the tree
    spec.pp = cfg.pipeline_stage
    spec.unmodelled = report.unmodelled
    if SEQ_SPLIT_KEY not in report.by_kind.get(MODELLED, []):
        # SeqPipe only where the model sizes it (memory.keys: the legacy Llama layer under the seqpipe
        # scheduler with stages); elsewhere the key is unmodelled and the figure the bound without it
        spec.seq_split = 1
    pet = cfg.tree.get("model", {}).get("model_config", {}).get("pet_config") if isinstance(
        cfg.tree.get("model"), dict) else None
    pet = pet if isinstance(pet, dict) else cfg.tree.get("pet_config")
    spec.frozen_base = isinstance(pet, dict) and str(pet.get("pet_type", "")).lower() in LORA_TYPES
    return spec



def spec_from_tree(data: Dict[str, Any], lines: Dict[str, int], source: Optional[str],
                   hf_source: Optional[str] = None, hf_keys: FrozenSet[str] = frozenset()) -> ModelSpec:
    def err(key: str, message: str) -> ConfigError:
        if hf_source and key.startswith(MC + ".") and key[len(MC) + 1:] in hf_keys:
            return ConfigError(message, file=hf_source, key=key[len(MC) + 1:])
        return ConfigError(message, file=source, line=nearest(lines, key), key=key)

    def section(tree: Any, name: str, prefix: str) -> Dict[str, Any]:
        value = tree.get(name) if isinstance(tree, dict) else None
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise err(prefix + name, f"expected a mapping, got {value!r}")
        return value

    model = section(data, "model", "")
    mc = section(model, "model_config", "model.")
    if isinstance(mc.get("model_type"), str) and mc["model_type"] in MODEL_DEFAULTS:
        mc = {**MODEL_DEFAULTS[mc["model_type"]], **mc}
    pc = section(data, "parallel_config", "")
    par = section(data, "parallel", "")
    runner = section(data, "runner_config", "")
    opt = section(data, "optimizer", "")

    def get(name: str, default: Any = None, required: bool = False) -> Tuple[Any, str]:
        for key in ALIASES.get(name, (name,)):
            if mc.get(key) is not None:
                return mc[key], f"{MC}.{key}"
        if required:
            raise err(f"{MC}.{ALIASES.get(name, (name,))[0]}",
                      "needed to estimate memory: set it in the YAML (the model's size)")
        return default, f"{MC}.{ALIASES.get(name, (name,))[0]}"

    def pos(value: Any, key: str, minimum: int = 1) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            kind = "a positive" if minimum == 1 else "a non-negative"
            raise err(key, f"expected {kind} integer, got {value!r}")
        if value > INT64_MAX:        # MindSpore keeps shapes in int64; a float of it would overflow
            raise err(key, f"{str(value)[:20]}... ({len(str(value))} digits) is too large: MindSpore keeps "
                           "shapes in int64 (at most 2**63-1)")
        return value

    def flag(tree: Dict[str, Any], key: str, full: str, default: bool = False) -> bool:
        value = tree.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise err(full, f"expected True or False, got {value!r}")
        return value

    #: mcore (use_legacy: False) models take TransformerConfig's defaults and key names
    #: (parallel_core/transformer_config.py: compute_dtype bfloat16, params_dtype float32,
    #: use_flash_attention True), legacy ones LlamaConfig's
    mcore = data.get("use_legacy") is False

    def dtype(keys: Tuple[str, ...], legacy_default: str, mcore_default: str) -> int:
        key = next((k for k in keys if mc.get(k) is not None), keys[0])
        value = mc.get(key, mcore_default if mcore else legacy_default)
        if not isinstance(value, str) or value.lower() not in DTYPE_BYTES:
            raise err(f"{MC}.{key}", f"unknown dtype {value!r} (known: float32, float16, bfloat16)")
        return DTYPE_BYTES[value.lower()]

    keys = {name: get(name)[1] for name in ("hidden_size", "num_heads", "intermediate_size", "seq_length",
                                            "vocab_size", "num_layers", "num_experts")}
    hidden = pos(*get("hidden_size", required=True))
    heads = pos(*get("num_heads", required=True))
    kv_raw, kv_key = get("n_kv_heads")
    kv = heads if kv_raw is None else pos(kv_raw, kv_key)
    hd_raw, hd_key = get("head_dim")
    head_dim = pos(hd_raw, hd_key) if hd_raw is not None else hidden // heads
    if hd_raw is None and hidden % heads:
        raise err(f"{MC}.num_heads", f"hidden_size {hidden} is not a multiple of num_heads {heads}")
    ffn_raw, ffn_key = get("intermediate_size")
    if ffn_raw is None:
        ffn = llama_ffn(hidden, mc.get("multiple_of", 256), mc.get("ffn_dim_multiplier"))
    else:
        ffn = pos(ffn_raw, ffn_key)
    # mcore configs register seq_length=4096 as the model parameter default
    # (models/qwen3_moe/configuration_qwen3_moe.py, qwen3, deepseek3: register_mf_model_parameter);
    # max_position_embeddings is the rope table's length, not the training sequence
    seq = MCORE_SEQ_LENGTH if mcore and mc.get("seq_length") is None else pos(*get("seq_length", required=True))
    vocab = pos(*get("vocab_size", required=True))
    layers = pos(*get("num_layers", required=True))

    moe_cfg = section(model, "moe_config", "model.") or section(data, "moe_config", "")
    experts_raw, experts_key = get("num_experts")
    if experts_raw is None and moe_cfg.get("expert_num") is not None:
        experts_raw, experts_key = moe_cfg["expert_num"], "moe_config.expert_num"
    experts = pos(experts_raw, experts_key, 0) if experts_raw is not None else 0
    topk_raw, topk_key = get("top_k")
    if topk_raw is None and moe_cfg.get("num_experts_chosen") is not None:
        topk_raw, topk_key = moe_cfg["num_experts_chosen"], "moe_config.num_experts_chosen"
    top_k = pos(topk_raw, topk_key) if topk_raw is not None else 1
    moe_ffn_raw, moe_ffn_key = get("moe_intermediate_size")
    moe_ffn = pos(moe_ffn_raw, moe_ffn_key) if moe_ffn_raw is not None else 0
    mla = {k: pos(mc[k], f"{MC}.{k}") for k in ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim",
                                                 "qk_nope_head_dim", "v_head_dim")
           if mc.get(k) is not None}

    opt_type = opt.get("type", "AdamW")
    if not isinstance(opt_type, str):
        raise err("optimizer.type", f"expected an optimizer class name, got {opt_type!r}")
    states = OPTIMIZER_STATES.get(opt_type.lower().replace("_", ""), 2)

    batch = pos(runner.get("batch_size", 1), "runner_config.batch_size")
    # micro-batch interleave (legacy; MindFormers rejects it on mcore: memory.keys): each micro-batch
    # holds micro_batch_interleave_num x batch_size rows (trainer/base_trainer.py: global_batch_size),
    # run as that many interleaved parts whose activations are all kept for the backward
    # (mindspore.nn.MicroBatchInterleaved, wrapped by _wrap_network_with_tool_cells_legacy)
    mbi_raw = data.get("micro_batch_interleave_num")
    if mbi_raw is not None and not mcore:
        batch *= pos(mbi_raw, "micro_batch_interleave_num")
    dp = pos(pc.get("data_parallel", 1), "parallel_config.data_parallel")
    tp = pos(pc.get("model_parallel", 1), "parallel_config.model_parallel")
    pp = pos(pc.get("pipeline_stage", 1), "parallel_config.pipeline_stage")
    cp = pos(pc.get("context_parallel", 1), "parallel_config.context_parallel")
    ep = pos(pc.get("expert_parallel", 1), "parallel_config.expert_parallel")
    mbn = pos(pc.get("micro_batch_num", 1), "parallel_config.micro_batch_num")
    sp = flag(pc, "use_seq_parallel", "parallel_config.use_seq_parallel")
    vocab_emb_dp = flag(pc, "vocab_emb_dp", "parallel_config.vocab_emb_dp", default=True)
    # kept only where memory.keys classifies the key modelled (spec_from_config)
    seq_split = pos(pc.get("seq_split_num", 1), "parallel_config.seq_split_num")
    shard = flag(pc, "optimizer_shard", "parallel_config.optimizer_shard") or \
        flag(par, "enable_parallel_optimizer", "parallel.enable_parallel_optimizer")
    poc = section(par, "parallel_optimizer_config", "parallel.")
    shard_size = poc.get("optimizer_weight_shard_size", 0)
    if isinstance(shard_size, bool) or not isinstance(shard_size, int):
        raise err("parallel.parallel_optimizer_config.optimizer_weight_shard_size",
                  f"expected an integer, got {shard_size!r}")
    threshold = pos(poc.get("parallel_optimizer_threshold", 64),
                    f"{POC}.parallel_optimizer_threshold", 0)
    sh_raw = mc.get("n_shared_experts", mc.get("shared_expert_num"))
    shared = pos(sh_raw, f"{MC}.n_shared_experts", 0) if sh_raw is not None else \
        (1 if mc.get("model_type") == "deepseek_v3" else 0)
    if heads % tp:
        raise err("parallel_config.model_parallel", f"num_heads {heads} is not a multiple of model_parallel {tp}")

    fgi_raw = mc.get("fine_grain_interleave")
    fgi = pos(fgi_raw, f"{MC}.fine_grain_interleave", 0) if fgi_raw is not None else 1
    fine_grain = interleaved_layer(fgi, tp, mcore, (model.get("arch") or {}).get("type"))
    compute = dtype(("compute_dtype",), "float16", "bfloat16")
    param_bytes = dtype(("param_init_type", "params_dtype"), "float16", "float32")
    state_bytes = 4 if opt_type.lower().replace("_", "") in FP32_STATE_OPTIMIZERS else param_bytes
    jit_level = str(section(section(data, "context", ""), "jit_config", "context.").get("jit_level") or "O0").upper()
    hccl = str(section(data, "context", "").get("device_target", "Ascend")).lower() == "ascend"
    _fits_int64(dict(hidden_size=hidden, num_heads=heads, intermediate_size=max(ffn, moe_ffn), seq_length=seq,
                     vocab_size=vocab, num_layers=layers, num_experts=max(1, experts),
                     **{"runner_config.batch_size": batch}),
                {**keys, "runner_config.batch_size": "runner_config.batch_size"}, err)
    return ModelSpec(
        source=source, num_layers=layers, hidden=hidden, heads=heads, kv_heads=kv, ffn=ffn, seq=seq,
        vocab=vocab, head_dim=head_dim, batch=batch,
        compute_bytes=compute,
        softmax_bytes=dtype(("softmax_compute_type", "softmax_compute_dtype"), "float32", "float32"),
        norm_bytes=dtype(("layernorm_compute_type", "layernorm_compute_dtype"), "float32", "float32"),
        residual_bytes=4 if flag(mc, "fp32_residual_connection", f"{MC}.fp32_residual_connection") else compute,
        param_bytes=param_bytes,
        optimizer=opt_type, optimizer_states=states, state_bytes=state_bytes,
        embedding_shard=mcore or mc.get("parallel_optimizer") is True
        or (model.get("arch") or {}).get("type") != "LlamaForCausalLM",
        flash=flag(mc, "use_flash_attention", f"{MC}.use_flash_attention", default=mcore),
        num_experts=experts, top_k=top_k, moe_ffn=moe_ffn,
        tie_embeddings=flag(mc, "tie_word_embeddings", f"{MC}.tie_word_embeddings"),
        mla=mla, shared_experts=shared, dense_ffn=ffn, dp=dp, tp=tp, pp=pp, cp=cp, ep=ep, micro_batch_num=mbn,
        seq_parallel=sp, seq_split=seq_split, vocab_emb_dp=vocab_emb_dp,
        optimizer_shard=shard, optimizer_shard_size=shard_size, shard_threshold_kb=threshold,
        mcore=mcore, lines=lines, fine_grain=fine_grain,
        # O0's measured on Ascend only (DryRun L1 of GLM3-6B): the example model's CPU runs keep the sum
        loss_apart=mcore or jit_level == "O1" or (jit_level == "O0" and hccl), jit_level=jit_level,
        grad_accumulation=pos(runner.get("gradient_accumulation_steps", 1),
                              "runner_config.gradient_accumulation_steps"),
        optimizer_swap=flag(opt, "swap", "optimizer.swap"),
        hccl=hccl)


#: The largest figures the memory model builds from the sizes, whole (before any parallel split) and
#: with generous bytes an element: each must fit int64 (``memory_overflow`` below). (what, bytes,
#: the sizes it multiplies)
_PRODUCTS = (
    ("the embedding table (vocab_size x hidden_size, with its gradient and optimizer states)",
     lambda z: z["vocab_size"] * z["hidden_size"] * 16, ("vocab_size", "hidden_size")),
    ("the logits (batch_size x seq_length x vocab_size, fp32)",
     lambda z: z["runner_config.batch_size"] * z["seq_length"] * z["vocab_size"] * 4,
     ("runner_config.batch_size", "seq_length", "vocab_size")),
    ("the attention scores (batch_size x num_heads x seq_length x seq_length, fp32)",
     lambda z: z["runner_config.batch_size"] * z["num_heads"] * z["seq_length"] ** 2 * 4,
     ("runner_config.batch_size", "num_heads", "seq_length")),
    ("the layers' weights (num_layers x hidden_size x (4 hidden_size + 3 x intermediate_size x num_experts), "
     "with their gradients and optimizer states)",
     lambda z: z["num_layers"] * z["hidden_size"] * (4 * z["hidden_size"] + 3 * z["intermediate_size"]
                                                     * z["num_experts"]) * 16,
     ("num_layers", "hidden_size", "intermediate_size", "num_experts")),
    ("the activations (num_layers x batch_size x seq_length x (hidden_size + intermediate_size), fp32)",
     lambda z: z["num_layers"] * z["runner_config.batch_size"] * z["seq_length"]
     * (z["hidden_size"] + z["intermediate_size"]) * 4,
     ("num_layers", "runner_config.batch_size", "seq_length", "hidden_size", "intermediate_size")),
)


def _fits_int64(sizes: Dict[str, int], keys: Dict[str, str], err: Any) -> None:
    """Each size fits int64 on its own (``pos``); their products must too: MindSpore counts memory in
    int64, and ``hidden_size: 2**62`` with ``vocab_size: 2**63-1`` gave a peak of 10**14 GiB (exit 0).
    The error names the largest size of the product that overflows (the likeliest typo)."""
    for what, figure, names in _PRODUCTS:
        n = figure(sizes)
        if n > INT64_MAX:
            big = max(names, key=lambda k: sizes[k])
            raise err(keys[big], f"{big.rsplit('.', 1)[-1]} {sizes[big]:,} makes {what} {float(n):.3g} bytes, "
                                 "past int64 (2**63-1), what MindSpore counts memory in: a size this large is a typo")


def llama_ffn(hidden: int, multiple_of: Any = 256, multiplier: Any = None) -> int:
    """The FFN width MindFormers' LlamaFeedForward derives when intermediate_size is not given
    (``models/llama/llama_layer.py:LlamaFeedForward.__init__``, ``hidden_dim=4 * hidden_size``): 4h
    times ``ffn_dim_multiplier + 0.01`` when set, then 2/3 of it, rounded up to a multiple of
    ``multiple_of``, in that order: 28672 for the 70B Llamas (hidden 8192, 1.3, 256), as DryRun L1's
    tracker sizes their w1 / w3 outputs (``[s, 28672 / tp]``), not 28416 (2/3 first, no 0.01)."""
    ffn = 4 * hidden
    if multiplier is not None:
        ffn = int((multiplier + 0.01) * ffn)
    ffn = int(2 * ffn / 3)
    mult = multiple_of if isinstance(multiple_of, int) and multiple_of > 0 else 256
    return mult * math.ceil(ffn / mult)


def params_per_layer(spec: ModelSpec, rows: List[List[Any]], mla_rows: bool = False) -> int:
    """Weight elements of one layer on one rank, from the family's ``params`` rows (plus MLA's
    low-rank projections when the YAML has them, in place of wq/wk/wv, unless the rows size them:
    ``mla_rows``, the DeepSeek-V3 table)."""
    sym = spec.symbols()
    total = sum(product(row, sym) for row in rows)
    if spec.mla and not mla_rows:
        h, at = spec.hidden, sym["at"]
        qk = spec.mla.get("qk_nope_head_dim", spec.head_dim) + spec.mla.get("qk_rope_head_dim", 0)
        vd = spec.mla.get("v_head_dim", spec.head_dim)
        ql, kvl = spec.mla.get("q_lora_rank", 0), spec.mla.get("kv_lora_rank", 0)
        q = (h * ql + ql * at * qk) if ql else h * at * qk
        rope = spec.mla.get("qk_rope_head_dim", 0)
        kv = h * (kvl + rope) + kvl * at * (qk - rope + vd)
        total += q + kv - product(["h", "hq"], sym) - 2 * product(["h", "hkv"], sym)
    return total


def unsharded_per_layer(spec: ModelSpec, rows: List[List[Any]]) -> int:
    """Weight elements of one layer (on the rank) that the parallel optimizer leaves whole: the
    parameters smaller than ``parallel_optimizer_threshold`` (KB). The size compared is the whole
    parameter's, ``shape[0] * ... * shape[n] * size(dtype)`` (MindSpore's
    ``set_auto_parallel_context`` docstring), not the tensor-parallel slice: on the Llama2-70B cut
    (TP4) a 40000 KB threshold moved DryRun L1's first stage by +112 MiB, where leaving wk / wv
    (16384 KB whole) unsharded gives +48 MiB and wq / wo as well (32768 KB slices, 131072 KB whole)
    +432 MiB (docs/estimate.md). A ``params`` row with a leading integer is that many parameters of
    the rest's shape (``[2, h]``: the two norms; ``[3, h, fw]``: w1, w2, w3). 0 without the shard."""
    if spec.shard <= 1:
        return 0
    sym = spec.symbols()
    whole = replace(spec, tp=1, seq_parallel=False).symbols()
    limit = spec.shard_threshold_kb * 1024
    out = 0
    for row in rows:
        count, shape = (row[0], row[1:]) if len(row) > 1 and isinstance(row[0], int) else (1, row)
        if product(shape, whole) * spec.param_bytes < limit:
            out += count * product(shape, sym)
    return out


def product(factors: List[Any], sym: Dict[str, int]) -> int:
    out = 1
    for f in factors:
        out *= f if isinstance(f, int) else sym[f]
    return out
