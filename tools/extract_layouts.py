"""Extract every model family's decoder-layer trees from the real MindFormers 2.1.0 classes.

Run with the oracle venv's python (real MindFormers 2.1.0 + MindSpore 2.10 CPU), never with swapwatch's:

    .oracle-venv/bin/python tools/extract_layouts.py            # rewrite swapwatch/layouts/<family>.yaml
    .oracle-venv/bin/python tools/extract_layouts.py --check    # exit 1 when a stored layout drifted
    .oracle-venv/bin/python tools/extract_layouts.py --one NAME # one family, as JSON on stdout

Why: what a recompute / swap pattern reaches depends on the real cell tree of the layer MindFormers
builds (its ``_cells`` order, the primitives ``dir()`` lists, which primitives are preset or shared),
and a hand-drawn tree goes stale silently. This tool builds each family at tiny size on CPU the way
``BaseTrainer.create_network`` does (``mindformers/trainer/base_trainer.py:create_network``), wraps
``LayerSetting.__call__`` (``parallel_core/training_graph/transformer/utils.py``) to see every layer
object it is given with its layer id, and writes each distinct layer tree (dense, MoE, MTP) as data:

* every sub-cell in ``_cells`` order and every primitive in ``dir()`` order;
* ``preset``: primitives (and cells) already marked ``recompute`` when the layer was built, which a
  select pattern must not touch again (MindSpore allows ``Primitive.recompute`` once);
* ``shared``: primitive paths whose object is the same in every layer (module-level primitives),
  which crash the build at the second layer when a select pattern reaches them.

Each family is built in a fresh process (MindSpore lets recompute be set once per cell, and the
``use_legacy`` context is process-wide). Sizes that do not change the tree are shrunk; structural
flags are kept as the maintainer YAML has them, or set per variant below.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = os.path.join(ROOT, "swapwatch", "layouts")
MARK = "@@SWAPWATCH_LAYOUT@@"

# ---- what to build ---------------------------------------------------------------------------
# A family is built from a maintainer YAML shipped in the wheel (``site-packages/configs``) or,
# for legacy Llama whose YAMLs are not packaged, from a minimal legacy config. ``set`` overrides
# model_config keys (structural variants); ``layers`` is how many decoder layers the tiny build
# gets (enough for every layer kind: DeepSeek-V3's first_k_dense_replace dense layers + MoE).

_LLAMA = {
    "use_legacy": True,
    "model": {"model_config": {"type": "LlamaConfig", "batch_size": 1, "seq_length": 32, "hidden_size": 64,
                               "num_layers": 2, "num_heads": 4, "vocab_size": 256, "multiple_of": 32,
                               "rms_norm_eps": 1.0e-5, "use_flash_attention": True, "qkv_concat": False,
                               "qkv_has_bias": False, "compute_dtype": "bfloat16",
                               "layernorm_compute_type": "float32", "softmax_compute_type": "float32",
                               "rotary_dtype": "float32", "param_init_type": "float32"},
              "arch": {"type": "LlamaForCausalLM"}},
    "parallel_config": {"data_parallel": 1, "model_parallel": 1, "pipeline_stage": 1},
    "context": {"mode": 0, "device_target": "CPU"},
    "parallel": {},
}

FAMILIES = {
    "llama": {"config": _LLAMA, "set": {},
              "about": "legacy LlamaForCausalLM, qkv_concat False (Llama 2/3 maintainer YAMLs)"},
    "llama_qkv_concat": {"config": _LLAMA, "set": {"qkv_concat": True},
                         "about": "legacy LlamaForCausalLM, qkv_concat True (fused w_qkv and w_gate_hidden)"},
    "llama_qkv_concat_bias": {"config": _LLAMA, "set": {"qkv_concat": True, "qkv_has_bias": True},
                              "about": "legacy LlamaForCausalLM, qkv_concat True with qkv bias (Qwen2/2.5)"},
    "llama_qkv_bias": {"config": _LLAMA, "set": {"qkv_has_bias": True},
                       "about": "legacy LlamaForCausalLM, qkv_concat False with qkv bias"},
    "glm4": {"config": "configs/glm4/finetune_glm4_9b.yaml", "set": {"num_layers": 2},
             "about": "legacy ChatGLM2ForConditionalGeneration (GLM4 YAMLs)"},
    "qwen3": {"config": "configs/qwen3/pretrain_qwen3_32b_4k.yaml", "set": {"num_hidden_layers": 2},
              "about": "mcore Qwen3 (model_type qwen3)"},
    "qwen3_moe": {"config": "configs/qwen3_moe/pretrain_qwen3_30b_a3b_4k.yaml", "set": {"num_hidden_layers": 2},
                  "about": "mcore Qwen3-MoE (model_type qwen3_moe)"},
    "deepseek_v3": {"config": "configs/deepseek3/pretrain_deepseek3_671b.yaml", "set": {"first_k_dense_replace": 1,
                                                                                     "num_hidden_layers": 3},
                    "about": "mcore DeepSeek-V3 (MLA, MoE with shared experts, MTP)"},
    "telechat3": {"config": "configs/telechat3/pretrain_telechat3_36b.yaml", "set": {"num_hidden_layers": 2},
                  "about": "mcore TeleChat3 (model_type telechat3)"},
    # DeepSeek-V3 without the query LoRA (q_lora_rank null): linear_q_proj instead of q_down/q_up
    "deepseek_v3_no_q_lora": {"config": "configs/deepseek3/pretrain_deepseek3_671b.yaml",
                              "set": {"first_k_dense_replace": 1, "num_hidden_layers": 3, "q_lora_rank": None},
                              "about": "mcore DeepSeek-V3 with q_lora_rank null (one linear_q_proj)"},
}
# The legacy Llama layer without flash attention has no attention.flash_attention cell (the
# default op swap '.*\.flash_attention' reaches nothing there); mcore layers keep the same tree.
for _name in ("llama", "llama_qkv_concat", "llama_qkv_concat_bias", "llama_qkv_bias"):
    FAMILIES[_name + "_noflash"] = {"config": _LLAMA, "set": dict(FAMILIES[_name]["set"], use_flash_attention=False),
                                    "about": FAMILIES[_name]["about"] + ", use_flash_attention False"}

#: model_config sizes shrunk for the tiny build (they change shapes, never the cell tree)
SHRINK = {"hidden_size": 64, "num_attention_heads": 4, "num_heads": 4, "num_key_value_heads": 2, "n_kv_heads": 2,
          "multi_query_group_num": 2, "kv_channels": 16, "head_dim": 16, "intermediate_size": 128,
          "ffn_hidden_size": 128, "moe_intermediate_size": 32, "moe_ffn_hidden_size": 32,
          "moe_shared_expert_intermediate_size": 32, "vocab_size": 256, "padded_vocab_size": 256,
          "max_position_embeddings": 64, "q_lora_rank": 32, "kv_lora_rank": 16,
          "qk_nope_head_dim": 16, "qk_rope_head_dim": 16, "v_head_dim": 16, "qk_head_dim": 16,
          "n_routed_experts": 4, "num_experts": 4, "expert_num": 4, "num_moe_experts": 4, "num_experts_per_tok": 2,
          "moe_router_topk": 2, "n_group": 1, "topk_group": 1, "moe_router_num_groups": 1,
          "moe_router_group_topk": 1, "batch_size": 1}


# ---- one build (runs in the oracle venv) ---------------------------------------------------

def _env() -> None:
    os.environ.setdefault("LOG_MF_PATH", os.path.join(os.environ.get("TMPDIR", "/tmp"), "swapwatch_extract_logs"))
    os.environ.setdefault("GLOG_v", "3")
    import numpy as np
    np.set_printoptions(legacy="1.25")   # numpy-1 reprs in the logged lists, as on a real install


def tiny_config(src, overrides=None, keep_strategy=False):
    """A MindFormerConfig of ``src`` (a YAML path or a config dict) with the sizes that do not
    change the layer tree shrunk (:data:`SHRINK`) and ``overrides`` set in model_config. Unless
    ``keep_strategy``, the YAML's recompute / swap settings are dropped and the pipeline is one
    stage, so the layers are read as built."""
    _env()
    from mindformers.tools.register import MindFormerConfig

    cfg = MindFormerConfig(src) if isinstance(src, str) else MindFormerConfig(**copy.deepcopy(src))
    mc = cfg.model.model_config
    for key, value in SHRINK.items():
        if key in mc and mc[key] is not None:
            mc[key] = value
    for key, value in (overrides or {}).items():
        mc[key] = value
    if not keep_strategy:
        mc["offset"] = 0
        mc["pp_interleave_num"] = 1
        cfg.recompute_config = {"recompute": False}
        cfg.swap_config = {"swap": False}
        for key in ("cpu_offloading", "swap", "op_swap", "cpu_offloading_num_layers", "layer_swap"):
            mc.pop(key, None)
        cfg.parallel_config.pipeline_stage = 1
    return cfg


def build(cfg):
    """Build ``cfg``'s network on CPU as ``BaseTrainer.create_network`` does (reference recipe in
    the module docstring); return (network, [(LayerSetting instance id, layer id, layer)]).
    MindFormers' own errors (config classes, check_rules, LayerSetting) propagate."""
    _env()
    import mindspore as ms
    from mindspore import Tensor
    from mindspore.nn.utils import no_init_parameters
    from mindformers.core.context.build_context import build_context
    from mindformers.core.parallel_config import build_parallel_config
    from mindformers.tools.check_rules import _check_recompute, _check_swap
    from mindformers.models.build_model import build_network
    from mindformers.parallel_core.training_graph.transformer import utils as tu

    # step 1: a CPU, single-process copy of the config sets MindFormers' context (use_legacy included)
    ctx_cfg = copy.deepcopy(cfg)
    ctx_cfg.use_parallel = False
    ctx_cfg.context.device_target = "CPU"
    ctx_cfg.context.mode = 0
    for key in ("ascend_config", "max_device_memory", "device_id"):
        ctx_cfg.context.pop(key, None)
    build_context(ctx_cfg)
    ms.set_device("CPU")
    # step 2: the trainer's parallel config and check_rules, in that order
    pipe = (cfg.get("parallel") or {}).get("pipeline_config") or {}
    ms.set_auto_parallel_context(pipeline_stages=(cfg.parallel_config or {}).get("pipeline_stage", 1) or 1,
                                 pipeline_config={"pipeline_interleave": bool(pipe.get("pipeline_interleave")),
                                                  "pipeline_scheduler": pipe.get("pipeline_scheduler", "1f1b")})
    build_parallel_config(cfg)
    _check_recompute(cfg)
    _check_swap(cfg)
    # step 3: groups one CPU process cannot create; they do not reach LayerSetting
    for key, value in (("model_parallel", 1), ("expert_parallel", 1), ("context_parallel", 1),
                       ("use_seq_parallel", False)):
        setattr(cfg.parallel_config, key, value)
    # step 5: MindSpore's one-time numpy C-API import fails under numpy 2 and leaves a Python
    # exception pending, which surfaces in the first eager op (GenerationMixin.__init__'s
    # ``Tensor([0], bfloat16).reshape(1, 1)``). Triggering it once here absorbs it; every later
    # eager op, and every layer, is built unchanged.
    with contextlib.suppress(SystemError, ImportError):
        Tensor([0], dtype=ms.bfloat16).reshape(1, 1)
    # step 6: see every layer LayerSetting sets, with its id and which LayerSetting instance
    seen = []
    orig_call = tu.LayerSetting.__call__

    def call(self, layer, layer_id):
        out = orig_call(self, layer, layer_id)
        seen.append((id(self), layer_id, layer))
        return out

    tu.LayerSetting.__call__ = call
    default_args = {"parallel_config": cfg.parallel_config, "moe_config": cfg.moe_config,
                    "dataset_config": cfg.train_dataset, "calculate_per_token_loss": False, "batch_size": 1}
    try:
        with no_init_parameters():
            net = build_network(cfg.model, default_args=default_args)
    finally:
        tu.LayerSetting.__call__ = orig_call
    return net, seen


