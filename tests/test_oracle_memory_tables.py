"""Oracle tier for the memory tables: the tensors a table says each op produces are the ones the
real MindFormers 2.1.0 layer produces.

Skipped unless ``.oracle-venv/.ready`` exists. ``tests/oracle/mf_layer_tensors.py`` builds the real
network at tiny size on CPU (``tools/extract_layouts.py:build``), runs it forward in PyNative mode
and records every primitive call of decoder layer 0 with its output shapes. Here every op of the
family's table (``swapwatch/memory/<table>.yaml``), sized for the same YAML by swapwatch's own
``spec.py``, must be found among the real calls at its path, in the table's order, producing the
element counts of the tensors the table names (all outputs: the norm's rstd, split_qkv's three).

GLM4 (legacy ChatGLM2Block, no flash) is checked the same way. What CPU cannot check: the flash-attention paths (FlashAttentionScore has no CPU kernel, so the
flash variants and the mcore tables, which have only that path, are counted from the module code
only: tests/test_estimate_families.py) and the 16-bit dtypes (the CPU run is float32 throughout).
"""
import json
import os
import subprocess

import pytest
import yaml

from swapwatch.memory.tensor_table import TensorTable, family_data
from swapwatch.memory.spec import load_spec, product

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORACLE_PY = os.path.join(ROOT, ".oracle-venv", "bin", "python")
READY = os.path.join(ROOT, ".oracle-venv", ".ready")
SCRIPT = os.path.join(ROOT, "tests", "oracle", "mf_layer_tensors.py")
MARK = "@@SWAPWATCH_TENSORS@@"

pytestmark = [pytest.mark.oracle, pytest.mark.skipif(not (os.path.exists(READY) and os.path.exists(ORACLE_PY)),
                                                     reason="no MindFormers oracle venv (.oracle-venv/.ready)")]

#: (extract_layouts family, its swapwatch layout family, model_config set on both sides)
CASES = [
    ("llama_noflash", "llama_noflash", {"n_kv_heads": 2}),                  # GQA: tile_kv repeats k, v
    ("llama_qkv_concat_noflash", "llama_qkv_concat_noflash", {"n_kv_heads": 2}),
    ("llama_noflash", "llama_noflash", {}),                                  # heads == kv heads
]
BATCH = 2


def real_calls(family, extra):
    case = {"family": family, "batch": BATCH, "set": dict(extra, compute_dtype="float32")}
    proc = subprocess.run([ORACLE_PY, SCRIPT, json.dumps(case)], capture_output=True, text=True,
                          timeout=900, cwd=ROOT)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)), None)
    assert line is not None, f"oracle failed: {proc.stderr[-3000:]}"
    return json.loads(line[len(MARK):])["calls"]


def our_family(tmp_path, layout_family, extra, concat) -> TensorTable:
    """The same tiny model as tools/extract_layouts.py's legacy Llama build, as a training YAML."""
    mc = {"type": "LlamaConfig", "hidden_size": 64, "num_heads": 4, "multiple_of": 32, "seq_length": 32,
          "vocab_size": 256, "num_layers": 2, "compute_dtype": "float32", "use_flash_attention": False,
          "qkv_concat": concat, **extra}
    p = tmp_path / "tiny.yaml"
    p.write_text(yaml.safe_dump({"model": {"arch": {"type": "LlamaForCausalLM"}, "model_config": mc},
                                 "runner_config": {"batch_size": BATCH}, "parallel_config": {"pipeline_stage": 1}}))
    return TensorTable(load_spec(str(p)), layout_family)


def elements(shape):
    n = 1
    for d in shape:
        n *= d
    return n


@pytest.mark.parametrize("family,layout_family,extra", CASES)
def test_table_ops_produce_the_real_layers_tensors(tmp_path, family, layout_family, extra):
    fam = our_family(tmp_path, layout_family, extra, "concat" in family)
    check_table_against(fam, real_calls(family, extra))


def check_table_against(fam: TensorTable, calls) -> None:
    """Every op of ``fam``'s table is found among the real ``calls`` at its path, in order, with the
    element counts of the tensors it names."""
    tensors = family_data(fam.table)["tensors"]
    sym = fam.spec.symbols()
    count = {t: product(tensors[t]["shape"], sym) for t in tensors}
    assert calls, "the real layer ran no primitive"
    prims = {path for path, _ in calls}
    position = {}          # path -> index of the next real call to look at
    for op in fam.ops:
        cell = op.path not in prims          # a cell-level op (rope, a functional cast): its first output
        # a tensor of 0 elements is not an output of that run: sequence parallel's gathered rest
        # (xn1g / xn2g, sg = s - s / tp) on this tensor-parallel-free CPU layer, where its AllGather
        # (an op of the linear's cell) is not inserted at all
        want = [count[t] for t in op.outs if count[t]]
        if not want:
            continue
        start = position.get(op.path, 0)
        found = None
        for i in range(start, len(calls)):
            path, outs = calls[i]
            at = path.startswith(op.path + ".") if cell else path == op.path
            got = [elements(shape) for shape, _ in outs]
            if at and (got[:1] == want[:1] if cell else got == want):
                found = i
                break
        assert found is not None, (f"{op.path}: no real call from #{start} produced {want} elements "
                                   f"({', '.join(op.outs)}); real calls there: "
                                   f"{[c for c in calls if c[0] == op.path or c[0].startswith(op.path + '.')]}")
        position[op.path] = found + 1


def test_glm4_table_ops_produce_the_real_layers_tensors(tmp_path):
    """Legacy GLM4 (ChatGLM2Block) without flash attention, GQA (multi_query_group_num 2 of 4
    heads), at the tiny sizes tools/extract_layouts.py builds it with (its SHRINK), seq 32."""
    extra = {"use_flash_attention": False, "seq_length": 32}
    mc = {"type": "ChatGLM2Config", "num_layers": 2, "padded_vocab_size": 256, "hidden_size": 64,
          "ffn_hidden_size": 128, "kv_channels": 16, "num_attention_heads": 4, "seq_length": 32,
          "multi_query_attention": True, "multi_query_group_num": 2, "add_qkv_bias": True, "qkv_concat": True,
          "mlp_concat": True, "compute_dtype": "float32", "use_flash_attention": False}
    p = tmp_path / "glm4.yaml"
    p.write_text(yaml.safe_dump({"model": {"arch": {"type": "ChatGLM2ForConditionalGeneration"}, "model_config": mc},
                                 "runner_config": {"batch_size": BATCH}, "parallel_config": {"pipeline_stage": 1}}))
    fam = TensorTable(load_spec(str(p)), "glm4")
    assert any(op.path == "self_attention.tile_kv" for op in fam.ops)        # the GQA, no-flash variant
    check_table_against(fam, real_calls("glm4", dict(extra, compute_dtype="float32")))
