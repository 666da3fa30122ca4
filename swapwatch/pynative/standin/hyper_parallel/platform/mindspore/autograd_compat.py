"""``Tensor.backward()`` and ``.grad`` on MindSpore PyNative tensors, which MindFormers' PyNative trainer
uses (``Trainer.__init__`` calls :func:`enable_mindspore_backward_compat`, ``_forward_backward`` calls
``loss.backward(sense)`` and the optimizer reads ``param.grad``): written from what upstream's
platform/mindspore/autograd_compat.py installs on ``TensorPy``."""
from mindspore import ops
from mindspore._c_expression import TensorPy, pyboost_detach, run_backward
from mindspore.graph.api import _pynative_executor

_ENABLED = False


def _get_grad(self):
    dtensor_grad = getattr(self, "_dtensor_grad", None)
    return dtensor_grad if dtensor_grad is not None else self._grad


def _set_grad(self, value):
    self._dtensor_grad = None
    self._grad = value


def _get_requires_grad(self):
    return self._requires_grad


def _set_requires_grad(self, value=True):
    if not isinstance(value, bool):
        raise TypeError("The argument `requires_grad` must be bool type")
    self._requires_grad = value


def _grad_fn(self):
    node = self._grad_node
    return None if node and node.is_leaf() else node


def _detach(self):
    out = pyboost_detach(self)
    out._dtensor_grad = None
    return out


def _backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    if gradient is None:
        if self.numel() != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        gradient = ops.ones_like(self)
    if inputs is None:
        inputs = ()
    elif isinstance(inputs, TensorPy):
        inputs = (inputs,)
    else:
        inputs = tuple(inputs)
    if retain_graph is None:
        retain_graph = create_graph
    return run_backward((self,), (gradient,), retain_graph, create_graph, inputs,
                        allow_unreachable=True, accumulate_grad=True)


def enable_mindspore_backward_compat():
    global _ENABLED
    if _ENABLED:
        return
    _pynative_executor.set_grad_flag(True)
    TensorPy.requires_grad = property(_get_requires_grad, _set_requires_grad)
    TensorPy.grad = property(_get_grad, _set_grad)
    TensorPy.backward = _backward
    TensorPy.is_leaf = property(lambda self: self._is_leaf)
    TensorPy.retains_grad = property(lambda self: self._retains_grad)
    TensorPy.retain_grad = lambda self: self._retain_grad()
    TensorPy.grad_fn = property(_grad_fn)
    TensorPy.output_nr = property(lambda self: self._output_index)
    TensorPy.detach = _detach
    _ENABLED = True
