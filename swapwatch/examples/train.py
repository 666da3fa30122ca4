"""Train the tiny Llama for a few steps on CPU with a recompute/swap strategy applied through the hooks.

    python -m swapwatch.examples.train --config X.yaml [--steps N] [--layers N]
    msrun --worker_num=2 --local_worker_num=2 --join=True swapwatch/examples/train.py --config X.yaml

Why: it is the smallest real MindSpore job that exercises the whole swapwatch loop. It logs what a
MindFormers job logs (``initial ... from dict`` lines, LayerSetting lines, ``{ Epoch:[...], step:[...]``
lines, all with MindFormers' stdout prefix) plus SWAPWATCH ``plan``/``apply``/``step``/``memory``/``run``
events, so ``swapwatch verify`` and ``plot`` read its logs exactly as they read a real job's.

Under msrun (``MS_ROLE`` set) it calls ``init()`` and trains data-parallel; msrun's scheduler process
also runs this script and leaves inside ``init()``. Without ``--config`` it trains with no strategy
(the baseline). A bad config or argument is one line on stderr and exit code 2.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

# msrun starts workers as `python <this file>`: make the package importable from a checkout too.
if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from swapwatch.errors import InputError  # noqa: E402

#: flag -> (the YAML key it defaults to, the built-in default when the YAML has none); model_config
#: keys are looked up under every name swapwatch.memory.spec.ALIASES knows, as `estimate` reads them
SIZE_KEYS = {"hidden": ("model.model_config.hidden_size", 64), "heads": ("model.model_config.num_heads", 4),
             "ffn": ("model.model_config.intermediate_size", 172), "seq": ("model.model_config.seq_length", 32),
             "batch": ("runner_config.batch_size", 2), "vocab": ("model.model_config.vocab_size", 128)}


def fill_sizes(a: argparse.Namespace) -> None:
    """Model sizes the flags left open, from the YAML (so explain, estimate, plan, run and verify
    read one source of truth), else the built-in tiny defaults. A bad value: InputError (exit 2)."""
    from swapwatch.memory.spec import ALIASES

    tree: dict = {}
    lines: dict = {}
    if a.config:
        from swapwatch.config import read_yaml

        tree, lines = read_yaml(a.config)
        tree = tree if isinstance(tree, dict) else {}
        tree, lines = _static_view(tree, lines)
    for flag, (key, default) in SIZE_KEYS.items():
        if getattr(a, flag) is not None:
            continue
        section, _, name = key.rpartition(".")
        node: object = tree
        for part in section.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        value = None
        for alias in ALIASES.get(name, (name,)):
            if isinstance(node, dict) and node.get(alias) is not None:
                value, key = node[alias], f"{section}.{alias}"
                break
        if value is None:
            setattr(a, flag, default)
        elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"expected a positive integer, got {value!r}", file=a.config, line=lines.get(key), key=key)
        else:
            setattr(a, flag, value)


def _static_view(tree: dict, lines: dict) -> "tuple[dict, dict]":
    """An r2.x (PyNative) YAML keeps the sizes under ``model`` and the micro-batch in
    ``training.local_batch_size``: seen under the static names SIZE_KEYS reads, lines kept at the r2.x keys
    (the names ``estimate`` reads them under: swapwatch/pynative/sizing.py)."""
    from swapwatch.config import mapping
    from swapwatch.paths import is_pynative

    if not is_pynative(tree):
        return tree, lines
    model = mapping(tree.get("model"))
    training = mapping(tree.get("training"))
    view = {"model": {"model_config": model}, "runner_config": {"batch_size": training.get("local_batch_size")}}
    out = {f"model.model_config.{k[6:]}": v for k, v in lines.items() if k.startswith("model.")}
    if "training.local_batch_size" in lines:
        out["runner_config.batch_size"] = lines["training.local_batch_size"]
    return view, out


def apply_pynative(layers, config: str, log) -> None:
    """Apply an r2.x YAML's per-layer strategy to the tiny Llama as ``apply_ac`` decides it
    (:func:`swapwatch.pynative.resolve.resolve`): a full layer -> ``Cell.recompute()`` on the layer, each
    select module path -> ``Cell.recompute()`` on that cell. What differs from MindFormers' trainer
    (docs/estimate.md, The PyNative path): MindSpore's cell recompute instead of hyper_parallel's
    ``checkpoint_wrapper``; select paths must be cells (a primitive's recompute is a graph-mode attribute);
    swap and exclude_op are refused (MindSpore's offload does nothing in PyNative on CPU); one process (the
    trainer skips apply_ac on one card: SW501)."""
    from swapwatch.pynative.config import load
    from swapwatch.pynative.resolve import resolve

    plan = resolve(load(config))
    for la in plan.layers:
        if la.layer_swap or la.op_swap or la.op_swap_void or la.exclude:
            raise InputError("the example model applies full and select recompute of cells only in PyNative "
                             "mode (swap / exclude_op refused)", file=config)
        cell = layers[la.layer]
        if la.full:
            cell.recompute()
            continue
        for path in la.select:
            node = cell
            for part in path.split("."):
                node = node._cells.get(part) if hasattr(node, "_cells") else None
                if node is None:
                    raise InputError(f"layer {la.layer}: select path {path} is not a cell of the example "
                                     f"model (PyNative: cells only)", file=config)
            node.recompute()
    # what apply_ac logs for this strategy, in its order (the "Final ... Configuration Map" blocks, then the
    # per-layer Set lines): the lines MindFormers' trainer would print beside the wrappers it installs
    for line in plan.lines:
        (log.warning if line.level == "WARNING" else log.info)(line.text)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m swapwatch.examples.train", description=__doc__.split("\n\n")[0])
    p.add_argument("--config", help="training YAML with recompute_config / swap_config (omit: no strategy)")
    p.add_argument("--steps", type=int, default=None,
                   help="steps to train (default: the config's TrainCallBack stop_step, else 5)")
    p.add_argument("--layers", type=int, default=None, help="decoder layers (default: the config's num_layers, else 4)")
    # model sizes: the flag, else the config's model.model_config / runner_config value, else the default
    for flag, (key, default) in SIZE_KEYS.items():
        p.add_argument(f"--{flag}", type=int, default=None, help=f"default: the config's {key}, else {default}")
    p.add_argument("--mode", choices=("graph", "pynative"), default=None,
                   help="MindSpore execution mode (default: pynative for an r2.x YAML, else graph); PyNative "
                        "needs numpy < 2 (docs/estimate.md, The PyNative path)")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--quirks", action="store_true", help="log MindFormers' exact whitespace quirks")
    p.add_argument("--sleep", type=float, default=0.0, help="seconds to sleep after each step (tests)")
    p.add_argument("--exit-code", type=int, default=0, help="exit with this code after training (tests)")
    p.add_argument("--fail-rank", type=int, default=None,
                   help="with --exit-code: only this msrun worker exits, at start-up (a crashing worker)")
    a = p.parse_args(argv)
    if a.steps is not None and a.steps < 1:
        p.error("--steps must be >= 1")
    return a


def stop_step(config: str) -> "int | None":
    """The step a MindFormers job stops at: a ``callbacks`` entry ``{type: TrainCallBack, stop_step: K}``
    (mindformers/core/callback/callback.py:TrainCallBack.on_train_step_end requests the stop once
    ``cur_step_num >= stop_step``). ``runner_config.stop_step`` is read by MindFormers 2.1.0
    (trainer/base_trainer.py:BaseTrainer.training_process) into a callback dict that is never added
    to the callbacks, so it limits nothing there, and is not read here either."""
    from swapwatch.config import read_yaml

    tree, _ = read_yaml(config)
    cbs = tree.get("callbacks") if isinstance(tree, dict) else None
    for cb in cbs if isinstance(cbs, list) else ():
        if isinstance(cb, dict) and cb.get("type") == "TrainCallBack" and cb.get("stop_step") is not None:
            k = cb["stop_step"]
            if isinstance(k, bool) or not isinstance(k, int) or k < 1:
                raise InputError(f"expected a positive integer, got {k!r}", file=config,
                                 key="callbacks[TrainCallBack].stop_step")
            return k
    return None


def main(argv=None) -> int:
    a = parse_args(argv)
    from swapwatch.hooks import require_mindspore

    require_mindspore("python -m swapwatch.examples.train")
    if a.fail_rank is not None:
        if os.environ.get("MS_ROLE") == "MS_WORKER" and os.environ.get("RANK_ID") == str(a.fail_rank):
            print(f"worker rank {a.fail_rank}: exiting with code {a.exit_code} as asked (--fail-rank)", flush=True)
            return a.exit_code
        a.exit_code = 0
    from swapwatch.hooks.apply import apply, get_logger, _resolve_plan
    from swapwatch.hooks.memory import record_step
    from swapwatch.events import format_event

    fill_sizes(a)
    limit = stop_step(a.config) if a.config else None
    a.steps = min(a.steps, limit) if (a.steps and limit) else (a.steps or limit or 5)
    log = get_logger()
    plan = sha = None
    pyn_layers = None
    if a.config:
        from swapwatch.paths import pynative_tree
        from swapwatch.pynative.config import load

        if pynative_tree(a.config) is not None:
            pyn_layers = load(a.config).num_layers
            a.mode = a.mode or "pynative"
    if a.config and pyn_layers is None:
        plan, cfg, sha = _resolve_plan(a.config)
        # as MindFormers' build_parallel_config does: the intended config, inside the worker log
        for key in ("swap_config", "recompute_config"):
            log.info(f"initial {key} from dict: {getattr(cfg, key)!r}")
    layers = a.layers or (plan.geometry.num_layers if plan else pyn_layers or 4)
    if pyn_layers and layers != pyn_layers:
        raise InputError(f"--layers {layers} differs from the config's num_hidden_layers {pyn_layers}", file=a.config)
    if plan and layers != plan.geometry.num_layers:
        raise InputError(f"--layers {layers} differs from the config's num_layers {plan.geometry.num_layers}",
                         file=a.config)

    import numpy as np
    import mindspore as ms
    from mindspore import nn
    from swapwatch.examples.tinyllama import TinyLlama, WithLoss, make_data

    # MindSpore's execution mode (--mode), not the MindFormers code path
    ms.set_context(mode={"pynative": ms.PYNATIVE_MODE}.get(a.mode or "graph", ms.GRAPH_MODE))
    if a.mode:          # asked for (or an r2.x YAML): say which, so a recorded peak says what ran
        log.info(f"MindSpore execution mode: {a.mode.upper()}_MODE")
    ms.set_device("CPU")
    rank, size = 0, 1
    if os.environ.get("MS_ROLE"):
        from mindspore.communication import get_group_size, get_rank, init

        init()          # msrun's scheduler process serves the cluster in here and then exits
        rank, size = get_rank(), get_group_size()
        ms.set_auto_parallel_context(parallel_mode="data_parallel", gradients_mean=True, device_num=size)
    print(format_event("run", rank, phase="start", world_size=size, pid=os.getpid()), flush=True)
    ms.set_seed(1)
    np.random.seed(1)

    net = TinyLlama(vocab=a.vocab, dim=a.hidden, n_layers=layers, n_heads=a.heads, ffn_hidden=a.ffn, seq=a.seq)
    if plan is not None:
        apply(net.layers, plan, rank=rank, quirks=a.quirks, config_sha256=sha)
    elif pyn_layers:
        apply_pynative(net.layers, a.config, log)
    loss_net = WithLoss(net, a.vocab)
    opt = nn.SGD(net.trainable_params(), learning_rate=a.lr)
    step_cell = train_step_class()(loss_net, opt)
    step_cell.set_train()
    data = make_data(a.batch, a.seq, a.vocab, steps=a.steps, seed=rank)
    for i, (x, y) in enumerate(data, start=1):
        t0 = time.perf_counter()
        loss, gnorm = step_cell(x, y)
        lv, gv = float(loss.asnumpy()), float(gnorm.asnumpy())
        dt = (time.perf_counter() - t0) * 1000
        log.info(step_line(i, a.steps, lv, dt, a.lr, gv))
        record_step(i, lv, dt, epoch=1, rank=rank)
        if a.sleep:
            time.sleep(a.sleep)
    print(format_event("run", rank, phase="end", exit_code=a.exit_code, world_size=size), flush=True)
    return a.exit_code


def step_line(step: int, steps: int, loss: float, ms: float, lr: float, gnorm: float) -> str:
    """MindFormers' MFLossMonitor line (newer loss format;
    ``core/callback/callback.py:MFLossMonitor.print_output_info``)."""
    import numpy as np

    return (f"{{ Epoch:[{1:3d}/{1:3d}], step:[{step:5d}/{steps:5d}], loss: {loss:5.6f}, "
            f"per_step_time: {int(ms)}ms, lr: {lr}, overflow cond: False, loss_scale: 1.0, "
            f"global_norm: {np.array([gnorm], np.float32)}")


def train_step_class():
    from mindspore import nn, ops

    class TrainStep(nn.TrainOneStepCell):
        """TrainOneStepCell that also returns the global gradient norm (for the step line)."""

        def construct(self, *inputs):
            loss = self.network(*inputs)
            sens = ops.fill(loss.dtype, loss.shape, self.sens)
            grads = self.grad(self.network, self.weights)(*inputs, sens)
            grads = self.grad_reducer(grads)
            sq = ops.zeros((), loss.dtype)
            for g in grads:
                sq = sq + ops.reduce_sum(g * g)
            loss = ops.depend(loss, self.optimizer(grads))
            return loss, ops.sqrt(sq)

    return TrainStep


def run(argv=None) -> None:
    """Entry point: exit 2 with one line on bad input, never a traceback."""
    try:
        code = main(argv)
    except InputError as exc:
        print(f"swapwatch.examples.train: error: {exc.one_line()}", file=sys.stderr, flush=True)
        code = 2
    sys.stdout.flush()
    sys.exit(code)


if __name__ == "__main__":
    run()
