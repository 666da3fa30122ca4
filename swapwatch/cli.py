"""The ``swapwatch`` command line. Thin: parse arguments, call the library, render, pick the exit code.

Each command lives in its own section below; the logic lives in the library modules. Bad input
anywhere raises :class:`swapwatch.errors.InputError`, which :func:`main` turns into one line on
stderr and exit code 2 (never a traceback).
"""
from __future__ import annotations

import errno
import gc
import os
import sys
from types import FrameType
from typing import Any, Callable, Optional

import click

from . import __version__, command_scope
from .errors import InputError
from .report import formats


class SummaryGroup(click.Group):
    """A group whose ``--help`` shows each command's whole first paragraph, wrapped, instead of
    click's default cut at about 45 characters or at the first period (``rules  List every rule,
    or explain one (e.g.``): the command list is where a new user learns what each command is for."""

    group_class = type            # ``plot`` and other subgroups list their commands the same way

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is None or cmd.hidden:
                continue
            summary = cmd.short_help or (cmd.help or "").strip().split("\n\n")[0]
            rows.append((name, " ".join(summary.split())))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=SummaryGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="swapwatch")
def cli() -> None:
    """Observe and verify recompute / activation-swap strategies of MindSpore and MindFormers training."""


def main(argv=None) -> None:
    """Console entry point: run the click group; InputError -> one line, exit 2."""
    previous = _note_interrupts()
    try:
        _main(argv)
    finally:
        # the command's one reading of its files ends with it; only if the config package imported
        # whole: a Ctrl-C that lands while it imports leaves it half there, and importing it again
        # here raised AttributeError (a traceback, exit 1) over the interrupt's own message
        load = sys.modules.get("swapwatch.config.load")
        if load is not None and hasattr(load, "forget_reads"):
            load.forget_reads(command=False)
        command_scope.set_active(False)      # also when the config package never imported
        if previous is not None:             # a library caller's own SIGINT handling comes back
            import signal

            signal.signal(signal.SIGINT, previous)


