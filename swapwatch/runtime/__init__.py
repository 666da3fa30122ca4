"""``swapwatch run``: the launcher (runner) and the child process tree it supervises (proctree).
"""
