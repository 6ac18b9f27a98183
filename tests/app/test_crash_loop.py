"""Acknowledged changes survive `kill -9` (issue 26): a real `docsim serve` process takes
changes from two writers and queries from a reader, and is killed with SIGKILL at random
moments, then restarted, again and again.

After every restart the service must come back ready, and hold exactly:
- every change acknowledged (200) before the kill;
- for the change each writer had in flight when the process died, either all of it or none.
Each document is checked by `GET /documents/{id}` (its text) and by a ranking of the whole
collection (it is ranked, or not). Runs on the suite's database (SQLite or PostgreSQL). The
default run kills a few times; `-m slow` fifty times.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from docsim.app.core.settings import ServiceSettings
from docsim.indexer.settings import JobSettings
from tests.utils.indexes import publish
from tests.utils.postgres import free_port

SENTENCES = [
    "The tide turns twice a day along the rocky coast.",
    "Bakers fold butter into the dough before it rests.",
    "A glacier carves its valley over thousands of years.",
    "The court dismissed the appeal for want of evidence.",
]
ABSENT = None  # the expected "text" of a document that is not there


@dataclass
class Writer:
    ids: list[str]
    acked: dict[str, str | None] = field(default_factory=dict)  # id -> text, or ABSENT
    in_flight: tuple[str, str | None] | None = None  # (id, text or ABSENT), not yet answered
    changes: int = 0


def _serve(data: Path, port: int, env: dict[str, str], log: Path) -> subprocess.Popen:
    docsim = str(Path(sys.executable).parent / "docsim")
    with log.open("ab") as out:
        return subprocess.Popen(
            [docsim, "serve", "--data-dir", str(data), "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _until_ready(url: str, process: subprocess.Popen, log: Path, seconds: float = 120) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the server exited:\n{log.read_text()[-3000:]}"
        try:
            response = httpx.get(f"{url}/ready", timeout=5)
            if response.status_code == 200:
                return response.json()
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"the server did not come back ready:\n{log.read_text()[-3000:]}")


def _write(url: str, writer: Writer, rng: random.Random, stop: threading.Event) -> None:
    with httpx.Client(base_url=url, timeout=60) as http:
        while not stop.is_set():
            doc_id = rng.choice(writer.ids)
            delete = writer.acked.get(doc_id) is not ABSENT and rng.random() < 0.4
            text = None if delete else " ".join(rng.sample(SENTENCES, 2)) + f" Mark {rng.random()}."
            writer.in_flight = (doc_id, text)
            try:
                if delete:
                    response = http.delete(f"/documents/{doc_id}")
                else:
                    body = {"documents": [{"id": doc_id, "title": doc_id, "text": text}]}
                    response = http.post("/documents", json=body)
            except httpx.TransportError:
                return  # killed: the change in flight may or may not be there
            if response.status_code == 429:
                writer.in_flight = None
                continue
            assert response.status_code == 200, response.text
            writer.acked[doc_id] = text
            writer.in_flight = None
            writer.changes += 1


def _read(url: str, stop: threading.Event, failures: list[str]) -> int:
    reads = 0
    with httpx.Client(base_url=url, timeout=60) as http:
        while not stop.is_set():
            try:
                response = http.post("/similar", json={"document": {"text": SENTENCES[0]}})
            except httpx.TransportError:
                return reads
            if response.status_code >= 500:
                failures.append(f"{response.status_code} {response.text[:200]}")
            reads += 1
    return reads


def _count_reads(url: str, stop: threading.Event, failures: list[str], out: list[int]) -> None:
    out.append(_read(url, stop, failures))


def _check(url: str, writers: list[Writer]) -> None:
    """What the restarted service holds is what was acknowledged, and each change in flight
    wholly or not at all; the writers then expect what is there."""
    with httpx.Client(base_url=url, timeout=60) as http:
        ranked = http.post("/similar", json={"document": {"text": SENTENCES[0]}, "top_k": 1000})
        assert ranked.status_code == 200, ranked.text
        present = {r["document_id"] for r in ranked.json()["results"]}
        for writer in writers:
            for doc_id in writer.ids:
                allowed = [writer.acked.get(doc_id, ABSENT)]
                if writer.in_flight is not None and writer.in_flight[0] == doc_id:
                    allowed.append(writer.in_flight[1])
                shown = http.get(f"/documents/{doc_id}")
                assert shown.status_code in (200, 404), shown.text
                found = shown.json()["text"] if shown.status_code == 200 else ABSENT
                assert found in allowed, (doc_id, found, allowed)
                assert (doc_id in present) == (found is not ABSENT), doc_id
                writer.acked[doc_id] = found
            writer.in_flight = None


def run_crash_loop(tmp_path: Path, tiny_encoder_dir: Path, sample_corpus: Path, kills: int) -> dict:
    data = tmp_path / "data"
    settings = ServiceSettings(data_dir=data, jobs=JobSettings(embedded_worker=False))
    publish(sample_corpus, settings, tiny_encoder_dir)
    env = {
        **os.environ,
        "DOCSIM_DB__URL": settings.database_url,  # SQLite in `data`, or the run's PostgreSQL
        "DOCSIM_JOBS__EMBEDDED_WORKER": "false",
        "DOCSIM_JOBS__RETIRE_GRACE_SECONDS": "0",
        "HF_HUB_OFFLINE": "1",
    }
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "server.log"
    rng = random.Random(2026)
    writers = [Writer([f"crash-{w}-{i}" for i in range(3)]) for w in range(2)]
    failures: list[str] = []
    reads = 0
    for _ in range(kills):
        process = _serve(data, port, env, log)
        try:
            _until_ready(url, process, log)
            _check(url, writers)
            stop = threading.Event()
            threads = [
                threading.Thread(target=_write, args=(url, w, random.Random(rng.random()), stop))
                for w in writers
            ]
            counted: list[int] = []
            threads.append(
                threading.Thread(target=_count_reads, args=(url, stop, failures, counted))
            )
            for thread in threads:
                thread.start()
            time.sleep(rng.uniform(0.5, 3.0))
            process.send_signal(signal.SIGKILL)  # at a random moment of the traffic
            process.wait(30)
            stop.set()
            for thread in threads:
                thread.join(60)
            reads += sum(counted)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(30)
    process = _serve(data, port, env, log)  # the last restart
    try:
        _until_ready(url, process, log)
        _check(url, writers)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)
    assert not failures, failures[:5]
    counts = {"kills": kills, "changes": sum(w.changes for w in writers), "reads": reads}
    print(f"crash loop: {counts}")
    return counts


@pytest.mark.long
@pytest.mark.heavy_sql
def test_acknowledged_changes_survive_kill_9(
    tmp_path: Path, tiny_encoder_dir: Path, sample_corpus: Path
) -> None:
    counts = run_crash_loop(tmp_path, tiny_encoder_dir, sample_corpus, kills=3)
    assert counts["changes"] > 0


@pytest.mark.slow
def test_acknowledged_changes_survive_fifty_kills(
    tmp_path: Path, tiny_encoder_dir: Path, sample_corpus: Path
) -> None:
    counts = run_crash_loop(tmp_path, tiny_encoder_dir, sample_corpus, kills=50)
    assert counts["changes"] >= 50
