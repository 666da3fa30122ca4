"""Bugs mypy pointed at outside ``checks/`` (issue 23), each pinned where it showed.

* A PyNative (r2.x) YAML naming no model (no ``model.model_type``, no ``--model``): ``PynativeConfig.family`` was
  None and ``pynative/resolve.py`` handed it to ``layer_lists``, so ``explain`` refused the YAML with
  "no PyNative layer paths known for model_type None". The family is now decided where a static plan's is
  (``families.default_family``, ``Plan.fam``): the YAML reads on the default family's layer paths, exactly
  as with ``--model`` naming that family.
"""
import json

from cli_helpers import sw

from swapwatch.model.families import default_family
from swapwatch.pynative import config as pconfig

NO_MODEL = """\
model:
  num_hidden_layers: 4
parallelism:
  tensor_parallel: 2
recompute:
  mode: select
  full_recompute_layer: ['0']
  select_module:
    'feed_forward': ['1-2']
"""


def _yaml(tmp_path, text=NO_MODEL):
    path = tmp_path / "pyn_no_model.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_pynative_config_without_a_model_takes_the_default_family(tmp_path):
    cfg = pconfig.load(str(_yaml(tmp_path)))
    assert cfg.family == default_family().name
    named = pconfig.load(str(_yaml(tmp_path, NO_MODEL.replace("model:\n", "model:\n  model_type: qwen3\n"))))
    assert named.family == "qwen3"          # the YAML's own name wins over the default
    assert pconfig.load(str(_yaml(tmp_path)), family="qwen3").family == "qwen3"     # and --model over both


def test_explain_of_a_pynative_yaml_without_a_model_reads_the_default_layer_paths(tmp_path, capsys):
    path = _yaml(tmp_path)
    code, out, err = sw("explain", path, "--format", "json", capsys=capsys)
    assert code in (0, 1), err
    assert "model_type None" not in err
    doc = json.loads(out)
    assert doc["family"] == default_family().name
    # the same plan as naming the default family on the command line
    code2, out2, _ = sw("explain", path, "--format", "json", "--model", default_family().name, capsys=capsys)
    assert code2 == code and json.loads(out2)["layers"] == doc["layers"]
    assert [la["full_recompute"] for la in doc["layers"]] == [True, False, False, False]
    assert [bool(la["select_recompute"]) for la in doc["layers"]] == [False, True, True, False]
