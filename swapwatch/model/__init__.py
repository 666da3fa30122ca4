"""The domain model: the plan shape both code paths give, the action vocabulary, the families and their layer trees,
the per-layer wording, the results the commands return.
"""
