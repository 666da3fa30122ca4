"""verify without --config: the config read back from the log (config.config_from_log) points each
config finding at the log line of its own section (``initial <section> from dict``), and on the
mcore path a swap finding at the ``Formative layer swap`` / ``op swap`` line the swap came from."""
import os

from swapwatch.config import config_from_log
from swapwatch.parsers import read_logs
from swapwatch.commands.verify import verify

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOGS = os.path.join(ROOT, "fixtures", "logs")


def _line(path, needle):
    return next(i for i, ln in enumerate(open(path, encoding="utf-8"), 1) if needle in ln)


def _findings(path, code):
    return [f for f in verify([path], env={}).findings if f.code == code]


def test_each_section_points_to_its_own_initial_line():
    log = os.path.join(LOGS, "recompute_48l.log")
    rec, swap = _line(log, "initial recompute_config from dict"), _line(log, "initial swap_config from dict")
    first = _line(log, "from dict")
    assert len({first, rec, swap}) == 3                     # moe_config comes first in this log
    cfg, _ = config_from_log(read_logs([log]))
    assert cfg.where("recompute_config.select_recompute") == f"{log}:{rec}"
    assert cfg.where("swap_config.swap") == f"{log}:{swap}"
    (f,) = _findings(log, "SW105")
    assert f.source == f"{log}:{rec}"


def test_mcore_swap_findings_point_to_the_formative_swap_line():
    log = os.path.join(LOGS, "families", "qwen3_swap_conflict.log")
    (f,) = _findings(log, "SW201")
    assert f.layer == 0 and f.source == f"{log}:{_line(log, 'Formative layer swap')}"
    ignored = os.path.join(LOGS, "families", "qwen3_moe_ignored_swap.log")
    (g,) = _findings(ignored, "SW306")                      # the ignored top-level swap_config itself
    assert g.source == f"{ignored}:{_line(ignored, 'initial swap_config from dict')}"
