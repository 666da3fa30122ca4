"""Run MindFormers 2.1.0's real ``PpLayerSetting`` (the r2.x trainer's split of the decoder over pipeline
stages), for tests/test_pynative_stages.py (oracle venv only).

Usage: ``.oracle-venv/bin/python tests/oracle/mf_pp_layers.py < cases.json``: the last stdout line is ``MARK`` +
a JSON list, one result per case: ``{"ranges": [[start, end] per virtual stage]}`` or ``{"error": text}``.

The class is taken from the installed wheel's ``pynative/distributed/pipeline_parallel.py`` itself (its
source, executed alone: the module's own imports, MindSpore's cells and ``hyper_parallel``, which is not on
PyPI, are not needed by it), so the split and the messages under test are MindFormers' own code.
"""
import ast
import importlib.util
import json
import os
import sys
import types
from typing import List, Tuple

MARK = "@@pp-layers-oracle@@"


def pp_layer_setting():
    spec = importlib.util.find_spec("mindformers")
    path = os.path.join(spec.submodule_search_locations[0], "pynative", "distributed", "pipeline_parallel.py")
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "PpLayerSetting")
    ns = {"List": List, "Tuple": Tuple}
    exec(compile(ast.Module(body=[cls], type_ignores=[]), path, "exec"), ns)
    return ns["PpLayerSetting"]


def main():
    cls = pp_layer_setting()
    out = []
    for case in json.load(sys.stdin)["cases"]:
        par = types.SimpleNamespace(pipeline_parallel=case["pp"],
                                    pipeline_parallel_interleave_num=case.get("interleave", 1),
                                    pipeline_parallel_layers_per_stage=case.get("per_stage", "auto"))
        try:
            ls = cls(case["num_layers"], par)
            out.append({"ranges": [list(ls.get_layer_range(v)) for v in range(ls.num_virtual_stages)]})
        except ValueError as exc:
            out.append({"error": str(exc)})
    print(MARK + json.dumps(out))


if __name__ == "__main__":
    main()
