"""Per-step memory and step events from inside a MindSpore training job.

Why: MindFormers prints no memory figure per step on any branch, so a run's memory curve needs
something in the training process. This module emits, per step, one SWAPWATCH ``step`` event and
one ``memory`` event whose ``source`` says exactly what was measured:

* ``max_memory_allocated`` (with ``bytes`` = ``memory_allocated()``, ``peak_bytes`` = the max) where
  the device reports it: Ascend and GPU;
* on CPU those calls always return 0 (MindSpore documents it), and the memory-pool peak is only
  logged at process exit (GLOG ``PRE_ACT`` lines, which the log parsers read). The best per-step
  figure left is the process RSS, so the event says ``source: "rss"`` and ``fallback: true``, with
  ``peak_bytes`` = the process's peak RSS. It is framework-dominated (~550 MiB for the tiny model)
  and grows with a bigger compiled graph, so it is a labelled fallback, never a silent substitute
  for the device figure.

Use :class:`MemoryCallback` with ``mindspore.train.Model``, or :func:`record_step` in a custom loop.
"""
from __future__ import annotations

import os
import resource
import sys
from typing import Any, Callable, Dict, Optional

from ..model.event_lines import format_event
from . import emit, env_rank, require_mindspore

Emit = Callable[[str], None]


def device_target() -> str:
    try:
        import mindspore as ms

        return str(ms.get_context("device_target"))
    except Exception:  # noqa: BLE001 - no MindSpore, or no context yet: say so
        return "unknown"


def read_memory() -> Dict[str, Any]:
    """The best memory figure available now, as ``memory`` event fields (without ``step``)."""
    device = device_target()
    if device in ("Ascend", "GPU"):
        try:
            import mindspore as ms

            peak = int(ms.runtime.max_memory_allocated())
            cur = int(ms.runtime.memory_allocated())
            return {"source": "max_memory_allocated", "bytes": cur, "peak_bytes": peak, "device": device}
        except Exception:  # noqa: BLE001 - fall through to the labelled fallback
            pass
    fields: Dict[str, Any] = {"source": "rss", "bytes": _rss(), "device": device, "fallback": True}
    peak = max(_peak_rss(), fields["bytes"])    # ru_maxrss lags the current RSS a little
    if peak:
        fields["peak_bytes"] = peak
    return fields


def _rss() -> int:
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except Exception:  # noqa: BLE001 - psutil missing: /proc
        try:
            with open("/proc/self/statm") as fh:
                return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            return 0


def _peak_rss() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def record_step(step: int, loss: Optional[float] = None, ms: Optional[float] = None, *,
                epoch: Optional[int] = None, rank: Optional[int] = None,
                emit: Emit = emit, memory: bool = True) -> None:
    """Emit the ``step`` event and (``memory=True``) the ``memory`` event of one finished step."""
    rank = env_rank() if rank is None else rank
    step_fields: Dict[str, Any] = {"step": int(step)}
    if loss is not None:
        step_fields["loss"] = float(loss)
    if ms is not None:
        step_fields["ms"] = round(float(ms), 3)
    if epoch is not None:
        step_fields["epoch"] = int(epoch)
    emit(format_event("step", rank, **step_fields))
    if memory:
        emit(format_event("memory", rank, step=int(step), **read_memory()))


def _callback_base():
    try:
        from mindspore.train import Callback
    except ImportError:  # offline use of this module: a plain base keeps imports working
        return object
    return Callback


class MemoryCallback(_callback_base()):  # type: ignore[misc]
    """``mindspore.train.Model`` callback: a ``step`` and a ``memory`` event after every step."""

    def __init__(self, rank: Optional[int] = None, emit: Emit = emit):
        require_mindspore("swapwatch.hooks.memory.MemoryCallback")   # else a callback no Model calls
        super().__init__()
        self.rank = rank
        self.emit = emit
        self._t0 = None

    def on_train_step_begin(self, run_context):
        import time

        self._t0 = time.perf_counter()

    def on_train_step_end(self, run_context):
        import time

        cb = run_context.original_args()
        ms = (time.perf_counter() - self._t0) * 1000 if self._t0 is not None else None
        loss = _loss_value(getattr(cb, "net_outputs", None))
        record_step(cb.cur_step_num, loss, ms, epoch=getattr(cb, "cur_epoch_num", None),
                    rank=self.rank, emit=self.emit)


def _loss_value(out: Any) -> Optional[float]:
    """The loss from a network's outputs (a Tensor, or the first of a tuple)."""
    if isinstance(out, (tuple, list)):
        out = out[0] if out else None
    if out is None:
        return None
    try:
        return float(out.asnumpy()) if hasattr(out, "asnumpy") else float(out)
    except (TypeError, ValueError):
        return None
