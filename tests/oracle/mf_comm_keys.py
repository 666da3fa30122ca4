"""What MindFormers 2.1.0's LayerSetting hands MindSpore for the comm-recompute and slice keys (oracle).

Run with the oracle venv's python (real MindFormers 2.1.0 + MindSpore), never with swapwatch's:

    .oracle-venv/bin/python tests/oracle/mf_comm_keys.py < cases.json

stdin: a JSON list of ``recompute_config`` dicts. For each, a fresh two-layer network (a layer with a
``norm`` primitive and a weight) goes through ``LayerSetting.set_recompute`` (the function the legacy
Llama / GLM and the mcore layers call, ``parallel_core/training_graph/transformer/utils.py``) and the
result records what MindSpore then acts on, per layer: the primitive attributes ``recompute_comm_op``
(mp_comm_recompute / select_comm_recompute) and ``slice_activation`` (recompute_slice_activation), and
the parameters' ``parallel_optimizer_comm_recompute``. stdout: one line ``MARK + JSON`` (a list, one
entry per case: ``{"layers": [{"recompute_comm_op", "slice_activation", "po_comm_recompute"}, ...]}``
or ``{"error": "..."}``).

Also, ``mcore_slice``: whether the mcore config class refuses ``recompute_slice_activation: True``
(``parallel_core/transformer_config.py:TransformerConfig.__post_init__``).
"""
import json
import os
import sys

os.environ.setdefault("LOG_MF_PATH", os.path.join(os.environ.get("TMPDIR", "/tmp"), "swapwatch_oracle_mf_logs"))
os.environ.setdefault("GLOG_v", "3")

from mindspore import Parameter, Tensor, nn, ops  # noqa: E402
import numpy as np  # noqa: E402

from mindformers.modules.transformer import TransformerOpParallelConfig, TransformerRecomputeConfig  # noqa: E402
from mindformers.parallel_core.training_graph.transformer.utils import LayerSetting  # noqa: E402

MARK = "@@SWAPWATCH_ORACLE@@"


class Norm(nn.Cell):
    def __init__(self):
        super().__init__()
        self.norm = ops.Mul()

    def construct(self, x):
        return self.norm(x, x)


class Layer(nn.Cell):
    def __init__(self):
        super().__init__()
        self.attention_norm = Norm()
        self.matmul = ops.MatMul()
        self.weight = Parameter(Tensor(np.ones((2, 2), np.float32)), name="w")

    def construct(self, x):
        return self.matmul(self.attention_norm(x), self.weight)


def state(layer):
    prims = [layer.matmul, layer.attention_norm.norm]
    return {"recompute_comm_op": [p.attrs.get("recompute_comm_op") for p in prims],
            "slice_activation": [p.attrs.get("slice_activation") for p in prims],
            "po_comm_recompute": getattr(layer.weight, "parallel_optimizer_comm_recompute", None)}


def run(rc):
    layers = [Layer(), Layer()]
    recompute = TransformerRecomputeConfig(**rc)
    pc = TransformerOpParallelConfig(recompute=recompute)
    setting = LayerSetting(len(layers), 0, pc, 1)
    for i, layer in enumerate(layers):
        setting.set_recompute(layer, i)
    return {"layers": [state(layer) for layer in layers]}


def mcore_slice():
    from mindformers.parallel_core.transformer_config import TransformerConfig
    try:
        TransformerConfig(num_layers=2, hidden_size=8, num_attention_heads=2, recompute_slice_activation=True)
    except ValueError as exc:
        return f"ValueError: {exc}"
    return None


def main():
    out = []
    for rc in json.load(sys.stdin):
        try:
            out.append(run(rc))
        except Exception as exc:  # noqa: BLE001 -- reported to the test
            out.append({"error": f"{type(exc).__name__}: {exc}"})
    print(MARK + json.dumps({"cases": out, "mcore_slice": mcore_slice()}))


if __name__ == "__main__":
    main()
