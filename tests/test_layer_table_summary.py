"""layer_table.stage_summary: one line per pipeline stage, its interleave chunks together (a stage
is one device's memory), on the 48-layer, 2-chunk worked example."""
import os

from swapwatch.report import layer_table
from swapwatch.config import load_config
from swapwatch.engine.strategy import plan as make_plan

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_stage_summary_puts_a_stages_interleave_chunks_together():
    plan = make_plan(load_config(os.path.join(ROOT, "fixtures", "configs", "recompute_48l.yaml")))
    lines = layer_table.stage_summary(plan.layers)
    assert len(lines) == 5                              # pipeline_stage 5, two chunks each
    assert lines[0] == "stage 0: layers 0-3, 24-28 (9), full 3, select 6, comm 6, swap 0"
    assert lines[1].startswith("stage 1: layers 4-8, 29-33 (10), full 1,")
