from __future__ import annotations

import io
import json
import logging
import sys
import threading

import pytest

from docsim.indexer.logs import configure_logging
from docsim.indexer.settings import LogSettings

pytestmark = pytest.mark.no_sql  # never opens a database (tests/conftest.py checks)


@pytest.fixture()
def restore_logging():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_json_logs_are_one_object_per_line_with_extra_fields(
    restore_logging, capsys: pytest.CaptureFixture
) -> None:
    configure_logging(LogSettings(format="json", level="INFO"))
    logging.getLogger("docsim.test").info("job %d done", 7, extra={"job_id": 7, "seconds": 1.5})
    logging.getLogger("docsim.test").debug("not shown at INFO")
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record["message"] == "job 7 done"
    assert (record["level"], record["logger"]) == ("INFO", "docsim.test")
    assert (record["job_id"], record["seconds"]) == (7, 1.5)
    assert "T" in record["time"]


def test_text_logs_stay_plain(restore_logging, capsys: pytest.CaptureFixture) -> None:
    configure_logging(LogSettings(format="text", level="WARNING"))
    logging.getLogger("docsim.test").info("hidden")
    logging.getLogger("docsim.test").warning("careful")
    err = capsys.readouterr().err
    assert "hidden" not in err
    assert err.strip().endswith("WARNING docsim.test: careful")


def test_logs_follow_stderr_after_it_is_replaced(
    restore_logging, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread that logs after the stderr of configuration time was closed (a CLI test's
    runner, a test's capture) still writes its message, to the stderr of now."""
    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    configure_logging(LogSettings(format="text", level="INFO"))
    first.close()
    second = io.StringIO()
    monkeypatch.setattr(sys, "stderr", second)
    done = threading.Thread(target=logging.getLogger("docsim.test").warning, args=("late",))
    done.start()
    done.join()
    assert second.getvalue().strip().endswith("WARNING docsim.test: late")
    assert "Logging error" not in second.getvalue()
