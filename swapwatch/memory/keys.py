"""Which keys of a training YAML the memory model uses, which cannot change device memory, and
which it leaves out (issue 27: nothing ignored in silence).

Every leaf key path of the merged config (:attr:`swapwatch.config.TrainingConfig.tree`) falls under
the first rule of :data:`RULES` whose pattern matches it (``fnmatch`` on the dotted path):

* ``modelled``: the estimate depends on it (sizes, dtypes, parallel degrees, the strategy sections,
  the optimizer, LoRA's frozen base);
* ``irrelevant``: it cannot change the device peak of a training step (paths, seeds, the learning
  rate, logging, the data pipeline on host, checkpoint saving, inference-only model keys);
* ``unmodelled``: it can change the peak and the model does not size it. Such keys are listed in
  the estimate's header line and its JSON ``unmodelled`` (key paths), and the figure is then a
  bound, not a prediction;
* ``refused``: the peak cannot be known offline (MindSpore's strategy search decides the layout at
  compile time), or no run exists (MindFormers 2.1.0 rejects the key at launch: :func:`_rejected`,
  which :func:`classify` asks before the table): ``estimate`` / ``plan`` stop with that reason (exit 2).

A key with no rule is ``unmodelled`` too: an unknown key is reported, never dropped. A value-aware
rule (``when``) applies only when the value makes the key matter (``recompute_slice_activation:
False`` changes nothing; ``True`` does); a path-aware one (``where``) only in a config where
MindFormers 2.1.0 reads the key (``parallel_optimizer_comm_recompute`` on GLM only, the parallel
optimizer's keys with it on, ``fine_grain_interleave`` on the legacy Llama layer, ``optimizer.swap``
sized on mcore). The table alone says what each key is on each path: :func:`rule_for` with a
:class:`Context` gives what :func:`classify` gives in that config.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from ..config import mapping
from ..errors import ConfigError

MODELLED, IRRELEVANT, UNMODELLED, REFUSED = "modelled", "irrelevant", "unmodelled", "refused"
#: SeqPipe's key on the legacy path (spec.ModelSpec.seq_split keeps it where it is modelled)
SEQ_SPLIT_KEY = "parallel_config.seq_split_num"


def _truthy(v: Any) -> bool:
    return v not in (None, False, 0, "", [], {}, "None", "none")


def _not_one(v: Any) -> bool:
    return v not in (None, 1, 0)


@dataclass(frozen=True)
class Rule:
    pattern: str
    kind: str
    why: str
    #: the rule applies only when this holds for the value (else the next rule is tried)
    when: Optional[Callable[[Any], bool]] = None
    #: ... and only when this holds for the config it is in (the code path, the family, the strategy)
    where: Optional[Callable[["Context"], bool]] = None


@dataclass(frozen=True)
class Context:
    """What a path-aware rule asks of the rest of the config (:func:`context`)."""

    mcore: bool = False        # use_legacy: False (parallel_core/training_graph)
    glm: bool = False          # legacy ChatGLM2ForConditionalGeneration (models/glm2/glm2.py)
    shard: bool = False        # the parallel optimizer is on
    tp: int = 1                # parallel_config.model_parallel
    cp: int = 1                # parallel_config.context_parallel
    full_bool: bool = False    # recompute_config.recompute is the bool True (every layer, with kwargs)
    #: recompute_config.recompute is set at all (Python truth: True, a count, any list, even of zeros)
    recompute_set: bool = False
    comm_sized: bool = False   # the family's tensor table names what select comm recompute frees
    pp: bool = False           # more than one pipeline stage
    #: legacy LlamaForCausalLM: models/llama/llama.py:LlamaModel builds LLamaDecodeLayerInterleave (spec.fine_grain)
    llama_legacy: bool = False
    #: SeqPipe the model sizes: the legacy Llama layer (its key / value caches: models/llama/
    #: llama_transformer.py:LLamaAttention) with stages, seq_split_num > 1 and MindSpore's seqpipe
    #: scheduler (``parallel.pipeline_config``: pipeline_interleave and pipeline_scheduler seqpipe)
    seqpipe: bool = False


def context(tree: Dict[str, Any]) -> Context:
    """The :class:`Context` of a merged config tree."""
    from ..errors import InputError
    from ..engine.strategy import DEFAULT_COMM, named_patterns
    from ..model.families import LEGACY_ARCH, detect, tree_fine_grain

    par, pc = mapping(tree.get("parallel")), mapping(tree.get("parallel_config"))
    rc = mapping(tree.get("recompute_config"))
    mcore = tree.get("use_legacy") is False
    arch = mapping(mapping(tree.get("model")).get("arch")).get("type")
    tp, pp, cp = pc.get("model_parallel", 1), pc.get("pipeline_stage", 1), pc.get("context_parallel", 1)
    try:
        family: Optional[str] = detect(tree).name
    except InputError:          # reported by the config reader / the estimate itself
        family = None
    ppc = mapping(par.get("pipeline_config"))
    split = pc.get("seq_split_num", 1)
    llama_legacy = not mcore and arch == "LlamaForCausalLM"
    staged = isinstance(pp, int) and not isinstance(pp, bool) and pp > 1
    seqpipe = (llama_legacy and staged and _not_one(split) and ppc.get("pipeline_interleave") is True
               and ppc.get("pipeline_scheduler") == "seqpipe")
    return Context(mcore=mcore, glm=not mcore and LEGACY_ARCH.get(str(arch)) == "glm4",
                   shard=par.get("enable_parallel_optimizer") is True or pc.get("optimizer_shard") is True,
                   tp=tp if isinstance(tp, int) and not isinstance(tp, bool) else 1,
                   cp=cp if isinstance(cp, int) and not isinstance(cp, bool) else 1,
                   full_bool=rc.get("recompute") is True, recompute_set=bool(rc.get("recompute")),
                   comm_sized=family is not None and sizes_comm_recompute(
                       family, tree_fine_grain(tree) > 1,
                       named_patterns(rc.get("select_comm_recompute"), DEFAULT_COMM)),
                   pp=staged, llama_legacy=llama_legacy, seqpipe=seqpipe)


MC = "model.model_config."
#: keys that only matter with the parallel optimizer on (irrelevant without it, whatever their value:
#: the first rules of :data:`RULES`)
SHARD_ONLY = ("parallel.parallel_optimizer_config.parallel_optimizer_threshold",
              "parallel.parallel_optimizer_config.gradient_accumulation_shard",
              "recompute_config.parallel_optimizer_comm_recompute")
#: first match wins; see the module docstring. What MindFormers itself rejects at launch is not a
#: rule: :func:`classify` refuses it before the table is read (:func:`_rejected`).
RULES: Tuple[Rule, ...] = (
    # -- refused: only the compiler knows the layout --------------------------------------------------
    Rule("parallel.parallel_mode", REFUSED,
         "auto_parallel (parallel_mode 2) searches the sharding strategy at compile time: the layout and so the "
         "peak cannot be known offline; run DryRun (`msrun --sim_level 1`) or set parallel_mode 1 (semi-auto)",
         when=lambda v: v in (2, "auto_parallel")),
    # -- the parallel optimizer's own keys, with the parallel optimizer off ---------------------------
    *(Rule(k, IRRELEVANT, "the parallel optimizer is off", where=lambda c: not c.shard) for k in SHARD_ONLY),
    # -- unmodelled: memory-relevant, not sized (value-aware first) -----------------------------------
    # comm recompute and slice activation: what MindFormers 2.1.0 passes on, per code path
    # (docs/estimate.md "Comm recompute and slice activation"; each rule's reason cites the code)
    Rule("recompute_config.recompute_slice_activation", REFUSED,
         "recompute_slice_activation: True is refused by MindFormers on the mcore path "
         "(parallel_core/transformer_config.py:TransformerConfig.__post_init__ raises ValueError; the config "
         "reader refuses it first, swapwatch.config.tree); set it False",
         when=_truthy, where=lambda c: c.mcore),
    Rule("recompute_config.recompute_slice_activation", MODELLED,
         "legacy, full recompute, model_parallel > 1: MindSpore's slice of the kept layer output does not move "
         "DryRun L1's peak (pairs llama2_70b_l8_pp2_full_nosp_noslice -> _nosp_slice: 0 MiB without sequence "
         "parallel; _full_noslice -> _full: +60 MiB, 0.7 %, with it; jit_level O1), so the model sizes it as no "
         "change (docs/estimate.md)", when=_truthy, where=lambda c: c.full_bool and c.tp > 1),
    Rule("recompute_config.recompute_slice_activation", IRRELEVANT,
         "read only with recompute the bool True and model_parallel > 1 (LayerSetting.set_recompute: "
         "layer.recompute(recompute_slice_activation=...); the per-stage forms call layer.recompute())"),
    Rule("recompute_config.mp_comm_recompute", IRRELEVANT,
         "not read by MindFormers 2.1.0: LayerSetting.set_recompute calls layer.recompute() without it, so "
         "MindSpore's Cell.recompute default (the layer's tensor-parallel communication recomputed) holds"),
    Rule("recompute_config.parallel_optimizer_comm_recompute", MODELLED,
         "GLM: models/glm2/glm2.py:ChatGLM2ForConditionalGeneration.__init__ calls "
         "Cell._parallel_optimizer_comm_recompute (each parameter's flag), which does not move DryRun L1's peak "
         "(pair glm4_9b_l8_pp2_none -> _none_comm: 29684 MiB both): sized as no change (docs/estimate.md)",
         when=_truthy, where=lambda c: c.glm),
    Rule("recompute_config.parallel_optimizer_comm_recompute", IRRELEVANT,
         "read only by models/glm2/glm2.py:ChatGLM2ForConditionalGeneration.__init__; the Llama and mcore "
         "layers never pass it to Cell.recompute (LayerSetting.set_recompute)"),
    Rule("recompute_config.select_comm_recompute", MODELLED,
         "the gathered copies select comm recompute frees, named by the family's tensor table (comm_frees: "
         "tensor_table.TensorTable.comm_freed; DryRun L1 pair qwen3_32b_l8_tp8_sp_none -> _comm)", when=_truthy,
         where=lambda c: c.tp > 1 and not c.full_bool and c.comm_sized),
    Rule("recompute_config.select_comm_recompute", UNMODELLED,
         "what select comm recompute frees or adds (this family's table does not name it; on the plain legacy "
         "Llama / Qwen2.5 layer DryRun L1 shows it freeing nothing and adding a cast: the estimate may be low, "
         "docs/estimate.md \"Fine-grain interleave\")", when=_truthy,
         where=lambda c: c.tp > 1 and not c.full_bool),
    Rule("recompute_config.select_comm_recompute", IRRELEVANT,
         "marks tensor-parallel communication only (model_parallel > 1), and LayerSetting.set_recompute "
         "applies it only to layers not fully recomputed"),
    Rule("recompute_config.select_comm_recompute_exclude", UNMODELLED, "see select_comm_recompute", when=_truthy,
         where=lambda c: c.tp > 1),
    Rule("recompute_config.select_comm_recompute_exclude", IRRELEVANT,
         "marks tensor-parallel communication only (model_parallel > 1)"),
    Rule("parallel.pipeline_config.pipeline_scheduler", MODELLED,
         "SeqPipe's schedule: MindSpore's SeqpipeScheduler runs each micro-batch's seq_split_num chunks as "
         "the pipeline's units (model.inflight; docs/estimate.md \"SeqPipe\")",
         when=lambda v: v == "seqpipe", where=lambda c: c.seqpipe),
    Rule("parallel.pipeline_config.pipeline_scheduler", UNMODELLED,
         "SeqPipe / zero-bubble schedules hold other micro-batch (chunk) counts than 1F1B",
         when=lambda v: v not in (None, "1f1b", "interleave", "")),
    Rule("model.model_config.seq_split_num", UNMODELLED, "SeqPipe's sequence chunks", when=_not_one),
    Rule("parallel.pipeline_config.seq_split_num", UNMODELLED, "SeqPipe's sequence chunks", when=_not_one),
    Rule(SEQ_SPLIT_KEY, MODELLED, "SeqPipe: the layers' tensors of one sequence chunk, the chunks in flight of "
         "MindSpore's seqpipe schedule (model.inflight), the attention's whole-sequence key / value and the "
         "layers' key / value caches (legacy Llama layer; docs/estimate.md \"SeqPipe\")", when=_not_one,
         where=lambda c: c.seqpipe),
    Rule(SEQ_SPLIT_KEY, UNMODELLED, "SeqPipe's sequence chunks in flight and key / value caches, sized only for "
         "the legacy Llama layer under the seqpipe scheduler (pipeline_interleave, pipeline_scheduler: seqpipe) "
         "with stages (docs/estimate.md \"SeqPipe\")", when=_not_one),
    Rule(MC + "fine_grain_interleave", IRRELEVANT, "the mcore layers do not read it", when=_not_one,
         where=lambda c: c.mcore),
    Rule(MC + "fine_grain_interleave", MODELLED, "the interleaved layer: its w2 reading the SiLU-Mul product and "
         "select comm recompute freeing its gathered inputs (memory/llama.yaml `variant: interleaved`; with "
         "model_parallel 1 MindFormers builds the plain layer)", when=_not_one,
         where=lambda c: c.llama_legacy),
    Rule(MC + "fine_grain_interleave", UNMODELLED, "fine-grain interleave splits each micro-batch in two halves "
         "whose communication overlaps the other's compute (modelled on the legacy Llama layer only, irrelevant "
         "on mcore: the rules above)", when=_not_one),
    Rule("micro_batch_interleave_num", MODELLED, "legacy: each micro-batch holds that many batch_size parts, "
         "all kept for the backward (spec.batch; mcore: refused, classify)", when=_not_one),
    Rule("parallel_config.vocab_emb_dp", IRRELEVANT,
         "with model_parallel and context_parallel 1 the embedding and the head are split the same either way "
         "(models/llama/llama_layer.py:LlamaEmbedding.shard: ((1, 1), (dp, cp)) vs ((mp * cp, 1), (dp, 1)); "
         "models/llama/llama.py:LlamaForCausalLM: lm_head (1, 1) vs (mp, 1))", where=lambda c: c.tp == 1 and c.cp == 1),
    Rule("parallel_config.vocab_emb_dp", UNMODELLED, "the embedding table's split (data parallel vs model parallel)",
         when=lambda v: v is not None),
    Rule("context.memory_optimize_level", UNMODELLED, "O1 turns on MindSpore's memory reuse passes",
         when=lambda v: v not in (None, "O0")),
    Rule("context.jit_config.jit_level", MODELLED,
         "the legacy path's terms are DryRun L1's at O1, as the maintainer YAMLs set it (the optimizer step's "
         "form, the last stage's loss apart from the layers' backward: docs/estimate.md)",
         when=lambda v: str(v).upper() == "O1", where=lambda c: not c.mcore),
    Rule("context.jit_config.jit_level", MODELLED,
         "legacy at O0: the last stage's loss is counted with the layers' backward (their sum, the higher "
         "figure: DryRun L1 measured them apart at O1 only; ModelSpec.loss_apart)",
         when=lambda v: str(v).upper() == "O0", where=lambda c: not c.mcore),
    Rule("context.jit_config.jit_level", UNMODELLED, "O1 / O2 graph fusion changes what is kept",
         when=lambda v: v not in (None, "O0")),
    Rule("context.mempool_block_size", UNMODELLED, "the pool's block size: fragmentation (the actual peak)"),
    Rule("context.ascend_config.parallel_speed_up_json_path", UNMODELLED,
         "the speed-up switches in that JSON (e.g. overlap of communication) are not read"),
    Rule("optimizer.swap", MODELLED, "mcore: AdamW's states on host, their device copies at the optimizer step "
         "(memory/model.py swap_optimizer_step)", when=_truthy, where=lambda c: c.mcore),
    Rule("optimizer.swap", UNMODELLED, "optimizer states swapped to host", when=_truthy),
    Rule(MC + "moe_token_drop_policy", IRRELEVANT, "DryRun and the model assume the even token load"),
    Rule(MC + "moe_token_dispatcher_type", UNMODELLED, "alltoall is tabled; other dispatchers keep other copies",
         when=lambda v: v not in (None, "alltoall")),
    Rule(MC + "mla_qkv_concat", UNMODELLED, "MLA's concatenated q / kv down projection (MLASelfAttentionConcatenated)",
         when=_truthy),
    Rule(MC + "use_pad_tokens", UNMODELLED, "MoE token padding to the expert capacity", when=_truthy),
    Rule(MC + "quantization_bit", UNMODELLED, "quantised weights", when=_truthy),
    Rule(MC + "pre_seq_len", UNMODELLED, "P-Tuning v2 prefix keys and values", when=_truthy),
    # the Qwen2.5-14B 128k finetune (context_parallel 16); without context parallel there is no ring
    Rule(MC + "use_ring_attention", UNMODELLED, "ring attention's key / value blocks passed around the "
         "context-parallel ranks", when=_truthy, where=lambda c: c.cp > 1),
    Rule(MC + "use_ring_attention", IRRELEVANT, "no ring without context parallel, or off"),
    Rule(MC + "pet_config.*", MODELLED, "LoRA (models/build_model.py:build_network wraps the model with "
         "get_pet_model): the frozen base weights carry no gradients or optimizer states"),
    # -- modelled ------------------------------------------------------------------------------------
    *(Rule(MC + k, MODELLED, "size / dtype read by swapwatch.memory.spec") for k in (
        "hidden_size", "num_heads", "num_attention_heads", "n_kv_heads", "num_key_value_heads", "num_query_groups",
        "multi_query_group_num", "multi_query_attention", "intermediate_size", "ffn_hidden_size", "seq_length",
        "vocab_size", "padded_vocab_size", "num_layers", "num_hidden_layers", "num_experts", "n_routed_experts",
        "num_experts_per_tok", "moe_router_topk", "moe_intermediate_size", "moe_ffn_hidden_size", "head_dim",
        "kv_channels", "compute_dtype", "softmax_compute_type", "softmax_compute_dtype", "layernorm_compute_type",
        "layernorm_compute_dtype", "param_init_type", "params_dtype", "fp32_residual_connection",
        "use_flash_attention", "tie_word_embeddings", "untie_embeddings_and_output_weights", "q_lora_rank",
        "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "n_shared_experts",
        "shared_expert_num", "multiple_of", "ffn_dim_multiplier", "offset", "pp_interleave_num",
        "first_k_dense_replace", "num_nextn_predict_layers", "mtp_depth", "model_type", "architectures", "type",
        "qkv_concat", "mlp_concat", "add_qkv_bias", "qkv_has_bias", "multi_latent_attention", "qk_layernorm",
        "cpu_offloading", "cpu_offloading_num_layers", "swap", "layer_swap", "op_swap", "default_prefetch",
        "max_position_embeddings", "max_position_embedding", "moe_grouped_gemm", "router_dense_type",
        "gated_linear_unit", "batch_size", "use_past", "seq_split_num", "fine_grain_interleave")),
    Rule("model.arch.type", MODELLED, "the family (swapwatch.model.families)"),
    Rule("model.model_type", MODELLED, "the family (swapwatch.model.families)"),
    Rule("model.num_hidden_layers", MODELLED, "layer count"),
    Rule("model.num_nextn_predict_layers", MODELLED, "MTP layers"),
    Rule("model.first_k_dense_replace", MODELLED, "dense / MoE layer split"),
    Rule("use_legacy", MODELLED, "the code path (legacy / mcore)"),
    Rule("pretrained_model_dir", MODELLED, "its config.json is merged under model_config"),
    Rule("parallel_config.*", MODELLED, "parallel degrees, micro-batches, sequence parallel, recompute"),
    Rule("parallel.enable_parallel_optimizer", MODELLED, "optimizer shard"),
    Rule("parallel.parallel_optimizer_config.optimizer_weight_shard_size", MODELLED, "optimizer shard size"),
    Rule("parallel.parallel_optimizer_config.parallel_optimizer_threshold", MODELLED,
         "parameters whose slice is below this size (KB) stay whole (spec.unsharded_per_layer)"),
    Rule("parallel.parallel_optimizer_config.gradient_accumulation_shard", UNMODELLED,
         "splits the accumulated gradients over the optimizer-parallel ranks; DryRun L1 saves 184 MiB on the "
         "Llama2-70B cut's first stage where halving them would save 810 MiB: not understood, not sized",
         when=_truthy),
    Rule("parallel.pipeline_config.pipeline_interleave", MODELLED, "interleaved pipeline"),
    Rule("parallel.pipeline_config.pipeline_scheduler", MODELLED, "1F1B / interleave"),
    Rule("parallel.parallel_mode", MODELLED, "semi-auto / data parallel: the layout the YAML gives"),
    Rule("recompute_config.*", MODELLED, "the strategy engine (swapwatch.engine.strategy)"),
    Rule("swap_config.*", MODELLED, "the strategy engine (swapwatch.engine.strategy)"),
    Rule("runner_config.batch_size", MODELLED, "the micro-batch"),
    Rule("runner_config.gradient_accumulation_steps", MODELLED,
         "accumulation steps run one after another: one micro-batch's activations at a time; the gradient "
         "buffer is the static part's gradients"),
    Rule("optimizer.type", MODELLED, "optimizer states per parameter"),
    Rule("context.mode", MODELLED, "graph mode (PyNative is another path)"),
    # -- irrelevant to the device peak ----------------------------------------------------------------
    *(Rule(p, IRRELEVANT, why) for p, why in (
        ("parallel.search_mode", "only read by auto_parallel"),
        ("parallel.dataset_strategy", "the input batch split (host / a few KB on device)"),
        ("parallel.enable_alltoall", "communication operator choice"),
        ("parallel.full_batch", "input loading"),
        ("parallel.gradients_mean", "a scalar in the gradient reduction"),
        ("parallel.loss_repeated_mean", "a scalar in the loss"),
        ("parallel.strategy_ckpt_config.*", "strategy file output"),
        ("parallel.strategy_ckpt_save_file", "strategy file output"),
        ("optimizer.*", "hyper-parameters"),
        ("lr_schedule.*", "learning rate"),
        ("runner_config.*", "epochs and sinking"),
        ("runner_wrapper.*", "loss scale and clipping (scalars)"),
        ("train_dataset.*", "the host data pipeline"), ("train_dataset_task.*", "the host data pipeline"),
        ("eval_dataset.*", "evaluation"), ("eval_dataset_task.*", "evaluation"), ("do_eval", "evaluation"),
        ("eval_*", "evaluation"), ("metric.*", "evaluation"),
        ("processor.*", "tokenizer"), ("callbacks", "logging and checkpoint saving"),
        ("trainer.*", "trainer class and name"), ("context.device_*", "device choice"),
        ("context.max_call_depth", "compiler recursion"), ("context.max_device_memory", "the budget, not the use"),
        ("context.save_graphs*", "graph dumps"), ("context.ascend_config.precision_mode", "kernel precision"),
        ("context.enable_graph_kernel", "off on Ascend training YAMLs"), ("seed", "randomness"),
        ("output_dir", "paths"), ("load_checkpoint", "paths"), ("load_ckpt_format", "paths"),
        ("src_strategy_path_or_dir", "paths"), ("auto_trans_ckpt", "checkpoint conversion"),
        ("only_save_strategy", "compile-only switch"), ("resume_training", "checkpoint loading"),
        ("run_mode", "train (the only mode estimated)"), ("use_parallel", "implied by the parallel sizes"),
        ("print_separate_loss", "logging"), ("profile*", "profiling"), ("init_start_profile", "profiling"),
        ("remote_save_url", "paths"), ("filepath_prefix", "paths"), ("train_precision_sync", "determinism"),
        ("auto_tune", "off"), ("autotune_per_step", "off"), ("layer_scale", "lr per layer"),
        ("layer_decay", "lr per layer"), ("lr_scale*", "lr"), ("moe_config.*", "read through model_config"),
    )),
    *(Rule(MC + k, IRRELEVANT, "inference, initialisation or a scalar: no device tensor in training") for k in (
        "bos_token_id", "eos_token_id", "pad_token_id", "ignore_token_id", "repetition_penalty", "max_decode_length",
        "top_k", "top_p", "do_sample", "checkpoint_name_or_path", "use_past_shard", "use_cache", "extend_method",
        "initializer_range", "rms_norm_eps", "layernorm_epsilon", "rope_theta", "theta", "rotary_emb_base",
        "rope_ratio", "scaling_factor", "rotary_pct", "rotary_dtype", "position_embedding_type", "hidden_act",
        "attention_dropout", "hidden_dropout", "emb_dropout_prob", "bias_dropout_fusion", "bias_swiglu_fusion",
        "apply_rope_fusion", "apply_query_key_layer_scaling", "attention_softmax_in_fp32",
        "apply_residual_connection_post_layernorm", "post_layer_norm", "rmsnorm", "add_bias_linear",
        "attention_bias", "input_sliced_sig", "use_attn_mask_compression", "use_contiguous_weight_layout_attention",
        "moe_aux_loss_coeff", "router_aux_loss_coef", "moe_router_bias_update_rate", "moe_router_enable_expert_bias",
        "moe_router_load_balancing_type", "moe_router_pre_softmax", "norm_topk_prob", "n_group", "topk_group",
        "routed_scaling_factor", "use_fused_ops_topkrouter", "mtp_loss_factor", "prefix_projection",
        "moe_token_dispatcher_type", "mla_qkv_concat", "use_pad_tokens", "quantization_bit", "pre_seq_len",
        "is_dynamic")),
    # the paged-attention KV cache's sizes (r1.5.0's Qwen1.5 YAMLs set them): models/llama/
    # llama_transformer.py:LLamaAttention.__init__ builds that cache (InferAttention) only under use_past
    *(Rule(MC + k, IRRELEVANT, "the paged-attention KV cache of inference (use_past): none in training")
      for k in ("block_size", "num_blocks")),
    # the Qwen2.5-32B finetune YAML sets it; no MindFormers 2.1.0 module reads it
    Rule(MC + "compute_in_2d", IRRELEVANT, "read nowhere in MindFormers 2.1.0"),
)


@functools.lru_cache(maxsize=None)
def sizes_comm_recompute(family: str, interleaved: bool, patterns: Tuple[str, ...]) -> bool:
    """Whether the tensor table serving layout ``family`` (its ``families`` header) sizes what select
    comm recompute with ``patterns`` does on the layer built (the legacy Llama's fine-grain interleaved
    one or the plain one: ``interleaved`` / ``not_interleaved`` variant tags): the table names what it
    frees somewhere on that layer (an op with ``comm_frees``: tensor_table.TensorTable.comm_freed), and
    no op the patterns reach has an effect it does not size (``comm_unsized``: the plain Llama layer's
    norms, whose comm recompute adds a cast, llama.yaml)."""
    from ..engine import strategy
    from ..layouts import load_layout
    from ..model.patterns import under
    from .table_files import family_data, tables, variant_tags

    found = tables().get(family)
    if found is None:
        return False
    data = family_data(found[0])
    kinds = data.get("kinds") or {}
    other = "not_interleaved" if interleaved else "interleaved"
    layers = [(f"{family}:{k}", v) for k, v in kinds.items()] if kinds else [(family, data)]
    named = unsized = False
    for key, kind in layers:
        ops = [o for o in kind.get("ops", ()) if other not in variant_tags(o)]
        named = named or any(o.get("comm_frees") for o in ops)
        flagged = [o["path"] for o in ops if o.get("comm_unsized")]
        if flagged:
            reached = [t.path for p in patterns for t in strategy.walk(load_layout(key), p, "comm").targets]
            unsized = unsized or any(under(path, t) for path in flagged for t in reached)
    return named and not unsized


@dataclass
class KeyReport:
    """Every leaf key of one config, classified."""

    by_kind: Dict[str, List[str]] = field(default_factory=dict)
    why: Dict[str, str] = field(default_factory=dict)

    @property
    def unmodelled(self) -> List[str]:
        return self.by_kind.get(UNMODELLED, [])


def leaves(tree: Any, prefix: str = "") -> Iterator[Tuple[str, Any]]:
    """(dotted path, value) of every leaf of a YAML tree (a list is a leaf: its items are values)."""
    if isinstance(tree, dict) and tree:
        for k, v in tree.items():
            yield from leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif prefix:
        yield prefix, tree


def rule_for(path: str, value: Any, ctx: Optional[Context] = None) -> Optional[Rule]:
    """The first rule for ``path`` at ``value`` in a config like ``ctx`` (default: a legacy config,
    no optimizer shard, no tensor parallel, no full recompute). A key whose only rules are
    value-aware ones that do not hold is irrelevant at this value (``micro_batch_interleave_num: 1``)."""
    ctx = ctx or Context()
    skipped: Optional[Rule] = None
    for rule in RULES:
        if fnmatchcase(path, rule.pattern) and (rule.where is None or rule.where(ctx)):
            if rule.when is None or rule.when(value):
                return rule
            skipped = skipped or rule
    if skipped is not None:
        return Rule(path, IRRELEVANT, f"at {value!r} nothing changes ({skipped.why})")
    return None


#: the sections whose keys set a memory lever (recompute, swap)
LEVER_SECTIONS = ("recompute_config.", "swap_config.", "parallel_config.recompute.", MC + "swap", MC + "op_swap",
                  MC + "layer_swap")


def lever_key(key: str) -> bool:
    """Whether ``key`` sets one of the memory levers (recompute, swap): where the estimate leaves such a
    key out, a DryRun stage's miss is that lever's effect (memory/calibrate.py:corpus_errors groups the
    stages by the lever keys they leave out; memory/budget.py:table_error)."""
    return key.startswith(LEVER_SECTIONS)


#: sections whose sub-keys are user patterns (a select_recompute dict), classified as their section
PATTERN_SECTIONS = ("recompute_config.select_recompute.", "recompute_config.select_comm_recompute.",
                    "recompute_config.select_recompute_exclude.", "recompute_config.select_comm_recompute_exclude.",
                    "swap_config.op_swap.", MC + "op_swap.", "swap_config.layer_swap.")


def _rejected(key: str, value: Any, ctx: Context) -> Optional[str]:
    """Why MindFormers 2.1.0 itself rejects this key at this value in this config (None: it does
    not): ``trainer/base_trainer.py:BaseTrainer._wrap_network_with_tool_cells`` (mcore) raises
    ValueError for micro_batch_interleave_num > 1, and with pipeline stages for seq_split_num > 1;
    ``_wrap_network_with_tool_cells_legacy`` for SeqPipe under full recompute."""
    where = "trainer/base_trainer.py:BaseTrainer._wrap_network_with_tool_cells"
    if ctx.mcore and key == "micro_batch_interleave_num" and _not_one(value):
        return f"MindFormers 2.1.0 rejects micro_batch_interleave_num > 1 with use_legacy: False ({where})"
    if key == "parallel_config.seq_split_num" and _not_one(value) and ctx.pp:
        if ctx.mcore:
            return f"MindFormers 2.1.0 rejects seq_split_num > 1 (SeqPipe) with use_legacy: False ({where})"
        if ctx.recompute_set:
            # `if self.config.recompute_config.recompute: raise ValueError`: any value Python takes as
            # true, per-stage counts too (a list, even of zeros)
            return ("MindFormers 2.1.0 rejects SeqPipe (seq_split_num > 1) with recompute_config.recompute set "
                    "(trainer/base_trainer.py:BaseTrainer._wrap_network_with_tool_cells_legacy: any true value, "
                    "per-stage counts too); use select_recompute")
    return None


def rejected(tree: Dict[str, Any]) -> List[Tuple[str, str]]:
    """(key path, why) of every key MindFormers 2.1.0 itself rejects at launch in this merged config
    (:func:`_rejected`): ``estimate`` refuses such a YAML, ``explain`` says so before launch (SW309)."""
    ctx = context(tree)
    return [(path, why) for path, value in leaves(tree) for why in [_rejected(path, value, ctx)] if why]


def classify(tree: Dict[str, Any]) -> KeyReport:
    """Classify every leaf key path of ``tree`` (see the module docstring): what MindFormers 2.1.0
    rejects at launch is refused (:func:`_rejected`), every other key takes its first rule
    (:func:`rule_for`, in this config's :class:`Context`)."""
    out = KeyReport()
    ctx = context(tree)
    for path, value in leaves(tree):
        key = next((s[:-1] for s in PATTERN_SECTIONS if path.startswith(s)), path)
        if key in out.why:          # a pattern section: classified once, at its first entry
            continue
        refusal = _rejected(key, value, ctx)
        if refusal:
            kind, why = REFUSED, refusal
        else:
            rule = rule_for(key, value, ctx)
            kind, why = (rule.kind, rule.why) if rule else (UNMODELLED, "not known to the memory model")
        out.by_kind.setdefault(kind, []).append(key)
        out.why[key] = why
    return out


def check(tree: Dict[str, Any], source: Optional[str], lines: Dict[str, int]) -> KeyReport:
    """:func:`classify`, raising ConfigError (exit 2) at the first ``refused`` key."""
    from ..config import nearest

    rep = classify(tree)
    for key in rep.by_kind.get(REFUSED, []):
        raise ConfigError(f"cannot estimate memory: {rep.why[key]}", file=source, line=nearest(lines, key), key=key)
    return rep
