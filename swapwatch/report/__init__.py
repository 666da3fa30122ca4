"""The report layer: every command's result in every format, and nothing else.

``explain.py`` (table / json / formative), ``verify.py`` (table / json / junit / markdown), ``diff.py``, ``html.py``
(``swapwatch report``'s page), ``rules.py`` (the rule registry as text), ``verdict.py`` (verify's verdict in words),
and the pieces they share: ``layer_table.py`` (every per-layer table's vocabulary), ``finding_groups.py`` (the
"where" of findings), ``indented_json.py``. A renderer reads a result (``model/results.py``) and imports no command
module; no result imports a renderer (tests/test_architecture.py).
"""
