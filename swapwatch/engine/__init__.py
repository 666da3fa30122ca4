"""The semantics: MindFormers' LayerSetting engine (strategy), the one dispatch on the code path (codepaths), the
plan-vs-log comparison (compare), what a pattern reaches (unmatched).
"""
