"""Run one real MindFormers 2.1.0 decoder layer forward on CPU and record every primitive's outputs (oracle).

Run with the oracle venv's python (real MindFormers 2.1.0 + MindSpore), never with swapwatch's:

    .oracle-venv/bin/python tests/oracle/mf_layer_tensors.py '{"family": "llama", "set": {...}}'

Why: the memory tables (``swapwatch/memory/<table>.yaml``) say which tensor each op of a layer
produces; this runs the real layer and records, per primitive path of layer 0 in call order, the
shapes and dtypes it really produced, for ``tests/test_oracle_memory_tables.py`` to compare.

The network is built as ``tools/extract_layouts.py:build`` does (the one recipe), then run in
PyNative mode on a batch of token ids. Two primitives have no CPU kernel and are replaced, in every
layer, by the same math in MindSpore ops (so their recorded shapes are those of the documented
kernel, not a measurement): ``RmsNorm`` (returns ``x * rstd * w`` and ``rstd`` with the last axis
kept) and the rotary ``bmm_swap`` BatchMatMul (a batched matmul with a 2-D operand broadcast, which
CPU BatchMatMul refuses). One case per process (``use_legacy`` and recompute marks are process-wide).
stdout: one line ``MARK + JSON``: ``{"calls": [[path, [[shape, dtype], ...]], ...]}``.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
MARK = "@@SWAPWATCH_TENSORS@@"

import extract_layouts  # noqa: E402  (the one build recipe, shared with the layout extraction)


class CpuKernel:
    """A primitive without a CPU kernel, computed with MindSpore ops (see the module docstring)."""

    def __init__(self, prim):
        self.prim = prim

    def __call__(self, *args):
        from mindspore import ops

        if type(self.prim).__name__ == "RmsNorm":
            x, w = args
            rstd = ops.rsqrt(ops.mean(x * x, -1, keep_dims=True) + 1e-6)
            return x * rstd * w, rstd
        return ops.matmul(*args)


def primitives(cell):
    from mindspore import ops

    for attr in dir(cell):
        try:
            obj = getattr(cell, attr)
        except Exception:  # noqa: BLE001  (properties that need a built graph)
            continue
        if isinstance(obj, (ops.Primitive, CpuKernel)):
            yield attr, obj


def replace_cpu_less(cell):
    for attr, obj in list(primitives(cell)):
        if type(obj).__name__ == "RmsNorm" or attr == "bmm_swap":
            object.__setattr__(cell, attr, CpuKernel(obj))
    for sub in cell._cells.values():
        if sub is not None:
            replace_cpu_less(sub)


def record(cell, prefix, calls):
    """Wrap every primitive of ``cell`` (recursively) to append its outputs to ``calls``."""
    for attr, prim in list(primitives(cell)):
        def wrapped(*args, _prim=prim, _path=prefix + attr, **kwargs):
            out = _prim(*args, **kwargs)
            outs = out if isinstance(out, (tuple, list)) else (out,)
            calls.append([_path, [[list(o.shape), str(o.dtype)] for o in outs if hasattr(o, "shape")]])
            return out
        object.__setattr__(cell, attr, wrapped)
    for name, sub in cell._cells.items():
        if sub is not None:
            record(sub, prefix + name + ".", calls)


def main():
    case = json.loads(sys.argv[1])
    spec = extract_layouts.FAMILIES[case["family"]]
    src = spec["config"]
    if isinstance(src, str):            # a maintainer YAML shipped in the wheel (as build_one reads it)
        import mindformers

        src = os.path.join(os.path.dirname(os.path.dirname(mindformers.__file__)), src)
    cfg = extract_layouts.tiny_config(src, dict(spec["set"], **case.get("set", {})))
    net, seen = extract_layouts.build(cfg)
    import mindspore as ms
    import numpy as np

    ms.set_context(mode=ms.PYNATIVE_MODE)
    net.init_parameters_data()
    replace_cpu_less(net)
    calls = []
    record(next(layer for _, layer_id, layer in seen if layer_id == 0), "", calls)
    batch, seq = case["batch"], cfg.model.model_config.seq_length
    ids = ms.Tensor(np.random.default_rng(0).integers(0, 200, (batch, seq)), ms.int32)
    net(ids)
    print(MARK + json.dumps({"calls": calls}))


if __name__ == "__main__":
    main()
