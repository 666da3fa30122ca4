"""The MindFormers shim: events from the layer's real before/after state, installed via sitecustomize.

Tier 1 (always): the diff on real MindSpore cells, and the import hook + sitecustomize mechanics with a
small stand-in ``mindformers.models.utils`` written by the test (it only makes the real MindSpore calls
LayerSetting makes). Tier 2 (only when /work/main/.oracle-venv/.ready exists): real MindFormers 2.1.0.
"""
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("mindspore")

from runtime_helpers import REPO  # noqa: E402
from swapwatch.model.event_lines import parse_event  # noqa: E402
from swapwatch.examples.tinyllama import TinyLlama  # noqa: E402
from swapwatch.hooks import mindformers as shim  # noqa: E402

pytestmark = pytest.mark.runtime

SHIM_DIR = REPO / "swapwatch" / "hooks" / "sitecustomize_dir"
ORACLE = REPO / ".oracle-venv"


def _diff(fn):
    layer = TinyLlama(n_layers=1).layers[0]
    before = shim.snapshot(layer)
    fn(layer)
    return shim.diff(before, shim.snapshot(layer))


def test_diff_full_select_comm_and_swaps_on_real_cells():
    assert _diff(lambda l: l.recompute()) == [{"action": "full_recompute", "pattern": None, "paths": [], "value": True}]
    ev = _diff(lambda l: (l.feed_forward.mul.recompute(), l.attention.flash_attention.recompute(),
                          l.ffn_norm.norm.add_prim_attr("recompute_comm_op", True)))
    assert ev[0]["action"] == "select_recompute" and ev[0]["cells"] == ["attention.flash_attention"]
    assert sorted(ev[0]["paths"]) == ["attention.flash_attention", "feed_forward.mul"]
    assert ev[1] == {"action": "select_comm_recompute", "pattern": None, "paths": ["ffn_norm.norm"], "value": True}
    ev = _diff(lambda l: (l.attention.flash_attention.offload(backward_prefetch=2),
                          l.feed_forward.w2.matmul._offload(backward_prefetch=3)))
    assert {(e["action"], tuple(e["paths"]), e["value"]) for e in ev} == {
        ("op_swap", ("attention.flash_attention",), 2), ("op_swap", ("feed_forward.w2.matmul",), 3)}
    assert _diff(lambda l: l.offload(backward_prefetch=1))[0]["action"] == "layer_swap"


STANDIN = '''
class LayerSetting:
    """Stand-in with MindFormers' call shape; makes the real MindSpore calls."""
    def __init__(self, n):
        self.num_layers, self.pp, self.pp_interleave_num = n, 1, 1
    def __call__(self, layer, layer_id):
        if layer_id == 0:
            layer.recompute()
        else:
            layer.feed_forward.mul.recompute()
'''


def test_sitecustomize_installs_the_hook_only_when_asked(tmp_path):
    pkg = tmp_path / "mindformers" / "models"
    pkg.mkdir(parents=True)
    (tmp_path / "mindformers" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "utils.py").write_text(STANDIN)
    code = textwrap.dedent("""
        from swapwatch.examples.tinyllama import TinyLlama
        from mindformers.models.utils import LayerSetting
        net = TinyLlama(n_layers=2); ls = LayerSetting(2)
        for i, l in enumerate(net.layers): ls(l, i)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SHIM_DIR), str(tmp_path), str(REPO)]), RANK_ID="1")
    on = subprocess.run([sys.executable, "-c", code], env=dict(env, SWAPWATCH_MINDFORMERS_SHIM="1"),
                        capture_output=True, text=True, timeout=120)
    events = [e for e in map(parse_event, on.stdout.splitlines()) if e]
    assert [(e["kind"], e.get("layer"), e.get("action")) for e in events] == [
        ("plan", None, None), ("apply", 0, "full_recompute"), ("apply", 1, "select_recompute")]
    assert events[0]["source"] == "mindformers" and all(e["rank"] == 1 for e in events)
    off = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert off.returncode == 0 and "SWAPWATCH" not in off.stdout


@pytest.mark.oracle
@pytest.mark.skipif(not (ORACLE / ".ready").exists(), reason="no MindFormers oracle venv (.oracle-venv/.ready)")
def test_shim_with_real_mindformers(tmp_path):
    code = textwrap.dedent("""
        import os
        os.environ.setdefault("LOG_MF_PATH", os.path.join(os.getcwd(), "mf_logs"))
        import mindspore as ms
        from mindformers.modules.transformer import (TransformerOpParallelConfig, TransformerRecomputeConfig,
                                                     TransformerSwapConfig)
        from mindformers.parallel_core.training_graph.transformer.utils import LayerSetting
        from swapwatch.examples.tinyllama import TinyLlama
        ms.set_context(mode=ms.GRAPH_MODE); ms.set_device("CPU")
        rc = TransformerRecomputeConfig(recompute=[3], select_recompute={r"feed_forward\\.mul": [1, 2]})
        sc = TransformerSwapConfig(swap=True, layer_swap=[{"backward_prefetch": 1, "layers": [0]}],
                                   op_swap=[{"op_name": r".*\\.flash_attention", "backward_prefetch": 2, "layers": [1, 2]}])
        net = TinyLlama(n_layers=4)
        ls = LayerSetting(4, 0, TransformerOpParallelConfig(recompute=rc, swap=sc))
        for i, layer in enumerate(net.layers):
            ls(layer, i)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SHIM_DIR), str(REPO)]), SWAPWATCH_MINDFORMERS_SHIM="1")
    r = subprocess.run([str(ORACLE / "bin" / "python"), "-c", code], env=env, cwd=tmp_path, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    got = {(e["layer"], e["action"]) for e in map(parse_event, r.stdout.splitlines()) if e and e["kind"] == "apply"}
    assert got == {(0, "layer_swap"), (1, "select_recompute"), (1, "op_swap"), (2, "select_recompute"),
                   (2, "op_swap"), (3, "full_recompute")}
