"""A stand-in for ``hyper_parallel`` (not the real package): see ../README.md.

Only ``core.activation_checkpoint`` and ``platform.mindspore.autograd_compat`` behave as the real package
does; any other ``hyper_parallel.*`` module or name is a permissive stub (a class that accepts any
arguments, returns stubs for any attribute and works as a context manager), so MindFormers' PyNative
modules import and a one-rank trainer runs.
"""
import importlib.abc
import importlib.machinery
import sys
import types

#: the stub modules made so far (the DryRun log prints them)
STUBBED: list = []


class _StubMeta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return make_stub(f"{cls.__name__}.{name}")


class Stub(metaclass=_StubMeta):
    """Accepts anything; used as a decorator it returns what it decorates."""

    def __init__(self, *args, **kwargs):
        del args, kwargs

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]
        return Stub()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Stub()

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __mro_entries__(self, bases):
        del bases
        return (Stub,)


def make_stub(name):
    return _StubMeta(name.rsplit(".", 1)[-1], (Stub,), {"__module__": "hyper_parallel.stub"})


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = make_stub(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        STUBBED.append(module.__name__)


class _StubFinder(importlib.abc.MetaPathFinder):
    """Last on sys.meta_path: a ``hyper_parallel.*`` module no file provides becomes a stub module."""

    def find_spec(self, fullname, path, target=None):
        del path, target
        if not fullname.startswith("hyper_parallel."):
            return None
        return importlib.machinery.ModuleSpec(fullname, _StubLoader(), is_package=True)


sys.meta_path.append(_StubFinder())


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    value = make_stub(f"hyper_parallel.{name}")
    globals()[name] = value
    return value
