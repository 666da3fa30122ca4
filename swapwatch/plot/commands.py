"""The ``swapwatch plot memory|strategy|estimate`` commands as functions: arguments in, file written, one line out.

Kept out of ``cli.py`` so the command line stays thin and these can be tested without click. Every
bad input is checked *before* the logs are parsed (bad -o, bad --ranks, missing paths), so a typo
costs nothing on GB-size logs, and every failure is one :class:`InputError` line (exit 2). The
``-o`` / ``--force`` rule is checked here, once, by :func:`output_path` (with
:func:`swapwatch.outputs.refuse_overwrite`); the write itself re-checks only at the last moment
against a race (:func:`swapwatch.outputs.write_with`).
"""
from __future__ import annotations

import os
from typing import Callable, NamedTuple, Optional, Sequence

from ..errors import InputError
from ..outputs import refuse_overwrite
from ..text import parse_ranks
from . import _render
from .inputs import has_memory, load_runs

Warn = Callable[[str], None]


class Target(NamedTuple):
    """Where a plot goes: the file, its format, and whether it may replace an existing file."""
    path: str
    fmt: str
    force: bool


def output_path(output: Optional[str], fmt: Optional[str], default_stem: str, force: bool = False) -> Target:
    """The one check of a plot's ``-o`` / ``--format`` / ``--force``, before any log is read.
    Without -o: ``<stem>.<format>`` in the current directory, never replaced (``--force`` only
    applies to a name the user gave): an existing file of that name is the user's. With -o: an
    existing file only with ``--force`` (:func:`swapwatch.outputs.refuse_overwrite`)."""
    out = output if output is not None else f"{default_stem}.{(fmt or 'png').lower()}"
    f = _render.resolve_format(out, fmt)
    _render.check_writable(out)
    if output is None:
        if os.path.lexists(out):
            raise InputError(f"{out} already exists; pass -o {out} --force to replace it, or -o another name")
        force = False
    else:
        refuse_overwrite(out, force)
    return Target(out, f, force)


def memory_command(paths: Sequence[str], output: Optional[str] = None, ranks: Optional[str] = None,
                   fmt: Optional[str] = None, warn: Optional[Warn] = None, force: bool = False) -> str:
    """``swapwatch plot memory``: returns the one-line summary to print."""
    if not paths:
        raise InputError("no log path given (worker_N.log files, msrun log dirs or run dirs)")
    rank_list = parse_ranks(ranks)
    target = output_path(output, fmt, "memory", force)
    # pandas and matplotlib (0.7 s) are imported while the workers scan, not before they start
    runs = load_runs(paths, while_scanning=_import_memory_plot)
    from .memory import HOW_TO_GET, plot_memory
    with_mem = [(g, rl) for g, rl in runs if has_memory(rl)]
    if not with_mem:
        where = ", ".join(p for g, _ in runs for p in g)
        raise InputError(f"no memory figures in these logs; {HOW_TO_GET}", file=where)
    for g, rl in runs:
        if not has_memory(rl) and warn is not None:
            warn(f"{', '.join(g)}: no memory figures in these logs, left out of the plot")
    res = plot_memory([rl for _, rl in with_mem], ranks=rank_list)
    res.save(*target)
    if res.incomparable and warn is not None:
        warn("these runs are not comparable (" + ", ".join(res.incomparable)
             + "): the peak bars carry no percentage")
    frame = res.frame
    n_runs = frame["run"].nunique()
    n_ranks = frame["rank"].nunique()
    return f"wrote {target.path}: {n_runs} run{'s' if n_runs != 1 else ''}, {n_ranks} rank{'s' if n_ranks != 1 else ''}"


def _import_memory_plot() -> None:
    from . import memory  # noqa: F401


def _is_config(path: str) -> bool:
    return os.path.isfile(path) and os.path.splitext(path)[1].lower() in (".yaml", ".yml")


