"""Record DryRun cases for the oracle tier (tests/test_oracle_dryrun.py, docs/estimate.md).

For each case: derive the training YAML from a maintainer YAML in fixtures/configs/mindformers/ (layers
cut, recompute set, parallel sizes changed), write it to fixtures/dryrun/cases/<name>.yaml (the file
`swapwatch estimate` reads is exactly what DryRun ran), run it through swapwatch.memory.dryrun.measure
for the stages asked, and write fixtures/dryrun/cases/<name>.json:
  {"yaml", "source", "derived", "family", "rank_size", "stages": [{"stage", "rank_id", "used_peak_mib",
   "actual_peak_mib", "seconds"}], "mindspore", "mindformers"}

usage: .venv/bin/python tools/dryrun/record_cases.py [NAME ...]   (default: every case without a .json)
       --list   print the cases;  --force   re-record cases that have a .json
       --stage N (repeatable)   run only these stages, keeping the others already in the .json
       --timeout S   seconds a stage may take (default 1800)
       NAME --stage S --adopt RAN.yaml LOG SECONDS   record a stage DryRun already ran by hand (RAN.yaml must
                            parse to the case's derived YAML; LOG is its log)
       --compare NAME ...   print each recorded stage's uncalibrated estimate beside DryRun's used peak
                            (markdown rows; no DryRun run: the figures of docs/estimate.md and README.md)
Needs `make dryrun`. Runs one DryRun per stage, one after another (23-65 s per 8-layer stage when idle).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
CASES_DIR = REPO / "fixtures" / "dryrun" / "cases"
SRC = "fixtures/configs/mindformers/"
Q32 = SRC + "pretrain_qwen3_32b_4k.yaml"
L70 = SRC + "pretrain_llama2_70b.yaml"
Q25 = SRC + "finetune_qwen2_5_7b_8k.yaml"
QMOE = SRC + "pretrain_qwen3_30b_a3b_4k.yaml"
DSV3 = SRC + "pretrain_deepseek3_671b.yaml"
G4 = SRC + "finetune_glm4_9b.yaml"
L31 = SRC + "finetune_llama3_1_70b.yaml"
Q25_14 = SRC + "finetune_qwen2_5_14b_8k.yaml"
Q25_32 = SRC + "finetune_qwen2_5_32b_8k.yaml"
Q25_128K = SRC + "finetune_qwen2_5_14b_128k.yaml"
Q25_72 = SRC + "finetune_qwen2_5_72b_32k.yaml"
#: the r1.5.0 maintainer YAMLs the model put above their pool (docs/estimate.md "The maintainer YAMLs above
#: their card"), copied verbatim from that ref
L7_R15 = SRC + "r1.5.0_finetune_llama2_7b.yaml"
L13P_R15 = SRC + "r1.5.0_pretrain_llama2_13b.yaml"
L13F_R15 = SRC + "r1.5.0_finetune_llama2_13b.yaml"
Q15_7F_R15 = SRC + "r1.5.0_finetune_qwen1_5_7b.yaml"
GLM3_R15 = SRC + "r1.5.0_run_glm3_6b_multiturn_finetune_800T_A2_64G.yaml"
Q15_7P_R15 = SRC + "r1.5.0_pretrain_qwen1_5_7b.yaml"
Q15_14P_R15 = SRC + "r1.5.0_pretrain_qwen1_5_14b.yaml"
Q2_57P_R15 = SRC + "r1.5.0_pretrain_qwen2_57b.yaml"
Q2_57F_R15 = SRC + "r1.5.0_finetune_qwen2_57b.yaml"
MIX_R16 = SRC + "r1.6.0_finetune_mixtral-8x7b.yaml"
#: the legacy cuts (use_legacy absent: models/llama/llama.py): 8 layers on 2 stages, 4 micro batches
#: (MindSpore unrolls every micro batch into the compiled graph; 1F1B holds at most pp of them)
LEGACY_CUT = {"parallel_config.pipeline_stage": 2, "parallel_config.micro_batch_num": 4}
#: MindFormers 2.1.0 has no FP32StateAdamWeightDecay (the Llama2-70B YAML's): its AdamW, which keeps
#: both moments in fp32 as well (core/optim/__init__.py: AdamW)
LLAMA_CUT = {**LEGACY_CUT, "optimizer": {"type": "AdamW", "betas": [0.9, 0.95], "eps": 1.e-8,
                                         "weight_decay": 0.0, "learning_rate": 1.e-5}}



def adamw(betas: List[float], lr: float, weight_decay: float = 0.0) -> Dict[str, Any]:
    """MindFormers 2.1.0's AdamW in place of an r1.5.0 YAML's FP32StateAdamWeightDecay or
    FusedAdamWeightDecay (gone in 2.1.0): all three keep both moments in fp32 whatever the weights'
    dtype (r1.5.0 core/optim/optim.py: FP32StateAdamWeightDecay, FusedAdamWeightDecay.clone_state's
    forced_dtype; 2.1.0 core/optim/adamw.py: AdamW.clone_state), so the optimizer state is the same;
    the YAML's betas, eps, learning rate and weight decay (0.0: the r1.5.0 default) kept."""
    return {"optimizer": {"type": "AdamW", "betas": betas, "eps": 1.e-8, "weight_decay": weight_decay,
                          "learning_rate": lr}}


#: the 8k sequence of the Qwen3-32B cuts
S8K = {"model.model_config.seq_length": 8192, "model.model_config.max_position_embeddings": 8192,
       "train_dataset.data_loader.config.seq_length": 8192}
#: a 16k sequence
S16K = {"model.model_config.seq_length": 16384, "model.model_config.max_position_embeddings": 16384,
        "train_dataset.data_loader.config.seq_length": 16384}
