"""parsers.tracebacks.parse: the traceback event sits on the ``Traceback`` line; the exception
and a MindFormers config-check error are read from the lines after it."""
from swapwatch.parsers import tracebacks


def test_traceback_event_at_its_header_and_exception_from_the_following_lines():
    follow = [("w.log:11", '  File "/x/mindformers/core/parallel_config.py", line 42, in check'),
              ("w.log:12", "    raise ValueError(msg)"),
              ("w.log:13", "ValueError: boom")]
    (ev,) = tracebacks.parse(0, "w.log:10", follow)
    assert ev.source == "w.log:10" and ev.rank == 0
    assert ev.data["exception"] == "ValueError" and ev.data["message"] == "boom"
    assert ev.data["frames"] == 1 and ev.data["where"] == "/x/mindformers/core/parallel_config.py:42"
    assert ev.data["exception_source"] == "w.log:13"
    (cut,) = tracebacks.parse(0, "w.log:10", [])          # the file ends after the header
    assert cut.data["exception"] is None and cut.source == "w.log:10"
