"""Failures around the service (issue 26): a database outage, a full disk during a build, a
flipped bit in a stored file, and the retired rows that keep old readers answering."""

from __future__ import annotations

import contextlib
import gc
import json
import shutil
import subprocess
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, text

from docsim.app.core.settings import ApiSettings, ServiceSettings
from docsim.app.main import create_app, served_runtime
from docsim.indexer.settings import DatabaseSettings
from docsim.indexer.store.tables import documents, sentences
from docsim.indexer.store.versions import version_row
from docsim.indexer.text.documents import SourceDocument
from docsim.protocol.requests import SimilarOptions
from tests.app.conftest import FAST_JOBS
from tests.utils.indexes import publish
from tests.utils.postgres import running_server
from tests.utils.waiting import until

DOC = {"id": "failures-01", "title": "Tides", "text": "The tide turns. The moon pulls the sea."}
QUERY = {"document": {"text": "Coffee beans are roasted. Espresso is strong."}, "top_k": 5}


def test_a_database_outage_is_a_503_and_the_service_recovers(
    on_postgres: bool, tmp_path: Path, tiny_encoder_dir: Path, sample_corpus: Path
) -> None:
    if not on_postgres:
        pytest.skip("the outage is of a PostgreSQL server (run with --db postgresql)")
    with running_server() as server:
        settings = ServiceSettings(
            data_dir=tmp_path / "data",
            db=DatabaseSettings(url=server.database()),
            jobs=FAST_JOBS.model_copy(update={"embedded_worker": False}),
            api=ApiSettings(swap_poll_seconds=0.05),
        )
        publish(sample_corpus, settings, tiny_encoder_dir)
        with TestClient(create_app(settings)) as client:
            assert client.post("/similar", json=QUERY).status_code == 200
            # the test server runs without fsync or synchronous commits (speed), so that an
            # immediate stop would lose the last commits, which no production server does
            with served_runtime(client.app).engine.connect() as conn:
                conn.execute(text("CHECKPOINT"))
            server.stop()  # under traffic: immediate shutdown, connections dropped
            for response in (
                client.post("/similar", json=QUERY),  # reads the hits' texts from SQL
                client.get("/ready"),
                client.post("/documents", json={"documents": [DOC]}),
            ):
                assert response.status_code == 503, response.text
                assert "database is unavailable" in response.json()["detail"]
                assert response.headers["retry-after"]
            assert client.get("/health").status_code == 200  # alive: liveness reads no SQL
            server.resume()
            until(lambda: client.get("/ready").status_code == 200)
            again = client.post("/documents", json={"documents": [DOC]})
            assert again.status_code == 200, again.text
            assert client.get("/ready").json()["documents"] == 49


@contextlib.contextmanager
def small_disk(where: Path, megabytes: float) -> Iterator[Path]:
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={int(megabytes * 1024)}k", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _used(path: Path) -> int:
    return shutil.disk_usage(path).used


def _sqlite_bytes(disk: Path) -> int:
    """What the SQLite database and its log take on `disk` (nothing on PostgreSQL)."""
    return sum(f.stat().st_blocks * 512 for f in (disk / "data").glob("docsim.sqlite3*"))


@pytest.mark.parametrize("reencode", [True, False])
def test_a_full_disk_fails_the_build_cleanly(
    reencode: bool,
    tmp_path: Path,
    tiny_encoder_dir: Path,
    sample_corpus: Path,
    on_postgres: bool,
) -> None:
    """A reindex on a disk too small for a second version: the job fails, the served version
    answers as before, and the space of the failed build is given back.

    Re-encoding, the build copies its encoder's export from the cache (on another disk) and
    fills the disk before writing its vectors. Reusing the active version's vectors, it links
    that version's export and fails writing its rows or its files: rows written stay in
    SQLite's log (deleting them needs room in the log too) until the next build removes
    them, and every other byte is given back."""
    with small_disk(tmp_path / "disk", 3.3 if not on_postgres else 2.6) as disk:
        settings = ServiceSettings(
            data_dir=disk / "data",
            jobs=FAST_JOBS.model_copy(update={"allowed_roots": [tmp_path, tiny_encoder_dir]}),
            api=ApiSettings(swap_poll_seconds=0.05),
        )
        publish(sample_corpus, settings, tiny_encoder_dir)
        with TestClient(create_app(settings)) as client:
            before = client.post("/similar", json=QUERY).json()["results"]
            # room for a few files of a second version, not for all of them (nor for a
            # copy of the encoder's export)
            free = shutil.disk_usage(disk).free
            (disk / "ballast").write_bytes(bytes(max(0, free - 400 * 1024)))
            used = _used(disk)
            sqlite_before = _sqlite_bytes(disk)
            body = {"source": "current", "reencode": reencode}
            job = client.post("/jobs/reindex", json=body).json()
            status = {}

            def finished() -> bool:
                status.update(client.get(f"/jobs/{job['job_id']}").json())
                return status["status"] in ("succeeded", "failed")

            until(finished, 120)
            assert status["status"] == "failed", status
            assert "space" in status["error"].lower(), status["error"]
            assert str(disk) not in status["error"]  # no server path
            after = client.post("/similar", json=QUERY)
            assert after.status_code == 200 and after.json()["results"] == before
            assert not list((disk / "data" / "indexes").glob("*.tmp"))
            # SQLite's log keeps the rows of a build that failed after writing them
            kept_rows = 0 if reencode else _sqlite_bytes(disk) - sqlite_before
            assert _used(disk) <= used + kept_rows + 256 * 1024, (used, kept_rows, _used(disk))
            failed = version_row(served_runtime(client.app).engine, 2)
            assert failed is not None
            # `building` where SQLite had no room to record the failure: the next build's
            # `recover_abandoned` removes it then
            assert failed.status in {"failed", "building"}, failed