#: the Llama-3.1-70B finetune's first stage as shipped, the others cut to 2 layers (24 layers)
L31_STAGE0 = {"model.model_config.num_layers": 24, "model.model_config.offset": [7, -1, -1, -1, -1, -1, -1, -1],
              "parallel_config.micro_batch_num": 8}
#: the Llama-3.1-70B finetune's layer on a 4-layer, 2-stage cut with 2 micro-batches (stage 0: 2 layers)
L31_CUT = {"model.model_config.num_layers": 4, "model.model_config.offset": [0, 0],
           "parallel_config.pipeline_stage": 2, "parallel_config.micro_batch_num": 2}
#: the plain legacy Llama layer in place of the fine-grain interleaved one
FGI1 = {"model.model_config.fine_grain_interleave": 1}
#: the Qwen2.5-72B 32k finetune's select comm recompute patterns (its norms and the reshapes at the input
#: of w_qkv and w_gate_hidden), on every layer of a 2-stage cut of 2 layers a stage
Q25_72_COMM = {".*\\.norm": [2, 2], ".*\\.w_qkv\\.reshape": [2, 2], ".*\\.w_gate_hidden\\.reshape": [2, 2]}
#: the Qwen2.5 finetunes' select recompute patterns
Q25_SELECT = ("feed_forward\\.mul", "feed_forward\\.w1\\.activation\\.silu", "feed_forward\\.w1\\.reshape",
              "feed_forward\\.w2\\.reshape")