def cell_recomputed(cell) -> bool:
    """Has ``Cell.recompute()`` been called on ``cell`` (MindSpore 2.10 records it in
    ``_has_config_recompute``)?"""
    return bool(cell.__dict__.get("_has_config_recompute"))


def layer_state(layer):
    """What LayerSetting (or construction) set on one layer, by dotted path: primitives'
    ``recompute`` and ``recompute_comm_op`` attributes, ``offload`` prefetches, and the cells
    ``recompute()`` was called on ("" is the layer itself). For the oracle's per-layer check."""
    from mindspore import ops

    out = {"recompute": {}, "comm": {}, "offload": {}, "cells": []}

    def visit(cell, prefix, inside=False):
        # Cell.recompute() marks the whole subtree: report the outermost marked cells only
        marked = cell_recomputed(cell)
        if marked and not inside:
            out["cells"].append(prefix[:-1])
        for attr in dir(cell):
            try:
                obj = getattr(cell, attr)
            except Exception:  # noqa: BLE001
                continue
            if isinstance(obj, ops.Primitive):
                attrs = obj.attrs
                if "recompute" in attrs:
                    out["recompute"][prefix + attr] = bool(attrs["recompute"])
                if "recompute_comm_op" in attrs:
                    out["comm"][prefix + attr] = bool(attrs["recompute_comm_op"])
                if attrs.get("offload"):
                    out["offload"][prefix + attr] = attrs.get("backward_prefetch")
        for name, child in cell._cells.items():  # pylint: disable=protected-access
            if child is not None and name != "_recompute_cell":    # MindSpore's wrapper of a recomputed cell
                visit(child, f"{prefix}{name}.", inside or marked)

    visit(layer, "")
    return out


