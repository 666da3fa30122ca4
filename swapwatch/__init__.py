"""swapwatch: observe and verify recompute / swap strategies of MindSpore and MindFormers training."""
__version__ = "0.1.0"
