"""``swapwatch events``: one event per line (jsonl / csv), exit 0; bad input: one line on stderr, exit 2."""
import csv
import io
import json
import os

import pytest
from click.testing import CliRunner

from swapwatch.cli import cli, main

LOGS = os.path.join(os.path.dirname(__file__), "..", "fixtures", "logs")


def run(*args):
    return CliRunner().invoke(cli, ["events", *args])


def test_jsonl_one_event_per_line():
    r = run(os.path.join(LOGS, "swap_case3.log"))
    assert r.exit_code == 0
    rows = [json.loads(x) for x in r.output.splitlines()]
    assert [x["layer"] for x in rows if x["kind"] == "action"] == [0, 1, 2, 3]
    assert rows[-1]["values"] == {"attention": 10} and rows[-1]["source"].endswith("swap_case3.log:20")


def test_csv_has_one_column_per_field():
    # issue 16: the detail is flattened into columns (it used to be one JSON blob column)
    r = run(os.path.join(LOGS, "msrun_2ranks"), "--format", "csv")
    assert r.exit_code == 0
    rows = list(csv.DictReader(io.StringIO(r.output)))
    assert list(rows[0])[:3] == ["kind", "rank", "source"] and "detail" not in rows[0]
    assert {"layer", "action", "paths", "loss", "metric", "bytes", "what"} <= set(rows[0])
    assert {row["rank"] for row in rows} >= {"0", "1"}
    step = next(row for row in rows if row["kind"] == "step")
    assert float(step["loss"]) == pytest.approx(10.636) and step["layer"] == ""
    two = next(row for row in rows if row["kind"] == "action" and row["layer"] == "1")
    assert two["paths"] == "attention;feed_forward" and json.loads(two["values"]) == {"attention": 20,
                                                                                       "feed_forward": 15}


@pytest.mark.parametrize("args, needle", [
    (["/no/such/log"], "/no/such/log: no such file or directory"),
    ([os.path.join(LOGS, "msrun_2ranks", "scheduler.log")], "no worker logs among the given paths"),
])
def test_bad_paths_exit_2_with_one_line(capsys, args, needle):
    with pytest.raises(SystemExit) as ei:
        main(["events", *args])
    err = capsys.readouterr().err
    assert ei.value.code == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_empty_dir_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as ei:
        main(["events", str(tmp_path)])
    assert ei.value.code == 2 and "no worker logs here" in capsys.readouterr().err


def test_bad_format_exit_2(capsys):
    with pytest.raises(SystemExit) as ei:
        main(["events", os.path.join(LOGS, "swap_case1.log"), "--format", "xml"])
    assert ei.value.code == 2
