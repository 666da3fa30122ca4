"""Training YAMLs of real model families to build with real MindFormers 2.1.0 (oracle tier).

Each case starts from a maintainer YAML of the MindFormers repository (``fixtures/configs/
mindformers``) and sets a small layer count, the pipeline, and a recompute / swap strategy, on the
mcore path the way MindFormers 2.1.0 reads it (swap keys in ``model.model_config``). The hand-written
cases cover the families' facts (defaults per layer kind, MTP, the ignored
top-level swap_config, 'Auto' prefetch, conflicts, refused configs); the generator draws random
runnable strategies over patterns that reach prims, cells, several layer kinds, or nothing.
Patterns that reach a preset or shared primitive crash the build: those are hand cases (SW207).
"""
import os
import random
from typing import Any, Dict, List

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MF = os.path.join(ROOT, "fixtures", "configs", "mindformers")
BASES = {
    "qwen3": "pretrain_qwen3_32b_4k.yaml",
    "qwen3_moe": "pretrain_qwen3_30b_a3b_4k.yaml",
    "deepseek_v3": "pretrain_deepseek3_671b.yaml",
    "glm4": "finetune_glm4_9b.yaml",
    "telechat3": "pretrain_telechat3_36b.yaml",
    "llama2_70b": "pretrain_llama2_70b.yaml",
    "qwen2_5": "finetune_qwen2_5_7b_8k.yaml",
}
#: families on the legacy path (built in their own oracle process: use_legacy is process-wide)
LEGACY = {"glm4", "llama2_70b", "qwen2_5"}

SELECT_POOL = [r"mlp\.mul", r"mlp\.activation_func\.silu", r"mlp\.linear_fc1", r"self_attention\.core_attention",
               r"input_layernorm", r"self_attention\.linear_proj", r"mlp\.shared_experts", r"mlp\.experts",
               r"mlp\.shared_experts\.linear_fc2\.matmul", r"self_attention\.q_layernorm\.norm", r"nothing\.here",
               r"mlp\.linear_fc[12]", r"mlp\.activation_func", r"eh_proj", r"transformer_layer\.mlp",
               r"self_attention\.core_attention\.flash_attention"]
COMM_POOL = [r".*\.norm", r"input_layernorm\.norm", r"self_attention\.k_layernorm\.norm", r"pre_mlp_layernorm",
             r"mlp\.linear_fc2\.matmul"]
SWAP_POOL = [r"self_attention\.core_attention", r".*\.flash_attention", r"mlp", r"mlp\.linear_fc2",
             r"self_attention\.core_attention\.flash_attention", r"nothing", r"input_layernorm\.norm"]

HAND: List[Dict[str, Any]] = [
    # defaults per layer kind: dense Qwen3 reaches mlp.mul/silu, Qwen3-MoE nothing, DeepSeek-V3 both + MTP
    dict(family="qwen3", layers=3, recompute_config={"recompute": [1], "select_recompute": True}),
    dict(family="qwen3_moe", layers=2, recompute_config={"select_recompute": True, "select_comm_recompute": True}),
    dict(family="deepseek_v3", layers=3, model_config={"first_k_dense_replace": 1},
         recompute_config={"select_recompute": True, "select_comm_recompute": True}),
    # the MTP block: full recompute of the last layer applies twice (decoder layer and MTP layer)
    dict(family="deepseek_v3", layers=4, pipeline_stage=2, model_config={"first_k_dense_replace": 2},
         recompute_config={"recompute": [0, 1], "select_recompute": [1, 1]}),
    # swap on mcore: model_config keys, aliases, 'Auto' prefetch, conflicts with recompute
    dict(family="qwen3", layers=3, recompute_config={"recompute": [0]},
         model_config={"cpu_offloading": True,
                       "cpu_offloading_num_layers": [{"backward_prefetch": 1, "layers": [0, 2]}],
                       "op_swap": [{"op_name": r"self_attention\.core_attention", "backward_prefetch": "Auto",
                                    "layers": True}]}),
    dict(family="qwen3", layers=3, recompute_config={"select_recompute": {r"mlp\.linear_fc1": [1]}},
         model_config={"swap": True, "layer_swap": [{"backward_prefetch": 2, "layers": [1]}],
                       "op_swap": {"op_name": r"mlp\.linear_fc1", "backward_prefetch": 1, "layers": [1, 2]}}),
    # the default op swap '.*\.flash_attention' reaches nothing on an mcore layer
    dict(family="deepseek_v3", layers=3, model_config={"first_k_dense_replace": 1, "cpu_offloading": True},
         recompute_config={"recompute": True}),
    # a top-level swap_config is ignored (SW306): recompute lists keep their counts meaning
    dict(family="qwen3", layers=4, recompute_config={"recompute": [2]}, swap_config={"swap": True}),
    # check_rules' per-stage length rule applies to layer-id lists on mcore (refused)
    dict(family="qwen3", layers=4, recompute_config={"recompute": [1, 2]}, model_config={"cpu_offloading": True}),
    # a 2-D list with cpu_offloading passes check_rules and fails inside LayerSetting (refused)
    dict(family="qwen3", layers=4, recompute_config={"recompute": [[1]]}, model_config={"cpu_offloading": True}),
    # legacy GLM4 (ChatGLM2Block): its own tree
    dict(family="glm4", layers=2, recompute_config={"select_recompute": [r"mlp\.activation_func"],
                                                    "select_comm_recompute": True}),
    # legacy Llama maintainer YAMLs with their own strategy: Qwen2.5 (qkv bias), and with qkv_concat
    # True (fused w_qkv / w_gate_hidden: the feed_forward\.w1 patterns reach nothing there)
    dict(family="qwen2_5", layers=4, pipeline_stage=2, recompute_config=None),
    dict(family="qwen2_5", layers=16, pipeline_stage=2, recompute_config=None, model_config={"qkv_concat": True}),
    dict(family="llama2_70b", layers=4, pipeline_stage=2,
         recompute_config={"recompute": [1, 0], "select_recompute": True, "select_comm_recompute": True}),
    # structural variants: legacy Llama without flash attention (swap on: the default op swap
    # reaches nothing), DeepSeek-V3 with q_lora_rank null
    dict(family="llama2_70b", layers=2, model_config={"use_flash_attention": False},
         recompute_config={"select_recompute": {r"attention\.wo": [1]}}, swap_config={"swap": True}),
    dict(family="deepseek_v3", layers=3, model_config={"first_k_dense_replace": 1, "q_lora_rank": None},
         recompute_config={"select_recompute": [r"self_attention\.linear_q_proj"], "select_comm_recompute": True}),
    # TeleChat3 (mcore, dense)
    dict(family="telechat3", layers=2, recompute_config={"select_recompute": True}),
    # exclude keys on mcore
    dict(family="qwen3", layers=2, recompute_config={"recompute": True,
                                                     "select_recompute_exclude": {r"self_attention\.core_attention\.flash_attention": True}}),
]