#: a select_recompute pattern that reaches nothing in any layer (makes select_recompute "set")
NO_MATCH = r"swapwatch_reaches_nothing"


def _keyed(seen):
    """(block index, entry) for LayerSetting's calls: 0 for the decoder block, 1 for MTP."""
    first = seen[0][0] if seen else None
    return [(0 if inst == first else 1, (inst, layer_id, layer)) for inst, layer_id, layer in seen]


def build_one(name: str) -> dict:
    """Build family ``name`` and read its layer trees."""
    import mindformers
    from mindspore import ops

    spec = FAMILIES[name]
    src = spec["config"]
    if isinstance(src, str):
        src = os.path.join(os.path.dirname(os.path.dirname(mindformers.__file__)), src)
    cfg = tiny_config(src, spec["set"])
    net, seen = build(cfg)
    if not seen:
        raise SystemExit(f"{name}: LayerSetting set no layer")
    # Some layers preset more when select_recompute is set at all (legacy LLamaAttention without
    # flash attention recomputes its core ops itself): build once more with a select pattern that
    # reaches nothing, and keep what is preset then and not before.
    cfg2 = tiny_config(src, spec["set"])
    cfg2.recompute_config = {"recompute": False, "select_recompute": [NO_MATCH]}
    _, seen2 = build(cfg2)
    with_select = {(layer_id, instances_key): layer_state(layer)
                   for instances_key, (_, layer_id, layer) in _keyed(seen2)}

    instances = []
    for inst, _, _ in seen:
        if inst not in instances:
            instances.append(inst)
    layers = []
    for inst, layer_id, layer in seen:
        layers.append((layer_id, "mtp" if instances.index(inst) > 0 else None, layer))

    def prims_of(cell):
        out = []
        for attr in dir(cell):
            try:
                obj = getattr(cell, attr)
            except Exception:  # noqa: BLE001  (properties that need a built graph)
                continue
            if isinstance(obj, ops.Primitive):
                out.append((attr, obj))
        return out

    def tree(cell, prefix, presets, objs):
        node = {"prims": [], "cells": {}}
        for attr, prim in prims_of(cell):
            node["prims"].append(attr)
            path = prefix + attr
            objs[path] = id(prim)
            attrs = {k: bool(v) for k, v in prim.attrs.items() if k in ("recompute", "recompute_comm_op")}
            if attrs:
                presets[path] = attrs
        for child_name, child in cell._cells.items():  # pylint: disable=protected-access
            if child is None:
                continue
            if cell_recomputed(child):
                presets[prefix + child_name] = {"recompute": True}
            node["cells"][child_name] = tree(child, f"{prefix}{child_name}.", presets, objs)
        if not node["cells"]:
            del node["cells"]
        if not node["prims"]:
            del node["prims"]
        return node

    records = []
    for layer_id, kind, layer in layers:
        presets, objs = {}, {}
        t = tree(layer, "", presets, objs)
        if kind is None:
            kind = "moe" if "experts" in t.get("cells", {}).get("mlp", {}).get("cells", {}) else "dense"
        records.append({"layer": layer_id, "kind": kind, "class": type(layer).__name__, "tree": t,
                        "preset": presets, "objs": objs})
    # shared: the same primitive object at the same path in every layer of a kind (2+ layers)
    out_layouts = {}
    for rec in records:
        kind = rec["kind"]
        entry = out_layouts.setdefault(kind, {"class": rec["class"], "layers": [], "layer": rec["tree"],
                                              "preset": dict(sorted(rec["preset"].items())), "shared": []})
        entry["layers"].append(rec["layer"])
        if entry["layer"] != rec["tree"]:
            raise SystemExit(f"{name}: two {kind} layers have different trees; add a layer kind")
    all_ids = {}
    for rec in records:
        for oid in rec["objs"].values():
            all_ids.setdefault(oid, set()).add((rec["layer"], rec["kind"]))
    for kind, entry in out_layouts.items():
        rec = next(r for r in records if r["kind"] == kind)
        entry["shared"] = sorted(p for p, oid in rec["objs"].items() if len(all_ids[oid]) > 1)
        base = rec["preset"]
        state = with_select[(rec["layer"], 1 if kind == "mtp" else 0)]
        extra = {p: {"recompute": v} for p, v in state["recompute"].items() if p not in base}
        extra.update({c: {"recompute": True} for c in state["cells"] if c and c not in base})
        if extra:
            entry["preset_if_select_recompute"] = dict(sorted(extra.items()))
    model_cls = type(net).__name__
    return {"family": name, "about": spec["about"], "source": spec["config"] if isinstance(spec["config"], str)
            else "minimal legacy config (tools/extract_layouts.py)",
            "path": "legacy" if cfg.get("use_legacy", True) is not False else "mcore",
            "model_class": model_cls, "set": spec["set"],
            "layouts": out_layouts}


