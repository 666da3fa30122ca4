"""Record the example model's PyNative pool peaks: what ``swapwatch estimate`` on an r2.x YAML is checked against.

    .venv/bin/python tools/pynative_memory.py  # every case -> fixtures/pynative_memory/<case>.{yaml,json}
    .venv/bin/python tools/pynative_memory.py --list
    .venv/bin/python tools/pynative_memory.py none full  # some cases

Why: DryRun compiles graphs, so it cannot check the PyNative (r2.x) path. The tiny Llama of
``swapwatch/examples`` is run in PyNative mode on CPU (``python -m swapwatch.examples.train --config
<case>.yaml``: an r2.x YAML makes it run PyNative and apply the YAML's per-layer strategy as ``apply_ac``
resolves it, swapwatch/examples/train.py:apply_pynative), and MindSpore's CPU pool peak is read from the log
(``GLOG_v=2 MS_SUBMODULE_LOG_v={PRE_ACT:1}``: ``peak used mem:<N>M`` at exit, the line
``swapwatch.parsers.grammar.CPU_MEMORY`` reads, whole MiB). Each case's YAML is written beside its record, so
the record says exactly what ran. Needs numpy < 2 (MindSpore 2.10's PyNative; the project's ``.venv`` has it).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fixtures", "pynative_memory")
#: the model (plan_tiny.yaml's sizes, r2.x keys), fp32 on CPU, plain SGD (no optimizer states)
BASE = """# {title}
# The tiny Llama of swapwatch/examples as an r2.x (PyNative) YAML: recorded by tools/pynative_memory.py.
model:
  model_type: tinyllama
  num_hidden_layers: {layers}
  hidden_size: 256
  num_attention_heads: 4
  intermediate_size: 688
  seq_length: {seq}
  vocab_size: 128
  compute_dtype: float32
  params_dtype: float32
  softmax_compute_dtype: float32
  use_flash_attention: False
training:
  local_batch_size: {batch}
optimizer:
  type: SGD
