"""An abusive client against a live server (`benchmarks/abuse.py`, a `docsim serve` process):
the largest bodies and filters the limits allow, over and over, beside 8 ordinary clients.
The ordinary clients' p95 latency stays within twice what it is without the abuser, and no
answer is a 5xx (on the sample corpus, the abuser's largest document finishes well within its
deadline)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.utils.scripts import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.no_sql]


def test_one_abusive_client_cannot_stall_eight_ordinary_ones(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    docsim = str(Path(sys.executable).parent / "docsim")
    subprocess.run([docsim, "index", "--data-dir", str(data)], env=env, check=True, timeout=600)
    out = tmp_path / "abuse.json"
    subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "abuse.py"), "--data-dir", str(data),
         "--seconds", "30", "--out", str(out)],
        env=env, check=True, timeout=900, cwd=ROOT,
    )  # fmt: skip
    report = json.loads(out.read_text())["figures"]  # the suite's record (benchmarks/record.py)
    assert report["server_errors"] == {"ordinary": 0, "abuser": 0}, report
    assert report["p95_ratio"] <= 2.0, report
    assert report["with_abuser"]["ordinary"]["statuses"] == {
        "200": report["with_abuser"]["ordinary"]["count"]
    }