#: cases whose build crashes in MindSpore (SW207), with the primitive the finding must name
CRASH: List[Dict[str, Any]] = [
    dict(family="qwen3_moe", layers=2, recompute_config={"select_recompute": [r"mlp\.experts\.swiglu"]},
         primitive="mlp.experts.swiglu"),
    dict(family="deepseek_v3", layers=3, model_config={"first_k_dense_replace": 1},
         recompute_config={"select_recompute": [r"mlp\.router\.gating_activation"]},
         primitive="mlp.router.gating_activation"),
]


def random_cases(n: int, seed: int = 11) -> List[Dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        family = rng.choice(["qwen3", "qwen3_moe", "deepseek_v3", "qwen3", "deepseek_v3"])
        layers = rng.randint(2, 5)
        pp = rng.choice([1, 1, 2]) if layers >= 2 else 1
        swap = rng.random() < 0.4
        mc: Dict[str, Any] = {}
        if family == "deepseek_v3":
            mc["first_k_dense_replace"] = rng.randint(0, layers - 1)
        rc: Dict[str, Any] = {}

        def ids():
            return sorted(rng.sample(range(layers), rng.randint(0, layers)))  # noqa: B023 - called within this iteration

        def counts():
            return [rng.randint(0, layers) for _ in range(pp)]  # noqa: B023 - called within this iteration

        r = rng.random()
        if r < 0.25:
            rc["recompute"] = rng.choice([True, False])
        elif r < 0.6:
            rc["recompute"] = ids()[:pp] if swap else counts()
        if rng.random() < 0.7:
            pats = rng.sample(SELECT_POOL, rng.randint(1, 3))
            form = rng.random()
            if form < 0.3:
                rc["select_recompute"] = True
            elif form < 0.6:
                rc["select_recompute"] = pats
            else:
                rc["select_recompute"] = {p: (ids() if swap else rng.choice([True, counts()])) for p in pats}
        if rng.random() < 0.4:
            rc["select_comm_recompute"] = rng.choice([True, rng.sample(COMM_POOL, 2)])
        if swap:
            mc["cpu_offloading" if rng.random() < 0.5 else "swap"] = True
            if rng.random() < 0.5:
                mc["cpu_offloading_num_layers"] = [{"backward_prefetch": rng.randint(1, 3), "layers": ids() or [0]}]
            if rng.random() < 0.6:
                mc["op_swap"] = [{"op_name": p, "backward_prefetch": rng.choice([1, 2, "Auto"]),
                                  "layers": rng.choice([True, ids() or [0]])}
                                 for p in rng.sample(SWAP_POOL, rng.randint(1, 2))]
        out.append(dict(family=family, layers=layers, pipeline_stage=pp, recompute_config=rc, model_config=mc))
    return out


def write_yaml(case: Dict[str, Any], path: str) -> str:
    """The case as a whole training YAML (its maintainer YAML with the case's settings)."""
    with open(os.path.join(MF, BASES[case["family"]]), encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    mc = data["model"]["model_config"]
    for key in ("num_layers", "num_hidden_layers"):
        if key in mc:
            mc[key] = case["layers"]
    mc["offset"] = 0
    mc["pp_interleave_num"] = 1
    for key in ("cpu_offloading", "swap", "op_swap", "cpu_offloading_num_layers", "layer_swap"):
        mc.pop(key, None)
    mc.update(case.get("model_config") or {})
    pp = case.get("pipeline_stage", 1)
    data["parallel_config"]["pipeline_stage"] = pp
    data["parallel_config"]["micro_batch_num"] = max(pp, 1)
    data.setdefault("parallel", {})["pipeline_config"] = {"pipeline_interleave": False, "pipeline_scheduler": "1f1b"}
    if case.get("recompute_config", {}) is not None:        # None: the maintainer YAML's own strategy
        data["recompute_config"] = case.get("recompute_config") or {"recompute": False}
    if "swap_config" in case:
        data["swap_config"] = case["swap_config"]
    else:
        data.pop("swap_config", None)
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(data, fh, sort_keys=False)
    return path
