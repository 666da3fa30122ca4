"""The commands' libraries below the CLI: explain, verify, diff, rules, events, and their input/output rules
(file_kind, outputs).
"""
