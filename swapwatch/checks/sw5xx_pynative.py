"""SW501-SW508: the PyNative path's (r2.x ``recompute`` / ``recompute_comm`` / ``swap``) silent traps.

Each rule reads only the ``apply_ac`` view (:class:`swapwatch.pynative.resolve.PynativePlan`): it says so with
``views`` and ``checks.run_rules`` never gives it a LayerSetting plan (no rule asks which path it is on).
``explain`` of a PyNative YAML runs them with the other config rules of that view (SW104).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from ..parsers.model import NoticeEvent
from ..model.plan_view import APPLY_AC
from ..text import ranges
from . import CheckContext, Finding, Rule, register

if TYPE_CHECKING:
    from ..pynative.resolve import PynativePlan


class PynativeRule(Rule):
    """A rule of the ``apply_ac`` view only."""

    views = (APPLY_AC,)


def apply_ac_plan(ctx: CheckContext) -> "PynativePlan":
    """The ``apply_ac`` plan a rule of that view reads, typed. ``run_rules`` gives an ``apply_ac`` rule no other
    plan (``Rule.views``), so anything else is a bug in the rule: it raises, and the rule is reported crashed."""
    from ..pynative.resolve import PynativePlan

    plan = ctx.plan
    if not isinstance(plan, PynativePlan):
        raise TypeError(f"an {APPLY_AC} rule read a plan of the {ctx.view} view (Rule.views)")
    return plan


@register
class SingleCardIgnoresStrategy(PynativeRule):
    """On one card the PyNative trainer never applies the strategy, and says nothing.

    **What it means.** MindFormers' PyNative trainer sets ``enable_parallel = world_size > 1``
    (``pynative/trainer/trainer.py``) and only then runs ``parallelize_model``, whose phase 4 calls
    ``apply_ac``. On a single card ``recompute`` / ``recompute_comm`` / ``swap`` are therefore ignored: no
    ``Set full recompute ...`` line, no map, no warning. This YAML asks for no parallelism (every
    ``parallelism`` degree is 1 or left to default), so a one-card launch is likely.

    **Why it matters.** A one-card smoke test of a memory strategy measures a run without it.

    **How to fix it.** Launch on at least two cards (``msrun --worker_num 2 ...``) to test the strategy,
    e.g. with ``parallelism: {data_parallel_shard: 2}``.
    """

    code = "SW501"
    severity = "warning"
    title = "PyNative: a single-card run ignores recompute/swap without a line"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        plan = apply_ac_plan(ctx)
        if not plan.applied:
            return
        deg = plan.config.degrees
        if any(isinstance(v, int) and v > 1 for v in deg.values()):
            return
        yield self.finding("the strategy is applied only when world_size > 1 (apply_ac runs in "
                           "parallelize_model); parallelism asks for no parallel degree > 1, so a one-card "
                           "launch ignores recompute/swap without any log line",
                           source=plan.config.where("parallelism"))


@register
class SingleCardRan(SingleCardIgnoresStrategy):
    __doc__ = SingleCardIgnoresStrategy.__doc__
    severity = "warning"
    needs = "run"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        """Ranks whose log says ``Current world size: 1.`` and holds no PyNative strategy line."""
        plan = apply_ac_plan(ctx)
        if not plan.applied or ctx.runlog is None:
            return
        for rank, rlog in sorted(ctx.runlog.ranks.items()):
            sizes = [e for e in rlog.events if isinstance(e, NoticeEvent) and e.what == "world_size"]
            if sizes and sizes[-1].data["n"] == 1 and not rlog.actions:
                yield self.finding("the run had world size 1: the PyNative trainer never calls "
                                   "apply_ac on one card, so no recompute/swap was applied",
                                   rank=rank, source=sizes[-1].source)


@register
class ExtraLayerSwapIgnored(PynativeRule):
    """Only the first ``swap.layer_swap`` entry is applied; the others are validated and then ignored.

    **What it means.** ``apply_swap`` takes ``sc.layer_swap[0]["layers"]`` and never looks at the other
    entries (``activation_checkpoint.py:apply_swap``). Their specs must still be valid (they are
    validated), so nothing fails.

    **Why it matters.** Layers you listed in a second entry are not swapped, and no line says so.

    **How to fix it.** Put all layers in one entry::

        swap:
          enable: true
          layer_swap:
            - layers: ['0-3', '6']
    """

    code = "SW502"
    severity = "warning"
    title = "PyNative: only the first swap.layer_swap entry is applied"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        plan = apply_ac_plan(ctx)
        entries = plan.sections["swap"].get("layer_swap") or []
        for idx in plan.ignored_layer_swap:
            yield self.finding(f"swap.layer_swap[{idx}] (layers {entries[idx].get('layers')}) is ignored: "
                               "apply_swap uses layer_swap[0] only; merge the layers into the first entry",
                               op=f"swap.layer_swap[{idx}]", actual=entries[idx].get("layers"),
                               source=plan.config.where("swap.layer_swap"))


@register
class UncheckedSelectRanges(PynativeRule):
    """With ``full_recompute_layer`` set, the ``select_module`` layer specs are never checked.

    **What it means.** ``_validate_recompute_layer_specs`` validates ``full_recompute_layer`` *or* (elif)
    the ``select_module`` specs, never both. With both set, a select spec past the model (or in the wrong
    order) is accepted and the ids that do not exist are skipped when the patterns are expanded.

    **Why it matters.** A select list written for a deeper model, or with a typo, applies to fewer layers
    than it says, with no error and no warning.

    **How to fix it.** Keep select ids within ``0 .. num_layers + MTP layers - 1``::

        recompute:
          mode: select
          full_recompute_layer: ['0-1']
          select_module:
            'mlp': ['2-31']        # was ['2-40'] on a 32-layer model
    """

    code = "SW503"
    severity = "warning"
    title = "PyNative: select_module ranges past the model go unchecked when full_recompute_layer is set"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        plan = apply_ac_plan(ctx)
        total = plan.total_layers
        for key, spec, past in plan.unchecked_select:
            yield self.finding(f"recompute.select_module['{key}'] spec '{spec}' names layer "
                               f"{ranges(past)} past the model (layers 0-{total - 1}); MindFormers does not "
                               "check select specs when full_recompute_layer is set and silently skips them",
                               op=key, expected=f"layer ids 0-{total - 1}", actual=past,
                               source=plan.config.where(f"recompute.select_module.{key}"))


@register
class OpSwapVoid(PynativeRule):
    """An ``op_swap`` path is in the Final Swap map of a layer where it cannot be wrapped, so nothing swaps.

    **What it means.** Recompute is applied before swap. On a layer in ``full_recompute_layer`` the layer
    is already a ``CheckpointWrapper``; under a select-recomputed (or excluded) cell the path leads into a
    wrapper. The swap walk looks for the path's child cells by name and finds nothing behind a wrapper, so
    nothing is wrapped and no ``Set select swap at layer N`` line is logged, yet the layer is listed in the
    "Final Swap Configuration Map" and still gets its prefetch pair.

    **Why it matters.** The log's map says the op is swapped; the memory is not saved.

    **How to fix it.** Drop the layer from the op swap (a fully recomputed layer keeps little to swap), or
    swap the whole layer with ``layer_swap``, or swap the recomputed cell itself (the path of the cell)::

        swap:
          enable: true
          op_swap:
            - op_name: 'mlp\\.linear_fc1'
              layers: ['2-3']      # was ['0-3']; layers 0-1 are in full_recompute_layer
    """

    code = "SW504"
    severity = "warning"
    title = "PyNative: an op swap on a recomputed layer/cell is mapped but swaps nothing"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        plan = apply_ac_plan(ctx)
        for la in plan.layers:
            if not la.op_swap_void:
                continue
            why = ("the layer is fully recomputed (a CheckpointWrapper)" if la.full
                   else "a cell on the path is already wrapped by recompute")
            yield self.finding(f"op swap {', '.join(la.op_swap_void)} is listed in the "
                               f"Final Swap map but swaps nothing: {why}; no 'Set select swap' line, "
                               "prefetch pair kept",
                               layer=la.layer, op=", ".join(la.op_swap_void),
                               source=plan.config.where("swap.op_swap"))


@register
class MixedSurfaces(PynativeRule):
    """A PyNative YAML also carries the static path's strategy keys, which the PyNative trainer ignores.

    **What it means.** The PyNative trainer reads ``recompute`` / ``recompute_comm`` / ``swap``.
    ``TrainConfig`` accepts unknown top-level sections (``allow_extra``), so ``recompute_config``,
    ``swap_config`` or ``parallel_config.recompute`` are kept and never used.

    **Why it matters.** A strategy ported from a static-graph YAML seems configured and is not.

    **How to fix it.** Translate it into the PyNative sections and delete the static keys::

        recompute:
          mode: full
          full_recompute_layer: ['0-15']
    """

    code = "SW505"
    severity = "warning"
    title = "PyNative: static-path strategy keys in a PyNative YAML are ignored"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        plan = apply_ac_plan(ctx)
        if not plan.config.ignored_static_keys:
            return
        keys = plan.config.ignored_static_keys
        yield self.finding(f"this YAML is read by the PyNative trainer (recompute / recompute_comm / swap); "
                           f"it ignores {', '.join(keys)}", op=", ".join(keys),
                           source=plan.config.where(keys[0]))


@register
class ExcludeWithoutRecompute(PynativeRule):
    """``recompute.exclude_op`` with ``mode: 'None'`` has no effect.

    **What it means.** Exclusions are applied only when ``recompute.mode`` is ``full`` or ``select``. With
    ``mode: 'None'`` MindFormers logs a WARNING only if ``recompute_comm`` is enabled; otherwise ``apply_ac``
    never looks at ``exclude_op`` and says nothing.

    **Why it matters.** The ops you meant to keep out of recompute are not excluded from anything.

    **How to fix it.** Set ``recompute.mode`` (``full`` or ``select``) or delete ``exclude_op``.
    """

    code = "SW506"
    severity = "warning"
    title = "PyNative: exclude_op without recompute mode has no effect"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        plan = apply_ac_plan(ctx)
        rc = plan.sections["recompute"]
        if rc.get("mode") == "None" and rc.get("exclude_op"):
            yield self.finding("recompute.exclude_op is set but recompute.mode is 'None': nothing is excluded"
                               + ("" if plan.config.recompute_comm.get("enable") else
                                  " and, without recompute_comm, MindFormers does not even warn"),
                               source=plan.config.where("recompute.exclude_op"))


@register
class CommPathIsCell(PynativeRule):
    """A ``recompute_comm.select_module`` pattern selects a cell; comm recompute only wraps operations.

    **What it means.** Communication recompute wraps callables (the comm ops), not cells. For a path
    ending at a cell MindFormers logs "... is expected to be operation but got cell, this configuration
    will not be effective." at INFO and moves on.

    **Why it matters.** The communication you meant to recompute keeps its activations.

    **Why it matters.** The communication you meant to recompute keeps its activations.

    **How to fix it.** Use a pattern that ends at the operation instead of the cell itself::

        recompute_comm:
          enable: true
          select_module:
            'self_attention\\.reshape': ['0-3']     # not 'self_attention'
    """

    code = "SW507"
    severity = "warning"
    title = "PyNative: a comm recompute path that is a cell is not effective"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        plan = apply_ac_plan(ctx)
        for la in plan.layers:
            if la.comm_cells:
                yield self.finding(f"recompute_comm selects cell {', '.join(la.comm_cells)}: "
                                   "comm recompute only wraps operations, this entry is not effective",
                                   layer=la.layer, op=", ".join(la.comm_cells),
                                   source=plan.config.where("recompute_comm.select_module"))


@register
class OpSwapOverwritten(PynativeRule):
    """Two ``swap.op_swap`` entries with the same ``op_name``: the later one replaces the earlier.

    **What it means.** ``_expand_op_swap`` merges the entries into one ``{op_name: layers}`` dict, so a
    repeated ``op_name`` keeps only the last entry's ``layers``.

    **Why it matters.** The layers of the earlier entry are not swapped, and nothing says so.

    **How to fix it.** One entry per ``op_name`` with all its layers: ``layers: ['0-3', '8']``.
    """

    code = "SW508"
    severity = "warning"
    title = "PyNative: a repeated op_swap op_name overwrites the earlier entry"
    needs = "config"

    def check(self, ctx: CheckContext) -> Iterable[Finding]:
        plan = apply_ac_plan(ctx)
        for idx, name in plan.overwritten_op_swap:
            yield self.finding(f"swap.op_swap[{idx}] repeats op_name '{name}': only this entry's layers are "
                               "used, the earlier entry's are dropped", op=name,
                               source=plan.config.where("swap.op_swap"))