parallelism:
  tensor_parallel: 1
{strategy}"""
FF, ATTN = "feed_forward", r"attention\.flash_attention"
#: case -> (title, strategy sections, layers, seq, batch)
CASES = {
    "none": ("no recompute", "", 4, 256, 2),
    "full": ("full recompute of every layer", "recompute:\n  mode: full\n  full_recompute_layer: ['0-3']\n",
             4, 256, 2),
    "select_mlp": ("select recompute of the MLP cell", f"recompute:\n  mode: select\n  select_module:\n"
                   f"    '{FF}': ['0-3']\n", 4, 256, 2),
    "select_attn": ("select recompute of the attention core cell", f"recompute:\n  mode: select\n"
                    f"  select_module:\n    '{ATTN}': ['0-3']\n", 4, 256, 2),
    "select_both": ("select recompute of the MLP and the attention core", f"recompute:\n  mode: select\n"
                    f"  select_module:\n    '{FF}': ['0-3']\n    '{ATTN}': ['0-3']\n", 4, 256, 2),
    "mixed": ("full recompute of layers 0-1, select MLP on 2-3", f"recompute:\n  mode: select\n"
              f"  full_recompute_layer: ['0-1']\n  select_module:\n    '{FF}': ['2-3']\n", 4, 256, 2),
    "select_mlp_23": ("select recompute of the MLP cell on layers 2-3 only", f"recompute:\n  mode: select\n"
                      f"  select_module:\n    '{FF}': ['2-3']\n", 4, 256, 2),
    "full_01": ("full recompute of layers 0-1, none on 2-3",
                "recompute:\n  mode: full\n  full_recompute_layer: ['0-1']\n", 4, 256, 2),
    "full_012": ("full recompute of layers 0-2, none on 3",
                 "recompute:\n  mode: full\n  full_recompute_layer: ['0-2']\n", 4, 256, 2),
    "none_seq512": ("no recompute, twice the sequence", "", 4, 512, 2),
    "full_seq512": ("full recompute, twice the sequence",
                    "recompute:\n  mode: full\n  full_recompute_layer: ['0-3']\n", 4, 512, 2),
    # recorded after the PyNative backward order and keeps were changed (docs/estimate.md): held out
    "mixed_attn": ("full recompute of layers 0-1, select attention core on 2-3", f"recompute:\n  mode: select\n"
                   f"  full_recompute_layer: ['0-1']\n  select_module:\n    '{ATTN}': ['2-3']\n", 4, 256, 2),
    "full_01_seq512": ("full recompute of layers 0-1, none on 2-3, twice the sequence",
                       "recompute:\n  mode: full\n  full_recompute_layer: ['0-1']\n", 4, 512, 2),
    "full_0_b1": ("full recompute of layer 0, none on 1-3, micro-batch 1",
                  "recompute:\n  mode: full\n  full_recompute_layer: ['0']\n", 4, 256, 1),
}
#: the same YAMLs run in GRAPH_MODE (``--mode graph``): what graph-level memory reuse changes, for the
#: record only (the PyNative estimate is not checked against them)
GRAPH = {"none_graph": "none", "full_graph": "full"}
STEPS = 3


def write_yaml(case: str) -> str:
    title, strategy, layers, seq, batch = CASES[case]
    path = os.path.join(OUT, f"{case}.yaml")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(BASE.format(title=title, layers=layers, seq=seq, batch=batch, strategy=strategy))
    return path


def run(yaml_path: str, python: str = sys.executable, mode: str = "pynative") -> dict:
    """One real PyNative run; its pool peak (MiB, the largest ``peak used mem`` line) and seconds."""
    from swapwatch.parsers.grammar import CPU_MEMORY

    pool_peak = next(rx for rx, metric in CPU_MEMORY if metric == "pool_peak")
    env = dict(os.environ, GLOG_v="2", MS_SUBMODULE_LOG_v="{PRE_ACT:1}", PYTHONPATH=ROOT)
    t0 = time.time()
    r = subprocess.run([python, "-m", "swapwatch.examples.train", "--config", yaml_path, "--steps", str(STEPS),
                        "--mode", mode],
                       capture_output=True, text=True, env=env, cwd=ROOT)
    seconds = round(time.time() - t0, 1)
    peaks = [int(m.group("mb")) for m in re.finditer(pool_peak, r.stdout + r.stderr)]
    if r.returncode or not peaks:
        tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"{yaml_path}: exit {r.returncode}, {len(peaks)} pool lines: {' | '.join(tail)}")
    if f"MindSpore execution mode: {mode.upper()}_MODE" not in r.stdout + r.stderr:
        raise RuntimeError(f"{yaml_path}: the run does not say it ran in {mode.upper()}_MODE")
    return {"pool_peak_mib": max(peaks), "seconds": seconds, "pool_lines": len(peaks),
            "pynative_lines": sum("Set full recompute" in ln or "Set select recompute" in ln
                                  for ln in (r.stdout + r.stderr).splitlines())}


def layer_paths() -> list:
    """The tiny Llama layer's path list as ``apply_ac`` collects it: MindFormers 2.1.0's own
    ``_iter_class_owned_callable_attrs`` / ``_get_single_layer_whitelist`` (their source, from the installed
    wheel: the module itself imports hyper_parallel, which is not installable) run on the real layer
    (``swapwatch/layouts/pynative/layer_paths.json`` ``tinyllama``). Needs MindFormers: the oracle venv."""
    import ast
    import importlib.util
    import inspect

    from mindspore import nn

    from swapwatch.examples.tinyllama import TinyLlama

    spec = importlib.util.find_spec("mindformers")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("--paths needs MindFormers 2.1.0 (run it with .oracle-venv/bin/python)")
    src_path = os.path.join(list(spec.submodule_search_locations)[0], "pynative", "distributed",
                            "activation_checkpoint.py")
    with open(src_path, encoding="utf-8") as fh:
        src = fh.read()
    want = {"_iter_class_owned_callable_attrs", "_get_single_layer_whitelist"}
    code = "\n\n".join(ast.get_source_segment(src, n) or "" for n in ast.parse(src).body
                        if isinstance(n, ast.FunctionDef) and n.name in want)
    ns: dict = {"nn": nn, "inspect": inspect}
    exec(compile(code, src_path, "exec"), ns)      # noqa: S102 - MindFormers' own two functions, verbatim
    out: list = []
    ns["_get_single_layer_whitelist"](TinyLlama(vocab=128, dim=64, n_layers=1, n_heads=4, ffn_hidden=172,
                                                seq=32).layers[0], out)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", nargs="*", help="cases to record (default: all)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--paths", action="store_true", help="print the example layer's apply_ac path list (JSON)")
    a = ap.parse_args()
    if a.paths:
        sys.path.insert(0, ROOT)
        print(json.dumps(layer_paths()))
        return 0
    if a.list:
        for k, v in CASES.items():
            print(f"{k}: {v[0]}")
        for k, v in GRAPH.items():
            print(f"{k}: {v}.yaml in GRAPH_MODE")
        return 0
    import mindspore
    import numpy

    os.makedirs(OUT, exist_ok=True)
    for case in a.cases or [*CASES, *GRAPH]:
        mode = "graph" if case in GRAPH else "pynative"
        path = write_yaml(GRAPH.get(case, case))
        res = run(path, mode=mode)
        rec = {"case": case, "yaml": os.path.relpath(path, ROOT), "mode": f"{mode.upper()}_MODE", "device": "CPU",
               "steps": STEPS, "metric": "MindSpore CPU pool 'peak used mem' (MiB, whole), the largest line",
               **res, "mindspore": mindspore.__version__, "numpy": numpy.__version__,
               "python": platform.python_version(), "recorded": time.strftime("%Y-%m-%d")}
        with open(os.path.join(OUT, f"{case}.json"), "w", encoding="utf-8") as fh:
            json.dump(rec, fh, indent=2)
            fh.write("\n")
        print(f"{case}: {res['pool_peak_mib']} MiB ({res['seconds']} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