# ---- writing and checking (any python with PyYAML) --------------------------------------------

HEADER = """# GENERATED by tools/extract_layouts.py from MindFormers {version}: do not edit by hand.
# {about}.
# Built at tiny size on CPU as BaseTrainer.create_network does: every layer tree LayerSetting was
# given, by kind (dense / moe / mtp), sub-cells in _cells order, primitives in dir() order;
# `preset`: primitives already recomputed at construction; `shared`: primitives that are one object
# across layers. Producer -> consumer flows (SW202) are hand-written in flows.yaml.
"""


def dump(data: dict, version: str) -> str:
    import yaml

    body = {k: data[k] for k in ("family", "path", "model_class", "source", "set")}
    body["layouts"] = data["layouts"]
    return HEADER.format(version=version, about=data["about"], family=data["family"]) + \
        yaml.safe_dump(body, sort_keys=False, default_flow_style=None, width=110)


def run_child(name: str) -> dict:
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", name], capture_output=True,
                          text=True, timeout=900, cwd=ROOT)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)), None)
    if line is None:
        raise SystemExit(f"{name}: build failed:\n{proc.stderr[-3000:]}")
    return json.loads(line[len(MARK):])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--one", help="build one family and print it as JSON (internal)")
    ap.add_argument("--check", action="store_true", help="compare with the stored files; exit 1 on drift")
    ap.add_argument("names", nargs="*", help="families (default: all)")
    args = ap.parse_args(argv)
    if args.one:
        sys.stdout.write(MARK + json.dumps(build_one(args.one)) + "\n")
        return 0
    from importlib.metadata import version

    mf_version = version("mindformers")
    drift = []
    for name in args.names or list(FAMILIES):
        text = dump(run_child(name), mf_version)
        path = os.path.join(MODELS, f"{name}.yaml")
        if args.check:
            old = Path(path).read_text(encoding="utf-8") if os.path.exists(path) else ""
            if old != text:
                drift.append(name)
            print(f"{name}: {'DRIFT' if old != text else 'ok'}", file=sys.stderr)
        else:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            print(f"{name}: wrote {os.path.relpath(path, ROOT)}", file=sys.stderr)
    if drift:
        print("layouts differ from MindFormers: " + ", ".join(drift), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