def _main(argv) -> None:
    from .commands.outputs import forget_inputs

    forget_inputs()
    # the command's one reading of its files starts; the config package's reads are forgotten only
    # if it is imported already (a library caller's earlier command): importing it here cost every
    # command ~25 ms before its work, verify's pool workers waiting (command_scope says why)
    command_scope.set_active(True)
    load = sys.modules.get("swapwatch.config.load")
    if load is not None and hasattr(load, "forget_reads"):
        load.forget_reads()
    try:
        rv = cli.main(args=argv, prog_name="swapwatch", standalone_mode=False)
        _flush_stdout()
    except OSError as exc:
        if exc.errno not in _DISK_FULL:
            _internal_error(exc)
        # a full disk under stdout (`> /dev/full`, a quota) is the environment, not a bug of ours
        _drop_stdout()
        click.echo(f"swapwatch: error: cannot write the output: {exc.strerror or exc}", err=True)
        sys.exit(2)
    except InputError as exc:
        click.echo(f"swapwatch: error: {exc.one_line()}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("swapwatch: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2 if exc.exit_code in (1, 2) else exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("swapwatch: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:                  # a bug of ours: one line by default, never bad input's 2
        _internal_error(exc)
    sys.exit(rv if isinstance(rv, int) else 0)


# ---- rely22: a full disk under stdout is exit 2, one line (docs/reliability.md) --------------------
#: write errors that say the disk (or quota, or file size limit) is full
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def _from_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while handling a KeyboardInterrupt (its cause or context chain)."""
    seen = set()
    link: Optional[BaseException] = exc
    while link is not None and id(link) not in seen:
        if isinstance(link, KeyboardInterrupt):
            return True
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    return False


def _flush_stdout() -> None:
    """Flush now, inside the error handling: at interpreter exit a failed flush is exit 120 and a
    Python message, not our one line. A reader or terminal that went away (EPIPE; EIO after a
    hang-up) is nobody's error: what was left to print has no one to read it, the exit code stands."""
    if sys.stdout is None:
        return
    try:
        sys.stdout.flush()
    except OSError as exc:
        if exc.errno not in (errno.EPIPE, errno.EIO):
            raise
        _drop_stdout()


def _drop_stdout() -> None:
    """Point fd 1 at /dev/null so the exit's own flush of what is still buffered cannot fail again."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, AttributeError, ValueError):
        pass


#: set by the SIGINT handler :func:`main` installs: a Ctrl-C happened in this process
_SIGINT = {"seen": False}


def _note_interrupts() -> Optional[Callable[[int, Optional[FrameType]], Any]]:
    """Keep Python's Ctrl-C (KeyboardInterrupt) and remember that it came: a C extension that is
    importing when it lands (numpy's ``_multiarray_umath``) prints the KeyboardInterrupt itself and
    raises an ImportError with no chain back to it, so the chain alone cannot tell an interrupt from
    a bug. A SIGINT that is ignored (a launcher's background job) stays ignored. Returns the handler
    to put back (None when none was replaced)."""
    import contextlib
    import signal

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return None

    def on_sigint(signum, frame):
        _SIGINT["seen"] = True
        raise KeyboardInterrupt

    with contextlib.suppress(ValueError):    # not the main thread (a library caller): leave it
        signal.signal(signal.SIGINT, on_sigint)
        return signal.default_int_handler
    return None


def _internal_error(exc: Exception) -> None:
    if _from_interrupt(exc) or (_SIGINT["seen"] and isinstance(exc, ImportError)):
        # Ctrl-C while a library was importing (numpy turns the KeyboardInterrupt into an
        # ImportError): an interrupt, not a bug of ours
        click.echo("swapwatch: interrupted", err=True)
        sys.exit(130)
    if os.environ.get("SWAPWATCH_DEBUG") == "1":
        raise exc
    click.echo(f"swapwatch: internal error: {_origin(exc)}{type(exc).__name__}: {exc} "
               "(a bug in swapwatch: please report it; SWAPWATCH_DEBUG=1 shows the traceback)", err=True)
    sys.exit(3)


def _origin(exc: BaseException) -> str:
    """``module.py:123: `` of the innermost frame, so a one-line bug report still says where."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return ""
    return f"{os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}: "


# ---- explain -------------------------------------------------------------------------------

@cli.command("explain")
@click.argument("config")
@click.option("--format", "fmt", type=click.Choice(formats.EXPLAIN), default="table",
              show_default=True, help="table: per-layer view; json: DESIGN §3.2; formative: the lines "
                                      "MindFormers' LayerSetting will log (message parts).")
@click.option("--num-layers", type=int, default=None, help="Override model.model_config.num_layers.")
@click.option("--pipeline-stage", type=int, default=None, help="Override parallel_config.pipeline_stage.")
@click.option("--pp-interleave-num", type=int, default=None,
              help="Override model.model_config.pp_interleave_num (implies pipeline_interleave).")
@click.option("--offset", default=None, metavar="JSON", help="Override model.model_config.offset, e.g. '[1,0,0,1]'.")
@click.option("--env", "env", multiple=True, metavar="KEY=VALUE",
              help="Environment the run will have (SW302 needs it; repeatable).")
@click.option("--model", default=None,
              help="Model family to resolve patterns on (default: the family the YAML names; "
                   "`swapwatch families` lists them).")
@click.option("--all-layers", "all_layers", is_flag=True,
              help="One table row per layer (default: consecutive identical layers fold into ranges).")
@click.option("--host-bandwidth", default=None, metavar="RATE|DEVICE",
              help="Host link a swap's copies are timed with (SW212): 30GB/s, D2H,H2D or a device (910b, 910c); "
                   "default the 910b's, assumed.")
def explain_cmd(config, fmt, num_layers, pipeline_stage, pp_interleave_num, offset, env, model, all_layers,
                host_bandwidth):
    """Show what MindFormers will apply to every layer for CONFIG (a training YAML or fragment).

    Exit 0; 1 if the config alone shows an error-severity finding; 2 bad input.
    """
    from .config import parse_offset
    from .commands.explain import explain
    from .commands.verify import parse_env

    ex = explain(config, num_layers=num_layers, pipeline_stage=pipeline_stage,
                 pp_interleave_num=pp_interleave_num,
                 offset=parse_offset(offset) if offset is not None else None,
                 env=parse_env(env), model=model,
                 link=swap_link(host_bandwidth, None, (), model, config) if host_bandwidth else None)
    from .report.explain import render

    click.echo(render(ex, fmt, all_layers=all_layers), nl=False)
    return ex.exit_code


# ---- verify / rules ------------------------------------------------------------------------

@cli.command("verify")
@click.argument("paths", nargs=-1, required=True)
@click.option("--config", "config_path", default=None,
              help="Training YAML to verify against (default: the config the log printed).")
@click.option("--format", "fmt", type=click.Choice(formats.VERIFY),
              default="table", show_default=True)
@click.option("--strict", is_flag=True, help="Warnings fail the verification too.")
@click.option("--ignore", "ignore", multiple=True, metavar="CODE", help="Silence a rule (repeatable).")
@click.option("--ir", "ir", default=None, metavar="DIR", help="Compiled-graph IR dump dir (SW110).")
@click.option("--env", "env", multiple=True, metavar="KEY=VALUE",
              help="Environment the run had, for logs from elsewhere (repeatable).")
@click.option("-o", "--output", default=None, metavar="FILE", help="Write the report to FILE (never over an "
                                                                  "existing file without --force).")
@click.option("--force", is_flag=True, help="Let -o replace an existing file.")
def verify_cmd(paths, config_path, fmt, strict, ignore, ir, env, output, force):
    """Check that worker logs show exactly the strategy the config asks for.

    PATH: worker_N.log files, msrun log dirs or swapwatch run dirs (a run dir of `swapwatch run
    --config` is verified against its own config.yaml unless --config says otherwise). The
    verdict says the run (did every rank apply it?) and the config (does it do what you meant?)
    apart. Exit 0 pass, 1 failing findings, 2 bad input, 4 not verified (no rank's log shows
    what MindFormers applied).
    """
    from .commands.outputs import refuse_overwrite, write_text
    from .commands.verify import parse_env, verify

    if output:
        refuse_overwrite(output, force)         # before reading GBs of logs
    result = verify(paths, config_path=config_path, env=parse_env(env), ignore=ignore,
                    strict=strict, ir_dir=ir)
    from .report.verify import render          # imported while the logs were scanned

    gc.freeze()           # the run and the findings as they are: not rescanned while the report is made
    try:
        text = render(result, fmt)
    finally:
        gc.unfreeze()
    if output:
        write_text(output, text, force)
        click.echo(f"swapwatch verify: {result.verdict} ({output})", err=True)
    else:
        click.echo(text, nl=False)
    return result.exit_code


@cli.command("rules")
@click.argument("code", required=False)
def rules_cmd(code):
    """List every rule, or explain one: `swapwatch rules SW201` (also `201`, `sw201`)."""
    from .report.rules import explain_rule, list_rules

    text = explain_rule(code, style=click.style) if code else list_rules()
    click.echo(text, nl=False)          # click drops the bold when stdout is not a terminal
    return 0


# ---- families ------------------------------------------------------------------------------

@cli.command("families")
def families_cmd():
    """The model families swapwatch knows, with the MindFormers classes their layer trees come from."""
    from .model.families import family_table

    click.echo(family_table(), nl=False)
    return 0


# ---- events --------------------------------------------------------------------------------

@cli.command("events")
@click.argument("paths", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(formats.EVENTS), default="jsonl", show_default=True,
              help="jsonl: one JSON object per event; csv: one column per event field (lists joined "
                   "with ';', mappings as JSON).")
@click.option("--kind", "kinds", multiple=True, metavar="KIND",
              help="Only events of this kind (repeatable): action, step, memory, notice, ...")
@click.option("--rank", "ranks", default=None, metavar="0-7,12", help="Only these ranks (ranges allowed).")
def events_cmd(paths, fmt, kinds, ranks):
    """Every parsed event of worker logs / msrun dirs / run dirs, one per line, in file order."""
    from .commands.events import csv_columns, csv_row, event_dict, event_filter
    from .parsers import iter_event_text, iter_events

    keep = event_filter(kinds, ranks)
    out = sys.stdout
    wrote = False
    try:
        if fmt == "csv":
            import csv

            writer, columns = csv.writer(out, lineterminator="\n"), csv_columns(kinds)
            writer.writerow(columns)
            for e in iter_events(list(paths)):
                if keep(e):
                    wrote = True
                    writer.writerow(csv_row(event_dict(e), columns))
        else:               # JSONL written by the scanning workers, a whole file per block
            for block in iter_event_text(list(paths), keep):
                wrote = wrote or bool(block)
                out.write(block)
        out.flush()
    except BrokenPipeError:          # `swapwatch events ... | head`: the reader went away, not an error
        sys.stderr.close()
        return 0
    if not wrote:       # issue 21: a log without MindFormers lines gets an answer, not silence
        click.echo("swapwatch events: no event" + (" matches --kind/--rank" if kinds or ranks else
                   " in these logs: no MindFormers, MindSpore or SWAPWATCH line") + f" ({', '.join(paths)})",
                   err=True)
    return 0


# ---- run -----------------------------------------------------------------------------------

@cli.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--config", "config", type=click.Path(dir_okay=False), default=None,
              help="The training YAML (decides the environment; verify checks the run against it).")
@click.option("--run-dir", "run_dir", default=None,
              help="Run directory to create (must not exist). Default: runs/<timestamp>-<name>.")
@click.option("--no-verify", "no_verify", is_flag=True, help="Do not verify the run directory at the end.")
@click.option("--no-report", "no_report", is_flag=True,
              help="Do not write RUN_DIR/report.html at the end (--no-verify implies it: the page is built on verify).")
@click.option("--ir", "ir", is_flag=True, help="Dump the add_recomputation/validate IR into <run-dir>/ir.")
@click.option("--mindformers-shim", "shim", is_flag=True,
              help="Make MindFormers' own LayerSetting emit SWAPWATCH events (no code change).")
@click.option("--force", is_flag=True,
              help="Start the command even when the preflight finds errors in --config.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
def run_cmd(config, run_dir, no_verify, no_report, ir, shim, force, command):
    """Run COMMAND (msrun, msrun_launcher.sh, python ...) with the environment the strategy needs,
    keep its output and logs in a run directory, verify the run, and write RUN_DIR/report.html.

    With --config, explain's checks run first: error findings stop the launch (exit 1) unless
    --force. Exit code: the command's failure code (the worker's real code under msrun), else
    verify's; a job that logged nothing to verify keeps its own code.

    The command reads swapwatch's own stdin; its stdout and stderr stay apart (and are kept in
    RUN_DIR/console.log and console.stderr.log). Ctrl-C, SIGTERM and SIGHUP stop its whole process
    tree; Ctrl-\\, SIGUSR1/2 and the like are passed to it; Ctrl-Z suspends it with swapwatch
    (docs/reliability.md)."""
    from .runtime.runner import run as run_command

    result = run_command(list(command), config=config, run_dir=run_dir, verify=not no_verify, ir=ir,
                         mindformers_shim=shim, force=force, report=not no_report)
    return result.exit_code


# ---- report (issue 26) ---------------------------------------------------------------------

@cli.command("report")
@click.argument("paths", nargs=-1, required=True)
@click.option("--config", "config_path", default=None,
              help="Training YAML to verify against (default: the run's own config.yaml, else the log's).")
@click.option("-o", "--output", default="report.html", show_default=True, metavar="FILE",
              help="The page to write (never over an existing file without --force).")
@click.option("--force", is_flag=True, help="Let -o replace an existing file.")
def report_cmd(paths, config_path, output, force):
    """One self-contained HTML page for a run (or several side by side): the verdict, the run, the
    per-layer plan and what each rank applied, findings by cause, memory, the strategy map.

    PATH: swapwatch run dirs, msrun log dirs or worker logs. Exit 0 (the page is written whatever
    the verdict), 2 bad input."""
    from .commands.outputs import refuse_overwrite, write_text
    from .plot import check_writable
    from .commands.report import make

    check_writable(output)                      # before reading GBs of logs
    refuse_overwrite(output, force)
    text = make(list(paths), config_path)
    write_text(output, text, force)
    click.echo(f"wrote {output} ({len(text.encode('utf-8')) / 1024:.0f} KB)")
    return 0


# ---- diff ----------------------------------------------------------------------------------

@cli.command("diff")
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@click.option("--format", "fmt", type=click.Choice(formats.DIFF), default="table", show_default=True)
@click.option("--all-layers", "all_layers", is_flag=True,
              help="One table row per layer (default: consecutive unchanged layers fold into ranges).")
def diff_cmd(a, b, fmt, all_layers):
    """What changes per layer and per stage between two YAMLs' plans, or between the strategies
    two runs applied (run dirs, msrun log dirs, worker logs).

    Exit 0 same, 1 differ, 2 bad input."""
    from .report.diff import render
    from .commands.diff import diff

    result = diff(a, b)
    click.echo(render(result, fmt, all_layers=all_layers), nl=False)
    return result.exit_code


# ---- plot ----------------------------------------------------------------------------------

@cli.group("plot")
def plot_group():
    """Figures: memory per step, rank and run; the per-layer strategy map (PNG, SVG or PDF)."""


@plot_group.command("memory")
@click.argument("paths", nargs=-1, required=True)
@click.option("-o", "--output", default=None, metavar="FILE",
              help="Image to write (default: memory.<format> here, never replaced without -o).")
@click.option("--ranks", default=None, metavar="0,1,...", help="Only these ranks (ranges like 0-7 too).")
@click.option("--format", "fmt", default=None, metavar="png|svg|pdf",
              help="Image format (default: from the -o name, else png).")
@click.option("--force", is_flag=True, help="Let -o replace an existing file.")
def plot_memory_cmd(paths, output, ranks, fmt, force):
    """Memory per step and rank, and the whole-run Used vs Actual peaks; several runs side by side.

    PATH: run dirs, msrun log dirs or worker_N.log files. Each directory is one run; files in the
    same directory are the ranks of one run.
    """
    from .plot.commands import memory_command

    click.echo(memory_command(paths, output, ranks, fmt,
                              warn=lambda m: click.echo(f"swapwatch: warning: {m}", err=True), force=force))
    return 0


@plot_group.command("strategy")
@click.argument("source", metavar="CONFIG_OR_PATH")
@click.option("--config", "config", default=None, metavar="CONFIG",
              help="Compare the logs with this YAML (default: the config the log printed).")
@click.option("-o", "--output", default=None, metavar="FILE",
              help="Image to write (default: strategy.<format> here, never replaced without -o).")
@click.option("--rank", "rank", type=int, default=None, help="Rank whose logs to map (default: the first).")
@click.option("--format", "fmt", default=None, metavar="png|svg|pdf",
              help="Image format (default: from the -o name, else png).")
@click.option("--force", is_flag=True, help="Let -o replace an existing file.")
def plot_strategy_cmd(source, config, output, rank, fmt, force):
    """Layer x mechanism map: recompute (full, select, comm), excludes, layer and op swap with
    prefetch, overridden swaps crossed out. From a config (intended) or logs (actual); config and
    logs side by side when they differ."""
    from .plot.commands import strategy_command

    click.echo(strategy_command(source, config, output, rank, fmt, force=force))
    return 0


@plot_group.command("estimate")
@click.argument("config")
@click.option("--calibrate", "run_dirs", multiple=True, metavar="RUN_DIR|DRYRUN.json|[YAML=]DRYRUN.log",
              help="Calibration run, DryRun record or raw DryRun log of this model (repeatable); its measured "
                   "peak is drawn when it ran CONFIG.")
@click.option("--budget", default=None, metavar="SIZE", help="Draw this budget as a line (58GiB, 45MB, bytes).")
@click.option("-o", "--output", default=None, metavar="FILE",
              help="Image to write (default: estimate.<format> here, never replaced without -o).")
@click.option("--format", "fmt", default=None, metavar="png|svg|pdf",
              help="Image format (default: from the -o name, else png).")
@click.option("--model", default=None,
              help="Model family (default: the family the YAML names, as explain shows it; `swapwatch "
                   "families` lists them). Its tensor table is swapwatch/memory/<table>.yaml.")
@click.option("--force", is_flag=True, help="Let -o replace an existing file.")
def plot_estimate_cmd(config, run_dirs, budget, output, fmt, model, force):
    """Predicted peak per pipeline stage as stacked components (weights, gradients, optimizer states,
    activations, transients), measured peak beside it when calibrated."""
    from .plot.commands import estimate_command

    click.echo(estimate_command(config, run_dirs, output, fmt, budget, model, force=force))
    return 0


# ---- estimate / plan -----------------------------------------------------------------------

@cli.command("estimate")
@click.argument("config")
@click.option("--calibrate", "run_dirs", multiple=True, metavar="RUN_DIR|DRYRUN.json|[YAML=]DRYRUN.log",
              help="A `swapwatch run` directory of this model with a known strategy, a DryRun record "
                   "(tools/dryrun/record_cases.py), or a raw DryRun log (YAML=LOG: the YAML it ran; LOG alone: "
                   "CONFIG's own) (repeatable): fits the model's free terms to its measured peaks; two "
                   "sources fit a residual and one scale, three or more also split the scale (docs/estimate.md).")
@click.option("--format", "fmt", type=click.Choice(formats.ESTIMATE), default="table", show_default=True)
@click.option("--model", default=None,
              help="Model family (default: the family the YAML names, as explain shows it; `swapwatch "
                   "families` lists them). Its tensor table is swapwatch/memory/<table>.yaml.")
@click.option("--dryrun", is_flag=True,
              help="Also run CONFIG through MindSpore DryRun (one simulated rank per stage; needs MindSpore, "
                   "MindFormers and CANN, no NPU) and print its peak beside the model's (docs/estimate.md).")
@click.option("--dryrun-stage", "dryrun_stages", multiple=True, type=int, metavar="N",
              help="With --dryrun: only this pipeline stage (repeatable; default every stage).")
@click.option("--host-bandwidth", default=None, metavar="RATE|DEVICE",
              help="Host link a swap is priced with: 30GB/s, D2H,H2D (28GB/s,33GB/s) or a device (910b, 910c); "
                   "default the 910b's, assumed (docs/plan.md, Swap).")
@click.option("--host-memory", default=None, metavar="SIZE",
              help="Host memory of one node, for swap's host bytes (default this machine's).")
def estimate_cmd(config, run_dirs, fmt, model, dryrun, dryrun_stages, host_bandwidth, host_memory):
    """Predicted peak memory per pipeline stage of CONFIG's strategy, with its breakdown; measured
    beside it when a calibration run used CONFIG, DryRun L1's peak with --dryrun. Exit 0; 1 DryRun
    failed (the line names its log); 2 bad input or DryRun not available."""
    from .engine import codepaths
    from .memory.render import render_estimate

    doc, cp = codepaths.read(config)
    needs = ["calibrate"] if run_dirs else []
    cp.require(doc, "estimate", *needs, *(["dryrun"] if dryrun or dryrun_stages else []))
    est = cp.size(doc, "estimate", model, calibrate=run_dirs,
                  link=swap_link(host_bandwidth, host_memory, run_dirs, model, config))
    # --dryrun: a self-contained block (swapwatch/memory/dryrun.py)
    if dryrun or dryrun_stages:
        from .memory.dryrun import DryRunError

        try:
            res = cp.dryrun(doc, "estimate", sorted(set(dryrun_stages)) or None)
        except DryRunError as exc:
            click.echo(f"swapwatch estimate: {exc}", err=True)
            return 1
        est.dryrun = dict(res.stages)
    click.echo(render_estimate(est, fmt), nl=False)
    return 0


@cli.command("plan")
@click.argument("config")
@click.option("--budget", default=None, metavar="SIZE",
              help="MindSpore's memory pool per rank: 58GiB, 45MB, 62914560 (bytes); default the YAML's "
                   "context.max_device_memory (docs/plan.md, \"What the budget is compared to\").")
@click.option("--calibrate", "run_dirs", multiple=True, metavar="RUN_DIR|DRYRUN.json|YAML=DRYRUN.log",
              help="A `swapwatch run` directory of this model, a DryRun record or a raw DryRun log of the YAML "
                   "named (repeatable): calibrates the prediction (docs/estimate.md, \"Calibration\").")
@click.option("-o", "--output", default=None, metavar="OUT.yaml", help="Write the planned YAML here.")
@click.option("--force", is_flag=True, help="Replace OUT.yaml when it exists.")
@click.option("--format", "fmt", type=click.Choice(formats.PLAN), default="table", show_default=True)
@click.option("--allow-swap", is_flag=True,
              help="Also consider layer and op swap, each with the least backward_prefetch that hides its copies "
                   "(Ascend only; docs/plan.md, Swap).")
@click.option("--host-bandwidth", default=None, metavar="RATE|DEVICE",
              help="Host link a swap is priced with: 30GB/s, D2H,H2D (28GB/s,33GB/s) or a device (910b, 910c); "
                   "default the 910b's, assumed.")
@click.option("--host-memory", default=None, metavar="SIZE",
              help="Host memory of one node: swap's host bytes per rank x ranks per node must fit it "
                   "(default this machine's).")
@click.option("--model", default=None,
              help="Model family (default: the family the YAML names, as explain shows it; `swapwatch "
                   "families` lists them). Its tensor table is swapwatch/memory/<table>.yaml.")
@click.option("--margin", type=float, default=None, metavar="F",
              help="Fraction of --budget held back instead of the margin's parts (default: the parts, each "
                   "from what is known: the model's recorded error, fragments, workspaces; docs/plan.md).")
@click.option("--keep-offset", is_flag=True,
              help="Keep the YAML's layer split (model.model_config.offset) instead of searching it with the "
                   "recompute levels.")
def plan_cmd(config, budget, run_dirs, output, force, fmt, allow_swap, host_bandwidth, host_memory, model, margin,
             keep_offset):
    """The cheapest recompute (and with --allow-swap, swap) strategy (least time recomputing, swaps
    whose copies hide) whose pool need (predicted peak, model error, fragments, workspaces) fits
    --budget on every stage, written into a copy of CONFIG; CONFIG's own strategy when nothing
    cheaper fits. Exit 0 fits; 1 nothing fits (says the
    lowest reachable peak); 2 bad input."""
    from .engine import codepaths
    from .memory.planner import parse_size
    from .memory.render import render_plan

    doc, cp = codepaths.read(config)
    # --calibrate checked before the link reads the runs for their throughput (swap_link)
    cp.require(doc, "plan", "fit", *(["calibrate"] if run_dirs else []))

    from .commands.outputs import refuse_overwrite, write_text

    size = parse_size(budget) if budget is not None else None
    if output:
        refuse_overwrite(output, force)      # before the search: no work for a file we would not write
    res = cp.fit(doc, "plan", size, run_dirs=run_dirs, allow_swap=allow_swap, model=model, margin=margin,
                 offsets=not keep_offset, link=swap_link(host_bandwidth, host_memory, run_dirs, model, config))
    # the table says the margin's parts and the card under the stages; other formats on stderr
    for line in filter(None, ([res.margin_line()] if fmt != "table" or res.parts is None else []) + res.notes):
        click.echo(f"swapwatch plan: {line}", err=True)
    if output and res.fits:
        write_text(output, res.text, force)  # whole or nothing (temp file + rename), re-checked
        click.echo(f"swapwatch plan: wrote {output}", err=True)
    text = render_plan(res, fmt)
    if text:
        click.echo(text, nl=False)
    if not res.fits and fmt != "table":
        click.echo(f"swapwatch plan: {res.message()}", err=True)
    return res.exit_code



def swap_link(host_bandwidth, host_memory, run_dirs, model, config):
    """The ``swap_cost.Link`` of --host-bandwidth / --host-memory, with the throughput the --calibrate
    runs' step times measure (memory/throughput.py; a run on another device target is not used)."""
    from .memory.budget import parse_size
    from .memory.swap_cost import make_link
    from .memory.throughput import achieved_flops

    mem = parse_size(host_memory, "--host-memory") if host_memory else None
    flops = achieved_flops(run_dirs, model, device_target(config)) if run_dirs else None
    return make_link(host_bandwidth, mem, flops)


def device_target(config):
    from .config import load_config

    return str((load_config(config).context or {}).get("device_target", "Ascend"))


# ---- tune (issue 24) -------------------------------------------------------------------------

@cli.command("tune", context_settings={"ignore_unknown_options": True})
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("--budget", required=True, metavar="SIZE", help="Peak memory per rank: 58GiB, 45MB, 62914560 (bytes).")
@click.option("--max-runs", "max_runs", type=int, default=8, show_default=True,
              help="Most attempts (probes included) to run.")
@click.option("--margin", type=float, default=None, metavar="F",
              help="Fraction of --budget the first plan holds back (default: the calibration's largest "
                   "miss, each probe predicted from the others).")
@click.option("--steps", type=int, default=10, show_default=True,
              help="Steps per attempt (a TrainCallBack stop_step in each attempt's YAML); the first 2 are warm-up.")
@click.option("--dir", "directory", default=None, metavar="D",
              help="Tune directory (default: <config stem>.tune); run again with the same arguments to resume.")
@click.option("--dryrun", is_flag=True, help="Probe with MindSpore's DryRun simulation instead of runs.")
@click.option("--model", default=None, help="Model family (default: the family the YAML names).")
@click.option("--format", "fmt", type=click.Choice(formats.TUNE), default="table", show_default=True)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def tune_cmd(config, budget, max_runs, margin, steps, directory, dryrun, model, fmt, command):
    """Probe, plan, run, verify, measure and bisect: the fastest strategy measured within --budget.

    COMMAND names the config as {config} (or contains CONFIG's path). Writes <dir>/<stem>.tuned.yaml,
    tune.json, tune.txt, tune.png (docs/tune.md). Exit 0 found; 1 nothing fits; 2 bad input."""
    from .engine import codepaths
    from .memory.planner import parse_size
    from .tune.loop import tune
    from .tune.report import render

    doc, cp = codepaths.read(config)
    cp.require(doc, "tune", "fit")
    res = tune(config, parse_size(budget), list(command), max_runs=max_runs, margin=margin, steps=steps,
               directory=directory, dryrun=dryrun, model=model,
               say=lambda line: click.echo(line, err=True))
    click.echo(render(res, fmt), nl=False)
    return res.exit_code

if __name__ == "__main__":
    main()
