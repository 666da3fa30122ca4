"""``swapwatch tune``: profile, plan, run, measure, bisect (issue 24); see docs/tune.md."""
