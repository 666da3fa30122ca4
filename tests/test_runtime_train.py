"""The tiny model trains for real (GRAPH_MODE, CPU), recompute changes nothing numerically, and
the compiled IR shows what was really recomputed."""
import subprocess
import sys

import numpy as np
import pytest

ms = pytest.importorskip("mindspore")

from runtime_helpers import REPO, env_with_venv, single_stage_plan  # noqa: E402
from swapwatch.checks import CheckContext, run_rules  # noqa: E402
from swapwatch.model.event_lines import parse_event  # noqa: E402
from swapwatch.parsers.ir import read_ir  # noqa: E402

pytestmark = pytest.mark.runtime

SEL = [r"attention\.flash_attention"]


def _grads(plan):
    """Gradients of the initial weights on the first batch, under ms.jit (graph compile)."""
    from mindspore import nn
    from swapwatch.examples.tinyllama import TinyLlama, WithLoss, make_data
    from swapwatch.hooks.apply import apply

    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")
    ms.set_seed(1)
    net = TinyLlama()
    if plan is not None:
        apply(net.layers, plan)
    loss_net = WithLoss(net, 128)
    opt = nn.SGD(net.trainable_params(), 0.01)
    fn = ms.jit(ms.value_and_grad(loss_net, None, opt.parameters))
    x, y = make_data(2, 32, 128, steps=1)[0]
    loss, grads = fn(x, y)
    return float(loss.asnumpy()), [g.asnumpy() for g in grads]


def test_recompute_gradients_are_bitwise_equal_to_no_recompute():
    base_loss, base = _grads(None)
    for plan in (single_stage_plan(4, layers={i: {"full_recompute": True} for i in range(4)}),
                 single_stage_plan(4, layers={i: {"select_recompute": SEL} for i in range(4)})):
        loss, grads = _grads(plan)
        assert loss == base_loss
        assert len(grads) == len(base) == 39     # embedding + 4 x 9 + norm_out + lm_head
        assert all(np.array_equal(a, b) for a, b in zip(base, grads))


def _run_train(args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "swapwatch.examples.train", *args], capture_output=True,
                          text=True, env=env or env_with_venv(), cwd=cwd or REPO, timeout=300)


def test_train_script_prints_mindformers_step_lines_and_events():
    r = _run_train(["--steps", "3", "--config", "fixtures/configs/demo_recompute.yaml"])
    assert r.returncode == 0, r.stderr[-2000:]
    import re
    steps = re.findall(r"- INFO - \{ Epoch:\[  1/  1\], step:\[    (\d)/    3\], loss: (\d+\.\d{6}), "
                       r"per_step_time: \d+ms, lr: 0\.01, overflow cond: False, loss_scale: 1\.0, global_norm: \[[\d.e+-]+\]$",
                       r.stdout, re.M)
    assert [s for s, _ in steps] == ["1", "2", "3"]
    events = [e for e in map(parse_event, r.stdout.splitlines()) if e]
    kinds = [e["kind"] for e in events]
    assert kinds.count("step") == 3 and kinds.count("memory") == 3 and kinds.count("plan") == 1
    mem = [e for e in events if e["kind"] == "memory"][0]
    assert mem["source"] == "rss" and mem["fallback"] is True and mem["bytes"] > 100 * 2**20
    assert "initial recompute_config from dict: {'recompute': [1]," in r.stdout
    assert "Set full recompute at layer 0" in r.stdout
    assert [round(e["loss"], 6) for e in events if e["kind"] == "step"] == [float(l) for _, l in steps]


@pytest.mark.parametrize("content, needle", [
    (None, "cannot read config"),
    ("recompute_config: [unclosed\n", "YAML syntax error"),
])
def test_train_script_bad_config_is_one_line_exit_2(tmp_path, content, needle):
    cfg = tmp_path / "bad.yaml"
    if content is not None:
        cfg.write_text(content)
    r = _run_train(["--config", str(cfg)])
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr


def _dump_ir(tmp_path, strategy):
    out = tmp_path / strategy
    env = env_with_venv()
    env.update(MS_DEV_SAVE_GRAPHS="1", MS_DEV_SAVE_GRAPHS_PATH=str(out), MS_DEV_DUMP_IR_PASSES="add_recomputation,validate")
    r = subprocess.run([sys.executable, str(REPO / "fixtures" / "ir" / "make_ir.py"), strategy], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return out


def test_full_recompute_shows_as_clones_in_the_ir_of_a_real_compile(tmp_path):
    ev = list(read_ir(_dump_ir(tmp_path, "full")))[0]
    assert ev.recomputed_layers() == [0, 2]          # make_ir.py "full": layers 0 and 2
    assert ev.clone_count(0) > 20 and ev.clone_count(1) == 0
    assert not run_rules(CheckContext(plan=None, ir=read_ir(tmp_path / "full")), needs=("ir",))


def test_prim_only_recompute_is_marked_but_not_cloned_sw110(tmp_path):
    ir = read_ir(_dump_ir(tmp_path, "prim"))
    ev = list(ir)[0]
    assert sum(ev.clones.values()) == 0 and sum(ev.prim_marked.values()) == 8
    found = run_rules(CheckContext(plan=None, ir=ir), needs=("ir",))
    assert {(f.code, f.layer, f.op) for f in found} == {
        ("SW110", i, p) for i in range(4) for p in ("feed_forward.mul", "feed_forward.w1.activation.silu")}