def test_a_flipped_bit_is_refused_at_load_naming_the_file(fresh_settings) -> None:
    settings = fresh_settings(embedded_worker=False)
    (version,) = (settings.data_dir / "indexes").glob("0*")
    name = json.loads((version / "manifest.json").read_text())["levels"]["sentence"]["vectors_file"]
    target = version / name
    data = bytearray(target.read_bytes())
    data[-7] ^= 0x10  # one bit of one vector
    target.write_bytes(bytes(data))
    with TestClient(create_app(settings)) as client:
        ready = client.get("/ready")
        assert ready.status_code == 503
        assert f"{name} is corrupt" in ready.json()["detail"]
        assert client.post("/similar", json=QUERY).status_code == 503


def test_retired_rows_serve_older_readers_and_are_purged_after(fresh_settings) -> None:
    """A request holding revision r reads the texts of r although a change deleted one of its
    documents meanwhile; once no request holds r, the retired rows are purged."""
    with TestClient(create_app(fresh_settings(embedded_worker=False))) as client:
        runtime = served_runtime(client.app)
        engine = runtime.engine
        with runtime.pinned() as old:  # a request in flight on revision 0
            assert client.delete("/documents/coffee-01").status_code == 200
            assert client.post("/documents", json={"documents": [DOC]}).status_code == 200
            query = old.searcher.query_from_source(
                SourceDocument(doc_id="q", title="", text=QUERY["document"]["text"])
            )
            result = old.searcher.similar(query, SimilarOptions(top_k=48))
            hits = {h.document_id: h for h in result.results}
            assert "coffee-01" in hits and hits["coffee-01"].matches  # texts of revision 0
            assert "failures-01" not in hits
            runtime.purge()  # the pinned revision keeps its rows
            with engine.connect() as conn:
                retired = conn.execute(
                    select(func.count()).where(documents.c.retired_revision.is_not(None))
                ).scalar_one()
            assert retired == 1
        runtime.purge()
        with engine.connect() as conn:
            assert not conn.execute(
                select(func.count()).where(documents.c.retired_revision.is_not(None))
            ).scalar_one()
            gone = conn.execute(
                select(func.count())
                .select_from(sentences)
                .join(documents, documents.c.doc_id == sentences.c.doc_id, isouter=True)
                .where(documents.c.doc_id.is_(None))
            ).scalar_one()
            assert gone == 0  # no unit left behind
        new = client.post("/similar", json={**QUERY, "top_k": 48}).json()["results"]
        assert "coffee-01" not in {r["document_id"] for r in new}


def test_an_old_state_is_released_when_its_last_reader_ends(fresh_settings) -> None:
    """Memory stays bounded under changes: a superseded state lives while a request holds it,
    and not after."""
    with TestClient(create_app(fresh_settings(embedded_worker=False))) as client:
        runtime = served_runtime(client.app)
        with runtime.pinned() as old:
            held = weakref.ref(old)
            for i in range(3):
                body = {"documents": [{**DOC, "id": f"released-{i}"}]}
                assert client.post("/documents", json=body).status_code == 200
            gc.collect()
            assert held() is not None
            del old
        gc.collect()
        assert held() is None, gc.get_referrers(held())
