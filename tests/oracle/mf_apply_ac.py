"""Run MindFormers 2.1.0's real PyNative ``apply_ac`` on stand-in cells, for the oracle tests (oracle venv only).

Usage: ``.oracle-venv/bin/python tests/oracle/mf_apply_ac.py < cases.json``: the last stdout line is
``MARK`` + a JSON list, one result per case.

``activation_checkpoint.py`` is loaded from the installed wheel file itself. What it imports from
``hyper_parallel`` (not on PyPI) is replaced by stand-ins that behave as the reference run observed the real
wrappers behave: a wrapper is a cell whose only child is ``_ckpt_wrapped_module`` (a walk through it finds
nothing else); ``SwapManager`` records the prefetch pairs. Each layer is built as a tree of stand-in cells
from the per-layer path list (a path another path extends is a cell, the others are callables), and
``_get_modules_and_ops_list`` returns those lists, so the regex matching, dedup, maps, order and messages
under test are MindFormers' own code.
"""
import glob
import importlib.util
import json
import os
import sys
import types


class Cell:
    def __init__(self):
        object.__setattr__(self, "_cells", {})

    def __getattr__(self, name):
        cells = object.__getattribute__(self, "_cells")
        if name in cells:
            return cells[name]
        raise AttributeError(name)

    def __setattr__(self, name, value):
        if isinstance(value, Cell) or name in self._cells:
            self._cells[name] = value
        else:
            object.__setattr__(self, name, value)

    def __dir__(self):
        return [k for k in vars(self) if k != "_cells"]


class Wrapper(Cell):
    def __init__(self, kind, inner):
        super().__init__()
        self._cells["_ckpt_wrapped_module"] = inner
        object.__setattr__(self, "kind", kind)


class OpWrapper:
    def __init__(self, kind, inner):
        self.kind, self.inner = kind, inner

    def __call__(self, *a, **k):
        return None


def _wrap(kind):
    def wrapper(target, *args, **kwargs):
        return Wrapper(kind, target) if isinstance(target, Cell) else OpWrapper(kind, target)
    return wrapper


PAIRS = []
#: the result line starts with this (MindFormers prints to stdout while importing)
MARK = "@@pynative-oracle@@"


class SwapManager:
    def set_forward_prefetch_layer(self, a, b):
        PAIRS.append((a, b))


def _install_fakes():
    ac = types.ModuleType("hyper_parallel.core.activation_checkpoint")
    ac.CheckpointPolicy = types.SimpleNamespace(MUST_SAVE="save", MUST_SWAP="swap")
    ac.checkpoint_wrapper = _wrap("checkpoint")
    ac.checkpoint_exclude_wrapper = _wrap("exclude")
    ac.swap_wrapper = _wrap("swap")
    ac.SwapManager = SwapManager
    sys.modules.update({"hyper_parallel": types.ModuleType("hyper_parallel"),
                        "hyper_parallel.core": types.ModuleType("hyper_parallel.core"),
                        "hyper_parallel.core.activation_checkpoint": ac})


def _op():
    return lambda *a, **k: None


def build_layer(paths):
    cells = set()
    for p in paths:
        head = p.rpartition(".")[0]
        while head:
            cells.add(head)
            head = head.rpartition(".")[0]
    cells &= set(paths)
    root = Cell()
    for p in paths:           # parents come before children in collection order
        parent = root
        parts = p.split(".")
        for part in parts[:-1]:
            parent = parent._cells[part]
        if p in cells:
            parent._cells[parts[-1]] = Cell()
        else:
            object.__setattr__(parent, parts[-1], _op())
    return root


class Hook:
    def remove(self):
        pass


class Block(Cell):
    def __init__(self, layers, num_layers, mtp_layers):
        super().__init__()
        object.__setattr__(self, "layers", layers)
        object.__setattr__(self, "config", types.SimpleNamespace(num_layers=num_layers, mtp_num_layers=mtp_layers))
        object.__setattr__(self, "layer_start", 0)
        object.__setattr__(self, "layer_end", len(layers) - 1)

    def construct(self, hidden_states, attention_mask=None):
        return hidden_states

    def register_forward_pre_hook(self, fn, with_kwargs=False):
        return Hook()


class Logger:
    def __init__(self):
        self.lines = []

    def _log(self, level, msg, *args):
        self.lines.append([level, msg % args if args else msg])

    def info(self, msg, *args):
        self._log("INFO", msg, *args)

    def warning(self, msg, *args):
        self._log("WARNING", msg, *args)

    def error(self, msg, *args):
        self._log("ERROR", msg, *args)


def main():
    _install_fakes()
    from mindformers.pynative.config import config as C
    here = glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages", "mindformers", "pynative",
                                  "distributed", "activation_checkpoint.py"))[0]
    spec = importlib.util.spec_from_file_location("mf_activation_checkpoint", here)
    A = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(A)
    real_logger = A.logger
    results = []
    for case in json.load(sys.stdin)["cases"]:
        log = Logger()
        real = case.get("real_logger")           # keep MindFormers' logger: its stdout records are the output
        A.logger = real_logger if real else log
        if real and case.get("world_size"):
            real_logger.info(f"Current world size: {case['world_size']}.")
        del PAIRS[:]
        paths = {int(k): v for k, v in case["paths"].items()}
        n, m = case["num_layers"], case.get("mtp_layers", 0)
        A._get_modules_and_ops_list = lambda model, paths=paths: {
            i: list(paths[i]) for i in range(model.layer_start, model.layer_end + 1)}
        decoder = Block([build_layer(paths[i]) for i in range(n)], n, m)
        if "layer_start" in case:    # one pipeline stage's chunk: global ids layer_start..layer_end
            object.__setattr__(decoder, "layer_start", case["layer_start"])
            object.__setattr__(decoder, "layer_end", case["layer_end"])
        mtp = Block([build_layer(paths[n + i]) for i in range(m)], n, m) if m else None
        out = {"lines": log.lines, "error": None, "pairs": []}
        try:
            rc = C.RecomputeConfig.from_dict(case.get("recompute", {}))
            comm = C.RecomputeCommConfig.from_dict(case.get("recompute_comm", {}))
            sw = C.SwapConfig.from_dict(case.get("swap", {}))
            A.apply_ac(decoder, rc, comm, sw, case.get("pp", 1), mtp_block=mtp)
        except Exception as exc:  # noqa: BLE001 - the refusal is the result
            out["error"] = [type(exc).__name__, str(exc)]
        ids = {}
        for i in range(n):
            ids[id(decoder.layers[i])] = i
        for i in range(m):
            ids[id(mtp.layers[i])] = n + i
        out["pairs"] = [[ids.get(id(a)), ids.get(id(b))] for a, b in PAIRS]
        results.append(out)
    sys.stdout.write("\n" + MARK + json.dumps(results) + "\n")


if __name__ == "__main__":
    os.chdir(os.environ.get("TMPDIR", "/tmp"))     # MindFormers' logger makes ./output/log under the cwd
    main()