def strategy_command(source: str, config: Optional[str] = None, output: Optional[str] = None,
                     rank: Optional[int] = None, fmt: Optional[str] = None, force: bool = False) -> str:
    """``swapwatch plot strategy``: a config (intended), or logs (actual) compared with ``--config``
    or with the config the log printed; returns the one-line summary to print."""
    from ..strategy import plan as make_plan
    from .strategy_map import plot_strategy

    if not os.path.exists(source):
        raise InputError("no such file or directory", file=source)
    if config is not None and not os.path.exists(config):
        raise InputError("no such file or directory", file=config)
    target = output_path(output, fmt, "strategy", force)
    out = target.path
    pynative = _pynative_plan(config if config is not None else source)
    if pynative is not None and config is None:      # a PyNative (r2.x) YAML
        plot_strategy(pynative, name=os.path.basename(source)).save(*target)
        return f"wrote {out}: the strategy {source} asks for (PyNative path)"
    if pynative is not None and config is not None:       # a run against a PyNative YAML
        (_, runlog), = load_runs([source])
        res = plot_strategy(runlog, plan=pynative, rank=rank,
                            name=f"{runlog.label or source} vs {os.path.basename(config)}")
        res.save(*target)
        n = 0 if res.diff is None else len(res.diff)
        return (f"wrote {out}: " + ("as logged, identical to the config" if not n else
                                    f"config and logs side by side, {n} difference{'s' if n != 1 else ''}"))
    if _is_config(source):
        if config is not None:
            raise InputError(f"{source} is a config already; --config is for comparing logs with a config")
        from ..config import load_config

        cfg = load_config(source)
        plot_strategy(make_plan(cfg), name=os.path.basename(source)).save(*target)
        return f"wrote {out}: the strategy {source} asks for"
    (_, runlog), = load_runs([source])
    from ..verify import run_dir_config, verify_read

    config = config or run_dir_config([source])       # a run dir's own YAML, as verify takes it

    # verify's own result: the map and the summary read the comparison verify decides with, so
    # the two never disagree (issue 21.1)
    try:
        result = verify_read(runlog, config)
    except InputError:
        if config is not None:
            raise
        result = None                       # no config in the log: draw what the log shows
    if result is not None and result.verdict == "not_verified":
        from ..verify_render import run_line

        raise InputError(f"nothing to compare with the config: {run_line(result)[len('run: '):]}", file=source)
    name = None if config is None else f"{runlog.label or source} vs {os.path.basename(config)}"
    res = plot_strategy(result if result is not None else runlog, rank=rank, name=name)
    res.save(*target)
    diff, cut = res.diff, res.cut
    if result is None:
        what = "as logged (no config to compare with: pass --config)"
    elif result.comparison is None:
        what = "as logged: the log is not a run of this config (SW109), no per-layer comparison"
    elif (diff is None or diff.empty) and not cut:
        what = "as logged, identical to the config"
    else:
        n = 0 if diff is None else len(diff)
        what = f"config and logs side by side, {n} difference{'s' if n != 1 else ''}"
        if cut:
            what += f"; the log stops at layer {min(cut)}"
    if result is not None:
        from ..verify_render import verdict_word

        what += f"; verify: {verdict_word(result)}"
    return f"wrote {out}: {what}"


def estimate_command(config: str, run_dirs: Sequence[str] = (), output: Optional[str] = None,
                     fmt: Optional[str] = None, budget: Optional[str] = None, model: Optional[str] = None,
                     force: bool = False) -> str:
    """``swapwatch plot estimate``: predicted components per stage vs measured; returns the line to print."""
    from .. import codepaths
    from ..memory.planner import parse_size
    from .estimate import plot_estimate

    size = parse_size(budget) if budget is not None else None
    target = output_path(output, fmt, "estimate", force)
    doc, cp = codepaths.read(config)
    est = cp.size(doc, "plot estimate", model, calibrate=run_dirs)
    plot_estimate(est, budget=size).save(*target)
    n = len(est.stages)
    return f"wrote {target.path}: {n} stage{'s' if n != 1 else ''}, " + (
        f"measured peaks of {len(est.measured)}" if est.measured else "no measured peak for this config")


def _pynative_plan(path: str):
    """The PyNative plan of ``path`` when it is a PyNative (r2.x) YAML, else None."""
    if not _is_config(path):
        return None
    from ..config import read_yaml
    from ..paths import is_pynative
    from ..pynative.explain import explain_tree

    data, lines = read_yaml(path)
    if not is_pynative(data):           # the seam decides the path
        return None
    return explain_tree(data, lines, path).plan
