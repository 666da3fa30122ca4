"""swapwatch: observe and verify recompute / swap strategies of MindSpore and MindFormers training."""
__version__ = "0.1.0"


def __getattr__(name):
    """``swapwatch.read_logs`` without importing the parsers (and numpy) for every CLI start."""
    if name == "read_logs":
        from .parsers import read_logs

        return read_logs
    raise AttributeError(f"module 'swapwatch' has no attribute {name!r}")
