"""``hyper_parallel.core.activation_checkpoint`` as MindFormers' ``apply_ac`` uses it
(mindformers/pynative/distributed/activation_checkpoint.py imports CheckpointPolicy, checkpoint_wrapper,
checkpoint_exclude_wrapper, swap_wrapper and SwapManager). See ../../../README.md for what is faithful."""
import contextlib
import enum

from mindspore.nn import Cell

from .swap import AsyncSaveOnCpu, SwapManager, register_tensors


class CheckpointPolicy(enum.Enum):
    """As upstream: the selective-checkpoint policies plus MUST_SWAP (the swap policy's answer)."""
    MUST_SAVE = 0
    PREFER_SAVE = 1
    MUST_RECOMPUTE = 2
    PREFER_RECOMPUTE = 3
    MUST_SWAP = 4


def _noop_contexts():
    return contextlib.nullcontext(), contextlib.nullcontext()


def checkpoint(function, *args, context_fn=None, **kwargs):
    """Upstream's ``checkpoint``: MindSpore's non-reentrant recompute of ``function`` (``early_stop`` and
    ``output_recompute`` pass through from ``apply_ac``)."""
    import mindspore as ms

    return ms.recompute(function, *args, context_fn=context_fn or _noop_contexts, use_reentrant=False, **kwargs)


class _Wrapper(Cell):
    """The wrapped cell (or a callable, as a ``FuncCell`` upstream) is the only child, named
    ``_ckpt_wrapped_module``: a walk by child names through a wrapper finds nothing else (what
    ``apply_ac``'s op swap meets behind a recompute wrapper). Attribute reads go through to it."""

    def __init__(self, module):
        super().__init__(auto_prefix=False)
        if not isinstance(module, Cell):
            module = _FuncCell(module)
        self._ckpt_wrapped_module = module

    def __getattr__(self, name):
        for table in ("_params", "_buffers", "_cells", "_params_list"):
            found = self.__dict__.get(table)
            if found is not None and name in found:
                return found[name]
        inner = self.__dict__.get("_cells", {}).get("_ckpt_wrapped_module")
        if inner is not None:
            return getattr(inner, name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __getitem__(self, key):
        return self._ckpt_wrapped_module[key]

    def cells_and_names(self, cells=None, name_prefix=""):
        for name, cell in super().cells_and_names(cells, name_prefix):
            yield ".".join(p for p in name.split(".") if p != "_ckpt_wrapped_module"), cell

    def parameters_and_names(self, name_prefix="", expand=True):
        for name, param in super().parameters_and_names(name_prefix, expand):
            yield ".".join(p for p in name.split(".") if p != "_ckpt_wrapped_module"), param

    def update_parameters_name(self, prefix="", recurse=True):
        """Parameter names stay the wrapped cell's (upstream keeps full names already set)."""
        del prefix, recurse


class _FuncCell(Cell):
    def __init__(self, fn):
        super().__init__()
        self._fn = fn

    def construct(self, *args, **kwargs):
        return self._fn(*args, **kwargs)


class CheckpointWrapper(_Wrapper):
    def __init__(self, module, checkpoint_fn=None, **checkpoint_fn_kwargs):
        super().__init__(module)
        self.checkpoint_fn = checkpoint_fn
        self.checkpoint_fn_kwargs = checkpoint_fn_kwargs

    def construct(self, *args, **kwargs):
        if self.checkpoint_fn is None:
            return self._ckpt_wrapped_module(*args, **kwargs)
        return self.checkpoint_fn(self._ckpt_wrapped_module, *args, **self.checkpoint_fn_kwargs, **kwargs)


def checkpoint_wrapper(module, checkpoint_fn=None, **checkpoint_fn_kwargs):
    return CheckpointWrapper(module, checkpoint_fn=checkpoint_fn or checkpoint, **checkpoint_fn_kwargs)


class CheckpointExcludeWrapper(_Wrapper):
    """NOT faithful: runs the region (the real wrapper saves it once and hands its output back while the
    enclosing checkpoint recomputes)."""

    def construct(self, *args, **kwargs):
        return self._ckpt_wrapped_module(*args, **kwargs)


def checkpoint_exclude_wrapper(module, *, save_output=True):
    del save_output
    return CheckpointExcludeWrapper(module)


class SwapWrapper(_Wrapper):
    def __init__(self, module, policy_fn=None, group_swap=False):
        super().__init__(module)
        self.policy_fn = policy_fn
        self.group_swap = group_swap

    def construct(self, *args, **kwargs):
        with AsyncSaveOnCpu(self.policy_fn, CheckpointPolicy):
            return self._ckpt_wrapped_module(*args, **kwargs)


def swap_wrapper(module, policy_fn=None, group_swap=False):
    return SwapWrapper(module, policy_fn, group_swap)


def swap_tensor_wrapper(target, tag=None, group_swap=False):
    del tag, group_swap
    return register_tensors(target)


__all__ = ["CheckpointPolicy", "checkpoint", "checkpoint_wrapper", "checkpoint_exclude_wrapper", "swap_wrapper",
           "swap_tensor_wrapper", "SwapManager"]