#: the mcore swap switch (model_config.cpu_offloading: LayerSetting's TransformerSwapConfig(swap=...))
SWAP = {"model.model_config.cpu_offloading": True}
#: a case's "recompute" / "select" left as the maintainer YAML has it
SHIPPED = "as shipped"
#: name -> source YAML, family, stages to measure, and the changes (dotted key -> value; "recompute"
#: is a shorthand for recompute_config.recompute / select_recompute)
CASES: Dict[str, Dict[str, Any]] = {
    "qwen3_32b_l8_none": {"source": Q32, "family": "qwen3", "stages": [0, 3],
                          "layers": 8, "recompute": False, "select": False},
    "qwen3_32b_l8_full": {"source": Q32, "family": "qwen3", "stages": [0, 3],
                          "layers": 8, "recompute": True, "select": False},
    "qwen3_32b_l8_select": {"source": Q32, "family": "qwen3", "stages": [0, 3],
                            "layers": 8, "recompute": False, "select": True},
    "qwen3_32b_l8_counts": {"source": Q32, "family": "qwen3", "stages": [0, 3],
                            "layers": 8, "recompute": [1, 1, 0, 0], "select": False},
    "qwen3_32b_l8_pp2_none": {"source": Q32, "family": "qwen3", "stages": [0, 1],
                               "layers": 8, "recompute": False, "select": False,
                               "set": {"parallel_config.pipeline_stage": 2}},
    "qwen3_32b_l8_mbn8_full": {"source": Q32, "family": "qwen3", "stages": [0],
                               "layers": 8, "recompute": True, "select": False,
                               "set": {"parallel_config.micro_batch_num": 8}},
    "qwen3_32b_l8_s8k_none": {"source": Q32, "family": "qwen3", "stages": [0],
                              "layers": 8, "recompute": False, "select": False,
                              "set": {"model.model_config.seq_length": 8192,
                                      "model.model_config.max_position_embeddings": 8192,
                                      "train_dataset.data_loader.config.seq_length": 8192}},
    # held out for the mcore last stage (docs/estimate.md "The mcore last stage"): predicted before it ran
    "qwen3_32b_l8_s8k_full": {"source": Q32, "family": "qwen3", "stages": [3, 0],
                              "layers": 8, "recompute": True, "select": False,
                              "set": {"model.model_config.seq_length": 8192,
                                      "model.model_config.max_position_embeddings": 8192,
                                      "train_dataset.data_loader.config.seq_length": 8192}},
    "qwen3_32b_shipped": {"source": Q32, "family": "qwen3", "stages": [0], "layers": None,
                          "recompute": True, "select": False},
    # the maintainer YAMLs at full size (docs/estimate.md "The maintainer YAMLs at full size"): every
    # layer, recompute as shipped (full); the stage the model predicts highest first
    "qwen3_moe_shipped": {"source": QMOE, "family": "qwen3_moe", "stages": [3, 0], "layers": None,
                          "recompute": True, "select": False},
    "deepseek_v3_shipped": {"source": DSV3, "family": "deepseek_v3", "stages": [1, 0, 7], "layers": None,
                            "recompute": True, "select": False},
    # the same with 16 layers (2 per stage, one per interleave chunk, offset 0) and 8 micro-batches (as many
    # as stages: MindSpore unrolls each into the graph; the in-flight count, which sets the peak, is the
    # pipeline's): every width, expert count, parallel size, the interleave, SeqPipe, the optimizer shard
    # and swap as shipped. The Qwen3-MoE YAML as shipped (12 layers x 16 micro-batches a stage) did not
    # compile within 30 min on the shared machine, so the 61-layer one was not tried
    "deepseek_v3_shipped_l16": {"source": DSV3, "family": "deepseek_v3", "stages": [3], "layers": 16,
                                "recompute": True, "select": False,
                                "set": {"parallel_config.micro_batch_num": 8}},
    # Qwen3-MoE with every layer (12 a stage, widths, experts and parallel sizes as shipped) and 4
    # micro-batches, as many as stages (the shipped 16 did not compile within 30 min): the in-flight count
    # that sets the peak is the pipeline's either way
    "qwen3_moe_shipped_mb4": {"source": QMOE, "family": "qwen3_moe", "stages": [0], "layers": None,
                              "recompute": True, "select": False,
                              "set": {"parallel_config.micro_batch_num": 4}},
    "qwen3_32b_l8_tp8_sp_none": {"source": Q32, "family": "qwen3", "stages": [0],
                                 "layers": 8, "recompute": False, "select": False,
                                 "set": {"parallel_config.model_parallel": 8,
                                         "parallel_config.use_seq_parallel": True}},
    "llama2_70b_l8_pp2_none": {"source": L70, "family": "llama2", "stages": [0, 1],
                               "layers": 8, "recompute": False, "select": False, "set": LLAMA_CUT},
    "llama2_70b_l8_pp2_full": {"source": L70, "family": "llama2", "stages": [0, 1],
                               "layers": 8, "recompute": True, "select": False, "set": LLAMA_CUT},
    # held out for the fine-grain interleave (docs/estimate.md "Fine-grain interleave"): the same
    # Llama2-70B cuts with fine_grain_interleave 1 (models/llama/llama.py: plain LLamaDecodeLayer)
    "llama2_70b_l8_pp2_fgi1_none": {"source": L70, "family": "llama2", "stages": [0, 1],
                                    "layers": 8, "recompute": False, "select": False,
                                    "set": {**LLAMA_CUT, "model.model_config.fine_grain_interleave": 1}},
    "llama2_70b_l8_pp2_fgi1_full": {"source": L70, "family": "llama2", "stages": [0, 1],
                                    "layers": 8, "recompute": True, "select": False,
                                    "set": {**LLAMA_CUT, "model.model_config.fine_grain_interleave": 1}},
    # the parallel optimizer's threshold and accumulation shard (docs/estimate.md "The parallel
    # optimizer's threshold and accumulation shard"): the Llama2-70B none cut with a 40000 KB threshold
    # (wq / wo slices at TP4 are 32768 KB, whole 131072 KB: which size MindSpore compares) and with
    # gradient_accumulation_shard on
    "llama2_70b_l8_pp2_shard_th40m_none": {
        "source": L70, "family": "llama2", "stages": [0], "layers": 8, "recompute": False, "select": False,
        "set": {**LLAMA_CUT, "parallel.parallel_optimizer_config.parallel_optimizer_threshold": 40000}},
    "llama2_70b_l8_pp2_shard_accu_none": {
        "source": L70, "family": "llama2", "stages": [0], "layers": 8, "recompute": False, "select": False,
        "set": {**LLAMA_CUT, "parallel.parallel_optimizer_config.gradient_accumulation_shard": True}},
    # micro-batch interleave (legacy: trainer/base_trainer.py wraps MicroBatchInterleaved, each
    # micro-batch holds micro_batch_interleave_num times batch_size rows) and SeqPipe (legacy:
    # SequenceSplit over seq_split_num sequence chunks; MindSpore's seqpipe scheduler needs
    # pipeline_interleave), first stage only
    "llama2_70b_l8_pp2_mbi2_none": {
        "source": L70, "family": "llama2", "stages": [0], "layers": 8, "recompute": False, "select": False,
        "set": {**LLAMA_CUT, "micro_batch_interleave_num": 2}},
    "llama2_70b_l8_pp2_seqpipe_none": {
        "source": L70, "family": "llama2", "stages": [0, 1], "layers": 8, "recompute": False, "select": False,
        "set": {**LLAMA_CUT, "parallel_config.seq_split_num": 2,
                "parallel.pipeline_config.pipeline_interleave": True,
                "parallel.pipeline_config.pipeline_scheduler": "seqpipe"}},
    # select recompute of whole cells on the fine-grain interleaved layer (what plan wrote for the
    # maintainers' Llama2-70B: attention on every layer of a stage, feed_forward on its first)
    **{f"llama2_70b_l8_pp2_sel_{tag}": {"source": L70, "family": "llama2", "stages": [0], "layers": 8,
                                       "recompute": False, "select": sel, "set": LLAMA_CUT}
       for tag, sel in (("attn4_ff1", {"attention": [4, 0], "feed_forward": [1, 0]}),
                        ("ff1", {"feed_forward": [1, 0]}), ("attn4", {"attention": [4, 0]}))},
    "qwen2_5_7b_l8_pp2_none": {"source": Q25, "family": "qwen2_5", "stages": [0, 1],
                               "layers": 8, "recompute": False, "select": False, "set": LEGACY_CUT},
    "qwen2_5_7b_l8_pp2_full": {"source": Q25, "family": "qwen2_5", "stages": [0, 1],
                               "layers": 8, "recompute": True, "select": False, "set": LEGACY_CUT},
    # held out for the legacy calibration (bench/plan.py, tests/test_calibration.py): the Qwen2.5 cut with
    # MindFormers' select set and at half the sequence under full recompute
    "qwen2_5_7b_l8_pp2_select": {"source": Q25, "family": "qwen2_5", "stages": [0, 1],
                                 "layers": 8, "recompute": False, "select": True, "set": LEGACY_CUT},
    "qwen2_5_7b_l8_pp2_s4k_full": {"source": Q25, "family": "qwen2_5", "stages": [0, 1],
                                   "layers": 8, "recompute": True, "select": False,
                                   "set": {**LEGACY_CUT, "model.model_config.seq_length": 4096}},
    # GLM4-9B (legacy ChatGLM2ForConditionalGeneration, glm4.yaml): dp 2 tp 1, 8k sequence, fp32
    # weights, bf16 compute, optimizer shard; the shipped recompute_slice_activation (unmodelled) off
    "glm4_9b_l8_pp2_none": {"source": G4, "family": "glm4", "stages": [0, 1],
                            "layers": 8, "recompute": False, "select": False,
                            "set": {**LEGACY_CUT, "recompute_config.recompute_slice_activation": False}},
    "glm4_9b_l8_pp2_full": {"source": G4, "family": "glm4", "stages": [0, 1],
                            "layers": 8, "recompute": True, "select": False,
                            "set": {**LEGACY_CUT, "recompute_config.recompute_slice_activation": False}},
    # comm recompute and slice activation (docs/estimate.md "Comm recompute and slice activation"): pairs
    # that differ from a case above (or from each other) in that key only; one stage each. Without
    # sequence parallel MindFormers refuses fine_grain_interleave (tools/check_rules.py), so the nosp
    # pair runs the plain LLamaDecodeLayer
    "qwen3_32b_l8_tp8_sp_comm": {"source": Q32, "family": "qwen3", "stages": [0],
                                 "layers": 8, "recompute": False, "select": False,
                                 "set": {"parallel_config.model_parallel": 8,
                                         "parallel_config.use_seq_parallel": True,
                                         "recompute_config.select_comm_recompute": True}},
    "llama2_70b_l8_pp2_full_noslice": {"source": L70, "family": "llama2", "stages": [0],
                                       "layers": 8, "recompute": True, "select": False,
                                       "set": {**LLAMA_CUT, "recompute_config.recompute_slice_activation": False}},
    "llama2_70b_l8_pp2_full_nosp_slice": {"source": L70, "family": "llama2", "stages": [0],
                                          "layers": 8, "recompute": True, "select": False,
                                          "set": {**LLAMA_CUT, "parallel_config.use_seq_parallel": False,
                                                  "model.model_config.fine_grain_interleave": 1,
                                                  "recompute_config.recompute_slice_activation": True}},
    "llama2_70b_l8_pp2_full_nosp_noslice": {"source": L70, "family": "llama2", "stages": [0],
                                            "layers": 8, "recompute": True, "select": False,
                                            "set": {**LLAMA_CUT, "parallel_config.use_seq_parallel": False,
                                                    "model.model_config.fine_grain_interleave": 1,
                                                    "recompute_config.recompute_slice_activation": False}},
    "llama2_70b_l8_pp2_none_comm": {"source": L70, "family": "llama2", "stages": [0],
                                    "layers": 8, "recompute": False, "select": False,
                                    "set": {**LLAMA_CUT, "recompute_config.parallel_optimizer_comm_recompute": True,
                                            "recompute_config.mp_comm_recompute": False}},
    "glm4_9b_l8_pp2_none_comm": {"source": G4, "family": "glm4", "stages": [0],
                                 "layers": 8, "recompute": False, "select": False,
                                 "set": {**LEGACY_CUT, "recompute_config.recompute_slice_activation": False,
                                         "recompute_config.parallel_optimizer_comm_recompute": True}},
    # issue 35 point 5, where the model missed (held out: the estimate is printed before DryRun runs,
    # docs/estimate.md "Issue 35's three shapes"): the 8k sequence at TP8 (sequence parallel, as the TP8
    # cases above) without recompute; sequence parallel at TP4 with MindFormers' select set and select
    # comm recompute; the DeepSeek-V3 shipped layout's first stage (VPP 2, full recompute: the 16-layer
    # case above, stage 0)
    "qwen3_32b_l8_s8k_tp8_sp_none": {"source": Q32, "family": "qwen3", "stages": [0, 3],
                                     "layers": 8, "recompute": False, "select": False,
                                     "set": {"parallel_config.model_parallel": 8,
                                             "parallel_config.use_seq_parallel": True,
                                             "model.model_config.seq_length": 8192,
                                             "model.model_config.max_position_embeddings": 8192,
                                             "train_dataset.data_loader.config.seq_length": 8192}},
    # swap (issue 34 point 4: does graph-mode DryRun L1 simulate swap_config's offload? docs/estimate.md
    # "Swap under DryRun L1"): the mcore swap keys (model_config.cpu_offloading, cpu_offloading_num_layers,
    # op_swap) on the 4k cut (stage 0 peaks at its optimizer step once the layers are swapped) and on the
    # 8k cut (stage 0 activation-bound: 20415 MiB without swap, 11643 under full recompute)
    "qwen3_32b_l8_lswap01": {"source": Q32, "family": "qwen3", "stages": [0], "layers": 8,
                             "recompute": False, "select": False,
                             "set": {**SWAP, "model.model_config.cpu_offloading_num_layers":
                                     [{"backward_prefetch": 1, "layers": [0, 1]}]}},
    "qwen3_32b_l8_s8k_lswap0": {"source": Q32, "family": "qwen3", "stages": [0], "layers": 8,
                                "recompute": False, "select": False,
                                "set": {**S8K, **SWAP, "model.model_config.cpu_offloading_num_layers":
                                        [{"backward_prefetch": 1, "layers": [0]}]}},
    "qwen3_32b_l8_s8k_lswap01": {"source": Q32, "family": "qwen3", "stages": [0], "layers": 8,
                                 "recompute": False, "select": False,
                                 "set": {**S8K, **SWAP, "model.model_config.cpu_offloading_num_layers":
                                         [{"backward_prefetch": 1, "layers": [0, 1]}]}},
    "qwen3_32b_l8_s8k_lswap01_p2": {"source": Q32, "family": "qwen3", "stages": [0], "layers": 8,
                                    "recompute": False, "select": False,
                                    "set": {**S8K, **SWAP, "model.model_config.cpu_offloading_num_layers":
                                            [{"backward_prefetch": 2, "layers": [0, 1]}]}},
    "qwen3_32b_l8_s8k_opswap_mlp": {"source": Q32, "family": "qwen3", "stages": [0], "layers": 8,
                                    "recompute": False, "select": False,
                                    "set": {**S8K, **SWAP, "model.model_config.op_swap":
                                            [{"op_name": "mlp", "backward_prefetch": 1, "layers": True}]}},
    "qwen3_32b_l8_s8k_opswap_attn": {"source": Q32, "family": "qwen3", "stages": [0], "layers": 8,
                                     "recompute": False, "select": False,
                                     "set": {**S8K, **SWAP, "model.model_config.op_swap":
                                             [{"op_name": "self_attention\\.core_attention", "backward_prefetch": 1,
                                               "layers": True}]}},
    # the prefetch distance (backward_prefetch counts kernels: a swapped layer comes back during its own
    # backward): PP2, 4 layers a stage, all swapped, 16k sequence so the activations are above the
    # optimizer step; prefetch 1 and 3
    "qwen3_32b_l8_pp2_s16k_lswap_p1": {"source": Q32, "family": "qwen3", "stages": [0], "layers": 8,
                                       "recompute": False, "select": False,
                                       "set": {"parallel_config.pipeline_stage": 2, **S16K, **SWAP,
                                               "model.model_config.cpu_offloading_num_layers":
                                               [{"backward_prefetch": 1, "layers": [0, 1, 2, 3]}]}},
    "qwen3_32b_l8_pp2_s16k_lswap_p3": {"source": Q32, "family": "qwen3", "stages": [0], "layers": 8,
                                       "recompute": False, "select": False,
                                       "set": {"parallel_config.pipeline_stage": 2, **S16K, **SWAP,
                                               "model.model_config.cpu_offloading_num_layers":
                                               [{"backward_prefetch": 3, "layers": [0, 1, 2, 3]}]}},
    # swap on the legacy path (top-level swap_config; LayerSetting's swap mode): the plain Llama layer cut
    "llama2_70b_l8_pp2_fgi1_lswap01": {"source": L70, "family": "llama2", "stages": [0], "layers": 8,
                                       "recompute": False, "select": False,
                                       "set": {**LLAMA_CUT, "model.model_config.fine_grain_interleave": 1,
                                               "swap_config": {"swap": True, "layer_swap": [
                                                   {"backward_prefetch": 1, "layers": [0, 1]}]}}},
    "llama2_70b_l8_pp2_fgi1_opswap_attn": {"source": L70, "family": "llama2", "stages": [0], "layers": 8,
                                           "recompute": False, "select": False,
                                           "set": {**LLAMA_CUT, "model.model_config.fine_grain_interleave": 1,
                                                   "swap_config": {"swap": True, "op_swap": [
                                                       {"op_name": "attention", "backward_prefetch": 1,
                                                        "layers": True}]}}},
    # SW211 on the maintainers' Llama-3.1-70B finetune (legacy, TP8 PP8, 8k sequence, fine-grain interleave,
    # MindFormers' default select set and select comm recompute on [10, 8, 6, 4, 2, 0, 0, 0] layers a stage):
    # its first stage as shipped (10 layers, all with both select sets, 8 micro-batches in flight), the
    # other stages cut to 2 layers each (24 layers, offset [7, -1, ...]: the 80-layer graph did not compile
    # within 30 min on the shared machine), 8 of the 256 micro-batches (as many as stages: the in-flight
    # count on the first stage is the pipeline's either way); and the same without the select sets
    "llama3_1_70b_s0": {"source": L31, "family": "llama3_1", "stages": [0], "layers": None,
                        "recompute": SHIPPED, "select": SHIPPED,
                        "set": {**L31_STAGE0, "recompute_config.select_recompute": [10, 0, 0, 0, 0, 0, 0, 0],
                                "recompute_config.select_comm_recompute": [10, 0, 0, 0, 0, 0, 0, 0]}},
    "llama3_1_70b_s0_noselect": {"source": L31, "family": "llama3_1", "stages": [0], "layers": None,
                                 "recompute": SHIPPED, "select": False,
                                 "set": {**L31_STAGE0, "recompute_config.select_comm_recompute": False}},
    # the fine-grain interleaved layer under sequence parallel with and without MindFormers' select and
    # select comm sets (docs/estimate.md "Fine-grain interleave"): the Llama-3.1-70B layer (TP8, 8k, fgi 2)
    # on a 4-layer 2-stage cut, 2 micro-batches; the tracker runs of these four found the gathered parts,
    # the copies replacing them and the SiLU-Mul product w2 reads; and the plain layer (fgi 1) beside them
    **{f"llama3_1_70b_l4_pp2_{tag}": {"source": L31, "family": "llama3_1", "stages": [0], "layers": None,
                                      "recompute": SHIPPED, "select": sel,
                                      "set": {**L31_CUT, "recompute_config.select_comm_recompute": comm, **extra}}
       for tag, sel, comm, extra in (("none", False, False, {}), ("select", True, False, {}),
                                     ("comm", False, True, {}), ("select_comm", True, True, {}),
                                     ("fgi1_none", False, False, FGI1), ("fgi1_comm", False, True, FGI1),
                                     ("fgi1_select", True, False, FGI1))},
    # select comm recompute on the plain Qwen2.5 layer (w_qkv, w_gate_hidden: the concat variant of the legacy
    # Llama table), TP8 sequence parallel, 8k: the Qwen2.5-32B finetune's layer on a 4-layer 2-stage cut, 2
    # micro-batches, without and with MindFormers' default select comm set (docs/estimate.md "SeqPipe": the
    # 72B finetune's last miss is this key)
    **{f"qwen2_5_32b_l4_pp2_{tag}": {"source": Q25_32, "family": "qwen2_5", "stages": [0], "layers": None,
                                     "recompute": False, "select": False,
                                     "set": {**L31_CUT, "recompute_config.select_comm_recompute": comm}}
       for tag, comm in (("none", False), ("comm", True), ("comm72", Q25_72_COMM),
                         ("commreshape", {k: v for k, v in Q25_72_COMM.items() if "reshape" in k}))},
    # the maintainers' Llama2-70B pretrain, stage 0 as shipped (10 layers, fine-grain interleave 2, TP4
    # sequence parallel, no recompute, 8 micro-batches in flight), the other stages cut to 2 layers as for
    # Llama-3.1-70B; MindFormers 2.1.0's AdamW for the YAML's FP32StateAdamWeightDecay (LLAMA_CUT)
    "llama2_70b_s0": {"source": L70, "family": "llama2", "stages": [0], "layers": None,
                      "recompute": SHIPPED, "select": SHIPPED,
                      "set": {"optimizer": LLAMA_CUT["optimizer"], **L31_STAGE0}},
    # the maintainer YAMLs the model puts above their card (docs/estimate.md "The maintainer YAMLs above
    # their card"): every layer, width and strategy as shipped, the first stage (the highest predicted),
    # as many micro-batches as stages (the in-flight count that sets the peak is the pipeline's)
    "qwen2_5_14b_8k_mb4": {"source": Q25_14, "family": "qwen2_5", "stages": [0], "layers": None,
                           "recompute": SHIPPED, "select": SHIPPED, "set": {"parallel_config.micro_batch_num": 4}},
    "qwen2_5_32b_8k_mb2": {"source": Q25_32, "family": "qwen2_5", "stages": [0], "layers": None,
                           "recompute": SHIPPED, "select": SHIPPED, "set": {"parallel_config.micro_batch_num": 2}},
    "qwen2_5_14b_128k_mb2": {"source": Q25_128K, "family": "qwen2_5", "stages": [0], "layers": None,
                             "recompute": SHIPPED, "select": SHIPPED, "set": {"parallel_config.micro_batch_num": 2}},
    "qwen2_5_72b_32k_mb8": {"source": Q25_72, "family": "qwen2_5", "stages": [0], "layers": None,
                            "recompute": SHIPPED, "select": SHIPPED, "set": {"parallel_config.micro_batch_num": 8}},
    "qwen3_32b_l8_s8k_tp8_none": {"source": Q32, "family": "qwen3", "stages": [0, 3],
                                  "layers": 8, "recompute": False, "select": False,
                                  "set": {"parallel_config.model_parallel": 8, **S8K}},
    # sequence parallel with select comm recompute on the MoE family (its attention has the same gathered
    # input as Qwen3-32B's, qwen3_moe.yaml; its MoE layer another one)
    "qwen3_moe_l8_sp_comm": {"source": QMOE, "family": "qwen3_moe", "stages": [0, 3], "layers": 8,
                             "recompute": False, "select": False,
                             "set": {"recompute_config.select_comm_recompute": True}},
    # the same, the first stage as shipped and the others cut to 2 layers (the full graphs did not compile
    # within 30 min on the shared machine under load): the offsets give stage 0 its shipped layer count
    "qwen2_5_14b_8k_s0": {"source": Q25_14, "family": "qwen2_5", "stages": [0], "layers": None,
                          "recompute": [3, 0, 0, 0], "select": SHIPPED,
                          "set": {"model.model_config.num_layers": 17, "model.model_config.offset": [7, -2, -2, -2],
                                  "parallel_config.micro_batch_num": 4,
                                  "recompute_config.select_recompute": {p: [11, 0, 0, 0] for p in Q25_SELECT}}},
    "qwen2_5_32b_8k_s0": {"source": Q25_32, "family": "qwen2_5", "stages": [0], "layers": None,
                          "recompute": SHIPPED, "select": SHIPPED,
                          "set": {"model.model_config.num_layers": 33, "model.model_config.offset": [15, -14],
                                  "parallel_config.micro_batch_num": 2}},
    "qwen2_5_14b_128k_s0": {"source": Q25_128K, "family": "qwen2_5", "stages": [0], "layers": None,
                            "recompute": SHIPPED, "select": SHIPPED,
                            "set": {"model.model_config.num_layers": 26, "model.model_config.offset": [11, -11],
                                    "parallel_config.micro_batch_num": 2}},
    "qwen2_5_72b_32k_s0": {"source": Q25_72, "family": "qwen2_5", "stages": [0], "layers": None,
                           "recompute": SHIPPED, "select": SHIPPED,
                           "set": {"model.model_config.num_layers": 24,
                                   "model.model_config.offset": [7, -1, -1, -1, -1, -1, -1, -1],
                                   "parallel_config.micro_batch_num": 8}},
    # held out for SeqPipe (docs/estimate.md "SeqPipe"; not used to build the model): the Qwen2.5-72B 32k
    # finetune's per-layer shape (TP8 PP8 sequence parallel, its select recompute) with 2 layers a stage,
    # seq_split_num 4 instead of 8, 8 micro-batches, and select_comm_recompute off (on the legacy Llama
    # layer it is unmodelled: the record measures SeqPipe alone)
    "qwen2_5_72b_32k_l16_split4": {"source": Q25_72, "family": "qwen2_5", "stages": [0, 7, 3], "layers": 16,
                                   "recompute": SHIPPED, "select": SHIPPED,
                                   "set": {"parallel_config.seq_split_num": 4, "parallel_config.micro_batch_num": 8,
                                           "recompute_config.select_comm_recompute": False}},
    # the r1.5.0 maintainer YAMLs above their pool, single-stage (DP only): every layer, width and strategy
    # as shipped; the one edit each needs on 2.1.0 is the optimizer (adamw above); GLM3 also reads its
    # multi-turn data through ToolAlpacaDataLoader and MultiTurnDataset (which needs the tokenizer's
    # files), neither of which the harness can mock: MindDataset and CausalLanguageModelDataset instead
    # (dryrun_child.py: legacy_mock_loader feeds input_ids and labels of seq_length, as both do)
    "llama2_7b_finetune_r150_shipped": {"source": L7_R15, "family": "llama2", "stages": [0], "layers": None,
                                        "recompute": SHIPPED, "select": SHIPPED,
                                        "set": adamw([0.9, 0.999], 1.e-6)},
    "llama2_13b_pretrain_r150_shipped": {"source": L13P_R15, "family": "llama2", "stages": [0], "layers": None,
                                         "recompute": SHIPPED, "select": SHIPPED,
                                         "set": adamw([0.9, 0.95], 1.e-4)},
    "llama2_13b_finetune_r150_shipped": {"source": L13F_R15, "family": "llama2", "stages": [0], "layers": None,
                                         "recompute": SHIPPED, "select": SHIPPED,
                                         "set": adamw([0.9, 0.95], 1.e-5)},
    "qwen1_5_7b_finetune_r150_shipped": {"source": Q15_7F_R15, "family": "qwen1_5", "stages": [0], "layers": None,
                                         "recompute": SHIPPED, "select": SHIPPED,
                                         "set": adamw([0.9, 0.95], 1.e-6, 0.01)},
    "glm3_6b_multiturn_r150_shipped": {"source": GLM3_R15, "family": "glm3", "stages": [0], "layers": None,
                                       "recompute": SHIPPED, "select": SHIPPED,
                                       "set": {**adamw([0.9, 0.999], 1.e-4),
                                               "train_dataset.data_loader": {"type": "MindDataset",
                                                                             "dataset_dir": "", "shuffle": True},
                                               "train_dataset_task.type": "CausalLanguageModelDataset",
                                               # as shipped (use_clip_grad False) DryRun stopped at the first
                                               # step: "AnyTypeKernelActor failed to generate id", a Float64
                                               # PyExecute output of MFTrainOneStepCell (wrapper/wrapper.py:
                                               # construct returns global_norm None without the clip); every
                                               # recorded case clips. Not yet run with this edit
                                               "runner_wrapper.use_clip_grad": True}},
    # the single-stage r1.5.0 Qwen1.5 pretrains (TP8 SP 32k without recompute; DP4 TP4 SP 32k, micro-batch
    # interleave 2, full recompute): as shipped; the 7B's optimizer as above, the 14B's AdamW is 2.1.0's
    "qwen1_5_7b_pretrain_r150_shipped": {"source": Q15_7P_R15, "family": "qwen1_5", "stages": [0], "layers": None,
                                         "recompute": SHIPPED, "select": SHIPPED,
                                         "set": adamw([0.9, 0.95], 1.e-6, 0.01)},
    "qwen1_5_14b_pretrain_r150_shipped": {"source": Q15_14P_R15, "family": "qwen1_5", "stages": [0],
                                          "layers": None, "recompute": SHIPPED, "select": SHIPPED},
    # the legacy MoE YAMLs (LlamaForCausalLM with moe_config: MoEV2 / TopkRouterV2, the same classes in
    # r1.5.0 and 2.1.0): the stage the model predicts highest with its shipped layers, the other stages
    # cut to 1-2 layers (LayerSetting: avg = num_layers // pp, plus the offset), as many micro-batches as
    # stages (the peak stage's in-flight count is the pipeline's either way)
    "qwen2_57b_pretrain_r150_s3": {"source": Q2_57P_R15, "family": "qwen2_moe", "stages": [3], "layers": None,
                                   "recompute": SHIPPED, "select": SHIPPED,
                                   "set": {"model.model_config.num_layers": 10,
                                           "model.model_config.offset": [-1, -1, -1, 5],
                                           "parallel_config.micro_batch_num": 4}},
    "qwen2_57b_finetune_r150_s1": {"source": Q2_57F_R15, "family": "qwen2_moe", "stages": [1], "layers": None,
                                   "recompute": SHIPPED, "select": SHIPPED,
                                   "set": {"model.model_config.num_layers": 16,
                                           "model.model_config.offset": [-6, 6],
                                           "parallel_config.micro_batch_num": 2}},
    "mixtral_8x7b_finetune_r160_s0": {"source": MIX_R16, "family": "mixtral", "stages": [0], "layers": None,
                                      "recompute": SHIPPED, "select": SHIPPED,
                                      "set": {"model.model_config.num_layers": 18,
                                              "model.model_config.offset": [7, -7],
                                              "parallel_config.micro_batch_num": 2}},
    "qwen3_32b_l8_tp4_sp_select_comm": {"source": Q32, "family": "qwen3", "stages": [0, 3],
                                        "layers": 8, "recompute": False, "select": True,
                                        "set": {"parallel_config.use_seq_parallel": True,
                                                "recompute_config.select_comm_recompute": True}},
}


