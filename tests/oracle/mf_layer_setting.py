"""Run MindFormers' own LayerSetting on a cell tree built from swapwatch's Llama layout (oracle).

Run with the oracle venv's python (real MindFormers 2.1.0 + MindSpore), never with swapwatch's:

    .oracle-venv/bin/python tests/oracle/mf_layer_setting.py < cases.json > results.json

stdin: a JSON list of cases ``{num_layers, offset, pipeline_stage, pp_interleave_num,
pipeline_interleave, recompute_config, swap_config}``. stdout: one JSON result per case,
one line ``MARK + JSON``: per case ``{"lines": [[level, message], ...]}`` (everything MindFormers' logger printed while the config
objects were built, LayerSetting was constructed and applied to every layer) or
``{"error": "ExcType: message", "lines": [...]}``.

Every case gets a fresh network: MindSpore lets recompute be configured only once per cell. The
tree is built from ``swapwatch/layouts/tinyllama.yaml`` (nn.Cell subclasses, primitive attributes
named as in the layout, sub-cells in layout order), so ``dir()`` and ``_cells`` are what the
layout says.
"""
import json
import logging
import os
import sys

os.environ.setdefault("LOG_MF_PATH", os.path.join(os.environ.get("TMPDIR", "/tmp"), "swapwatch_oracle_mf_logs"))
os.environ.setdefault("GLOG_v", "3")

import yaml  # noqa: E402
import mindspore as ms  # noqa: E402
from mindspore import nn, ops  # noqa: E402

from mindformers.tools.logger import get_logger  # noqa: E402
from mindformers.modules.transformer import (TransformerOpParallelConfig, TransformerRecomputeConfig,  # noqa: E402
                                             TransformerSwapConfig)
from mindformers.parallel_core.training_graph.transformer.utils import LayerSetting  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MARK = "@@SWAPWATCH_ORACLE@@"  # MindSpore may print to stdout too: the result line is marked
LAYOUT = os.path.join(HERE, "..", "..", "swapwatch", "layouts", "tinyllama.yaml")


class Node(nn.Cell):
    """A cell with the layout's primitives as attributes and its sub-cells in order."""

    def __init__(self, spec):
        super().__init__()
        spec = spec or {}
        for prim in spec.get("prims") or []:
            setattr(self, prim, ops.Mul())
        for name, child in (spec.get("cells") or {}).items():
            setattr(self, name, Node(child))

    def construct(self, x):
        return x


class Capture(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        self.lines.append([record.levelname, record.getMessage()])


def run_case(case, layer_spec, capture):
    capture.lines = []
    ms.set_auto_parallel_context(pipeline_config={"pipeline_interleave": bool(case.get("pipeline_interleave", False)),
                                                  "pipeline_scheduler": "1f1b"})
    try:
        rc = TransformerRecomputeConfig(**case.get("recompute_config", {}))
        sc = TransformerSwapConfig(**case.get("swap_config", {}))
        pc = TransformerOpParallelConfig(recompute=rc, swap=sc, pipeline_stage=case.get("pipeline_stage", 1))
        ls = LayerSetting(case["num_layers"], case.get("offset", 0), pc, case.get("pp_interleave_num", 1))
        for i in range(case["num_layers"]):
            ls(Node(layer_spec), i)
    except Exception as exc:  # the oracle reports whatever MindFormers raised
        return {"error": f"{type(exc).__name__}: {exc}", "lines": capture.lines}
    return {"lines": capture.lines}


def main():
    with open(LAYOUT, encoding="utf-8") as fh:
        layer_spec = yaml.safe_load(fh)["layer"]
    cases = json.load(sys.stdin)
    logger = get_logger()
    for h in list(logger.handlers):
        logger.removeHandler(h)
    capture = Capture()
    logger.addHandler(capture)
    logger.setLevel(logging.INFO)
    out = [run_case(c, layer_spec, capture) for c in cases]
    sys.stdout.write(MARK + json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
