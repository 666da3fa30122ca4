"""Build real MindFormers 2.1.0 models from training YAMLs and report what LayerSetting logged (oracle).

Run with the oracle venv's python (real MindFormers 2.1.0 + MindSpore), never with swapwatch's:

    .oracle-venv/bin/python tests/oracle/mf_models.py < cases.json > results.json

stdin: a JSON list of YAML paths (each a whole training YAML, tiny sizes are applied here the way
``tools/extract_layouts.py`` does: only sizes that do not change the layer tree). For each, the
network is built on CPU as ``BaseTrainer.create_network`` does (``tools/extract_layouts.py:build``),
with the YAML's own recompute / swap settings, so every decoder layer, and the MTP layer, is set by
MindFormers' own ``LayerSetting`` on the real layer. stdout: one line ``MARK + JSON``, per YAML
``{"lines": [[level, message], ...], "log": text, "layers": [...]}`` (``lines``: everything
``LayerSetting``'s module logged, in order; ``log``: every MindFormers log line of the build,
formatted by its own stdout handler, i.e. a worker log; ``layers``: per layer LayerSetting set
(``mtp`` for the MTP block's), what its cells and primitives carry afterwards,
``tools/extract_layouts.py:layer_state``) or ``{"error": "ExcType: message", ...}``.
"""
import json
import logging
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
MARK = "@@SWAPWATCH_ORACLE@@"

import extract_layouts  # noqa: E402  (the one build recipe, shared with the layout extraction)

extract_layouts._env()  # pylint: disable=protected-access
from mindformers.tools.logger import get_logger  # noqa: E402


class Capture(logging.Handler):
    def __init__(self, fmt):
        super().__init__(logging.INFO)
        self.fmt = fmt
        self.lines, self.log = [], []

    def emit(self, record):
        if record.pathname.replace("\\", "/").endswith("training_graph/transformer/utils.py"):
            self.lines.append([record.levelname, record.getMessage()])
        self.log.append(self.fmt.format(record) if self.fmt else record.getMessage())


def main():
    paths = json.load(sys.stdin)
    logger = get_logger()
    fmt = next((h.formatter for h in logger.handlers if isinstance(h, logging.StreamHandler)), None)
    for h in list(logger.handlers):
        logger.removeHandler(h)
    capture = Capture(fmt)
    logger.addHandler(capture)
    logger.setLevel(logging.INFO)
    out = []
    for path in paths:
        capture.lines, capture.log = [], []
        try:
            _, seen = extract_layouts.build(extract_layouts.tiny_config(path, keep_strategy=True))
            first = seen[0][0] if seen else None
            layers = [dict(extract_layouts.layer_state(layer), layer=layer_id, mtp=inst != first)
                      for inst, layer_id, layer in seen]
            out.append({"lines": capture.lines, "log": "\n".join(capture.log) + "\n", "layers": layers})
        except Exception as exc:  # noqa: BLE001  (the oracle reports whatever MindFormers raised)
            out.append({"error": f"{type(exc).__name__}: {exc}", "lines": capture.lines})
    sys.stdout.write(MARK + json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
