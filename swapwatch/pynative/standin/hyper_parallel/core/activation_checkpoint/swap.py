"""``SwapManager`` and the saved-tensor hooks of ``swap_wrapper``, as upstream hyper-parallel runs them
(core/activation_checkpoint/swap.py, platform/mindspore/activation_checkpoint/activation_swap.py) for what
the device allocator sees: a swapped tensor's device storage is released (``resize_(0)``) when the layer
that prefetches it finishes its forward and allocated again (``resize_(size)``) when that layer's backward
starts. No host copy is made and there is no copy stream or event: DryRun launches no kernel and
computes no values, so only the allocations and releases matter.
``SWAPS`` counts what happened, for the log."""
import functools
import weakref
from collections import Counter

import mindspore as ms

#: offloaded / released / reloaded tensors and bytes, and copies that could not be made (printed at exit)
SWAPS: Counter = Counter()


def _eligible(tensor):
    """Upstream's base_check_fn: a tensor with device storage that is not a parameter."""
    if not isinstance(tensor, ms.Tensor) or getattr(tensor, "param_info", None) is not None:
        return False
    try:
        return tensor.untyped_storage().size() > 0
    except (RuntimeError, TypeError, ValueError):
        return False


class SwapTensor:
    """One saved tensor of a swap group: device -> host -> (released) -> device."""

    def __init__(self, val):
        self.val = val
        self.size = val.untyped_storage().size()
        self.state = "device"

    def offload(self):
        """The copy to host is not made: DryRun computes no values, and what the device allocator sees
        (the release below and the re-allocation in ``load``) is the real wrapper's."""
        if self.state != "device":
            return
        SWAPS["offloaded"] += 1
        self.state = "d2h"

    def release(self):
        if self.state != "d2h":
            return
        self.val.untyped_storage().resize_(0)
        SWAPS["released"] += 1
        SWAPS["released_bytes"] += self.size
        self.state = "host"

    def load(self):
        if self.state != "host":
            return
        self.val.untyped_storage().resize_(self.size)
        SWAPS["reloaded"] += 1
        self.state = "device"


class Storage:
    """The SwapTensors one swapped region saved in one forward (upstream's Storage); a group holds it
    weakly (hashed by identity)."""

    def __init__(self):
        self.items = []

    def append(self, item):
        self.items.append(item)

    def clear(self):
        self.items.clear()

    def __iter__(self):
        return iter(self.items)

    def __len__(self):
        return len(self.items)


class SwapGroup:
    """The tensors one layer's swapped regions saved in forward. As upstream, the group holds its
    storages weakly: a storage lives as long as the autograd records whose hooks hold it, so nothing
    of an earlier step is released or brought back in a later one."""

    def __init__(self, name):
        self.name = name
        self.storages = weakref.WeakSet()

    @property
    def tensors(self):
        return [t for storage in list(self.storages) for t in storage]

    def launch_offload(self):
        for t in self.tensors:
            t.offload()

    def wait_offload(self):
        for t in self.tensors:
            t.release()

    def launch_load(self):
        for t in self.tensors:
            t.load()

    def wait_load(self):
        """Upstream marks the group back on device here; the storage came back in launch_load."""


class SwapManager:
    """Singleton, as upstream: groups by name, the current group (set by each paired layer's forward
    pre-hook), and the prefetch pairs' hooks."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
            cls._instance.groups = {}
            cls._instance.current = ""
            cls._instance.count = 0
        return cls._instance

    def group(self, name):
        if name not in self.groups:
            self.groups[name] = SwapGroup(name)
        return self.groups[name]

    def get_current_group_name(self):
        return self.current

    def set_current_group_name(self, name):
        self.current = name

    def launch_offload(self, name):
        self.group(name).launch_offload()

    def wait_offload(self, name):
        self.group(name).wait_offload()

    def launch_load(self, name):
        self.group(name).launch_load()

    def wait_load(self, name):
        self.group(name).wait_load()

    def set_forward_prefetch_layer(self, first, second):
        """Pair ``first`` (offloaded after its forward) with ``second`` (whose forward end releases
        ``first``'s device storage and whose backward start brings it back), as upstream."""
        for layer in (first, second):
            if not hasattr(layer, "_swap_group_name"):
                layer._swap_group_name = f"swap_group_{self.count}"
                self.count += 1
                layer._swap_group_order = {"prev": None, "next": None}
            self.group(layer._swap_group_name)
        if first._swap_group_order["next"] is None:
            first._swap_group_order["next"] = second._swap_group_name
        if second._swap_group_order["prev"] is None:
            second._swap_group_order["prev"] = first._swap_group_name
        for layer in (first, second):
            _hooks_once(layer, layer._swap_group_name)


def _forward_pre(name, module, *args):
    del args
    if getattr(module, "_swap_state", None) != "pre_backward":
        SwapManager().set_current_group_name(name)


def _forward(name, module, *args):
    del args
    if getattr(module, "_swap_state", None) == "pre_backward":
        return
    order = module._swap_group_order
    if order["next"]:
        SwapManager().launch_offload(name)
    if order["prev"]:
        SwapManager().wait_offload(order["prev"])


def _backward_pre(name, module, *args):
    del args
    module._swap_state = "pre_backward"
    order = module._swap_group_order
    if order["prev"]:
        SwapManager().launch_load(order["prev"])
    if order["next"]:
        SwapManager().wait_load(name)


def _backward(name, module, *args):
    del name, args
    module._swap_state = "backward"


def _hooks_once(module, name):
    if getattr(module, "_swap_hooks", None):
        return
    module._swap_hooks = [
        module.register_forward_pre_hook(functools.partial(_forward_pre, name)),
        module.register_forward_hook(functools.partial(_forward, name)),
        module.register_backward_pre_hook(functools.partial(_backward_pre, name)),
        module.register_backward_hook(functools.partial(_backward, name)),
    ]


class AsyncSaveOnCpu(ms.saved_tensors_hooks):
    """What a swapped region saves for backward goes into the current group, unless the policy keeps it
    (``CheckpointPolicy.MUST_SAVE``: MindFormers' policy keeps the decoder's inputs) or no paired layer
    set a group (upstream then keeps the tensor on device too)."""

    def __init__(self, policy_fn, policy_enum):
        # upstream's Storage: joins the group on the first swapped tensor and is dropped at the first
        # unpack in backward (the group holds it weakly), so nothing outlives the backward
        storage = Storage()

        def pack(tensor):
            if not _eligible(tensor):
                return tensor
            if policy_fn is not None and policy_fn(tensor) == policy_enum.MUST_SAVE:
                SWAPS["kept_by_policy"] += 1
                return tensor
            name = SwapManager().get_current_group_name()
            if not name:
                SWAPS["no_group"] += 1
                return tensor
            if not storage:
                SwapManager().group(name).storages.add(storage)
            storage.append(SwapTensor(tensor))
            return tensor

        def unpack(tensor):
            storage.clear()
            return tensor

        super().__init__(pack, unpack)


def register_tensors(target):
    """``swap_tensor_wrapper``: not used by MindFormers 2.1.0's ``apply_ac`` (it imports the five names of
    ``__init__``); here it swaps nothing and hands ``target`` back."""
    return target