def setdotted(tree: Dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node = tree
    for k in parts[:-1]:
        node = node.setdefault(k, {})
    node[parts[-1]] = value


def derive(name: str, case: Dict[str, Any]) -> Path:
    """Write the case's YAML; returns its path."""
    data = yaml.safe_load((REPO / case["source"]).read_text(encoding="utf-8"))
    mc = data["model"]["model_config"]
    layer_key = "num_hidden_layers" if "num_hidden_layers" in mc else "num_layers"
    if case.get("layers"):
        mc[layer_key] = case["layers"]
        mc["offset"] = 0
    rc = data.setdefault("recompute_config", {})
    if case["recompute"] != SHIPPED:
        rc["recompute"] = case["recompute"]
    if case["select"] != SHIPPED:
        rc["select_recompute"] = case["select"]
    for key, value in case.get("set", {}).items():
        setdotted(data, key, value)
    pc = data["parallel_config"]
    dp = pc.get("data_parallel", 1)
    if data.get("parallel", {}).get("dataset_strategy"):
        data["parallel"]["dataset_strategy"] = [[dp] + list(s[1:]) for s in data["parallel"]["dataset_strategy"]]
    path = CASES_DIR / f"{name}.yaml"
    header = (f"# DryRun case {name} (tools/dryrun/record_cases.py): {case['source']} with {describe(case)}.\n"
              f"# Run through MindSpore DryRun as is; its peaks are in {name}.json.\n")
    path.write_text(header + yaml.safe_dump(data, sort_keys=False, width=120), encoding="utf-8")
    return path


def describe(case: Dict[str, Any]) -> str:
    parts = [f"{case['layers']} layers (offset 0)" if case.get("layers") else "all layers (as shipped)",
             f"recompute {case['recompute']}",
             f"select_recompute {case['select']}"]
    parts += [f"{k.rsplit('.', 1)[-1]} {v.get('type', v) if isinstance(v, dict) else v}"
              for k, v in case.get("set", {}).items()
              if not k.startswith("train_dataset") and "max_position" not in k]
    return ", ".join(parts)


def versions() -> Dict[str, str]:
    from swapwatch.memory.dryrun import _python

    out = subprocess.run([_python(), "-c", "import importlib.metadata as m; "
                          "print(m.version('mindspore'), m.version('mindformers'))"],
                         capture_output=True, text=True, check=True).stdout.split()
    return {"mindspore": out[0], "mindformers": out[1]}


def _write(name: str, path: Path, rank_size: int, stage: Dict[str, Any]) -> None:
    """Add one measured stage to the case's .json (the stages already there are kept)."""
    case = CASES[name]
    js = CASES_DIR / f"{name}.json"
    done: Dict[int, Dict[str, Any]] = {}
    if js.exists():
        done = {s["stage"]: s for s in json.loads(js.read_text(encoding="utf-8"))["stages"]}
    done[stage["stage"]] = stage
    out = {"yaml": path.name, "source": case["source"], "derived": describe(case), "family": case["family"],
           "rank_size": rank_size, "stages": [done[s] for s in sorted(done)], **versions()}
    js.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(name, stage["stage"], stage["used_peak_mib"], stage["seconds"], flush=True)


def record(name: str, stages: Optional[List[int]] = None, timeout: float = 1800) -> None:
    """Run the case's stages one at a time and rewrite its .json after each (a full-size stage takes
    minutes to an hour: a stage finished is kept when a later one fails or is stopped); a stage
    already in the .json is run again only when asked for by --stage."""
    from swapwatch.memory.dryrun import MIB, measure

    case = CASES[name]
    path = derive(name, case)
    js = CASES_DIR / f"{name}.json"
    if js.exists() and stages is None:
        js.unlink()
    for stage in stages if stages is not None else case["stages"]:
        res = measure(str(path), [stage], timeout=timeout, work_dir=f"/tmp/swapwatch-dryrun-record/{name}")
        p = res.stages[stage]
        _write(name, path, res.rank_size, {"stage": p.stage, "rank_id": p.rank_id,
                                           "used_peak_mib": p.used_bytes // MIB,
                                           "actual_peak_mib": p.actual_bytes // MIB, "seconds": p.seconds})


def adopt(name: str, stage: int, ran: str, log: str, seconds: float) -> None:
    """Record a stage from a DryRun already run by hand (``--adopt RAN.yaml LOG SECONDS``): the case's
    derived YAML must hold exactly what RAN.yaml held (the same mapping once parsed: DryRun is
    deterministic, so its peaks are the case's), and LOG must be that run's log (the two peak lines)."""
    from swapwatch.memory.dryrun import MIB, rank_layout, read_peaks

    path = derive(name, CASES[name])
    if yaml.safe_load(path.read_text(encoding="utf-8")) != yaml.safe_load(Path(ran).read_text(encoding="utf-8")):
        raise SystemExit(f"{name}: {ran} is not the case's YAML ({path}): not adopted")
    used, actual = read_peaks(Path(log).read_text(encoding="utf-8", errors="replace"))
    if used is None or actual is None:
        raise SystemExit(f"{name}: {log} has no peak lines: not adopted")
    rank_size, pp = rank_layout(str(path))
    _write(name, path, rank_size, {"stage": stage, "rank_id": stage * (rank_size // pp),
                                   "used_peak_mib": used // MIB, "actual_peak_mib": actual // MIB,
                                   "seconds": seconds})


def compare(names: List[str]) -> None:
    """Markdown rows: case, stage, the uncalibrated estimate, DryRun L1's used peak, the error."""
    from swapwatch.errors import NotModelled
    from swapwatch.memory.dryrun import MIB
    from swapwatch.memory.model import estimate

    for name in names:
        data = json.loads((CASES_DIR / f"{name}.json").read_text(encoding="utf-8"))
        try:
            est = estimate(str(CASES_DIR / data["yaml"]))
        except NotModelled:
            # a record of what the estimate refuses (legacy MoE): DryRun's peak beside no figure
            for st in data["stages"]:
                print(f"| {name} | {st['stage']} | refused | {st['used_peak_mib']} MiB | - |")
            continue
        for st in data["stages"]:
            pred = est.stages[st["stage"]].peak() / MIB
            used = st["used_peak_mib"]
            print(f"| {name} | {st['stage']} | {pred:.0f} MiB | {used} MiB | {100 * (pred - used) / used:+.1f} % |")


def main(argv: list) -> int:
    CASES_DIR.mkdir(parents=True, exist_ok=True)
    force = "--force" in argv
    if "--compare" in argv:
        compare([a for a in argv if not a.startswith("--")])
        return 0
    if "--list" in argv:
        for name, case in CASES.items():
            print(f"{name}: {case['source']}: {describe(case)}; stages {case['stages']}")
        return 0
    if "--adopt" in argv:                 # NAME --stage S --adopt RAN.yaml LOG SECONDS
        i = argv.index("--adopt")
        adopt(argv[0], int(argv[argv.index("--stage") + 1]), argv[i + 1], argv[i + 2], float(argv[i + 3]))
        return 0
    stages = [int(argv[i + 1]) for i, a in enumerate(argv) if a == "--stage"] or None
    timeout = float(argv[argv.index("--timeout") + 1]) if "--timeout" in argv else 1800.0
    argv = [a for i, a in enumerate(argv)
            if a not in ("--stage", "--timeout") and (i == 0 or argv[i - 1] not in ("--stage", "--timeout"))]
    names = [a for a in argv if not a.startswith("--")] or \
        [n for n in CASES if force or not (CASES_DIR / f"{n}.json").exists()]
    for name in names:
        if name not in CASES:
            print(f"unknown case {name!r}", file=sys.stderr)
            return 2
        if "--derive-only" in argv:
            derive(name, CASES[name])
            continue
        record(name, stages, timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
