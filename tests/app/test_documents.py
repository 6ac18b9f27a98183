"""Adding, replacing and deleting documents of the served version in place."""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from docsim.app.main import create_app, served_runtime, served_state
from docsim.indexer.builder.pipeline import build_lock, prepare_data_dir
from docsim.indexer.jobs.updates import change_documents
from docsim.indexer.store.units import level_ids
from docsim.indexer.store.versions import active_version
from docsim.indexer.text.corpus import json_document
from docsim.search.served.loaded_index import LoadedIndex
from docsim.search.served.mapped_rows import MappedRows
from docsim.search.served.sentence_scan import SentenceScan

NEW = {
    "id": "zeppelin-01",
    "title": "Airships over the lake",
    "sections": [
        {
            "title": "Hydrogen",
            "text": "The zeppelin rose above Lake Constance. Its hull held hydrogen cells.\n\n"
            "Ground crews walked the airship out of the floating hangar at dawn.",
        },
        {"title": "Passengers", "text": "Passengers dined in a gondola under the zeppelin."},
    ],
}
REPLACEMENT = {
    "id": "zeppelin-01",
    "title": "Glaciers",
    "text": "Glaciers carve valleys over thousands of years. Moraines mark where the ice stopped.",
}


@pytest.fixture()
def client(fresh_settings) -> Iterator[TestClient]:
    with TestClient(create_app(fresh_settings(embedded_worker=False))) as client:
        yield client


def ranked(client: TestClient, body: dict, **options) -> list[str]:
    response = client.post("/similar", json={**body, "top_k": 100, **options})
    assert response.status_code == 200, response.text
    return [r["document_id"] for r in response.json()["results"]]


def as_tensor(vectors: torch.Tensor | MappedRows) -> torch.Tensor:
    """A level's vectors as float32, read from the file where it is mapped."""
    return vectors[0 : len(vectors)].float() if isinstance(vectors, MappedRows) else vectors


def assert_consistent(client: TestClient) -> None:
    """The served index equals what a fresh load from SQL gives, and SQL and FAISS agree."""
    served = served_state(client.app).searcher.index
    engine = served_runtime(client.app).engine
    version = active_version(engine)
    assert served.revision == version.revision
    reloaded = LoadedIndex.load(engine, version, map_sentences=served.sentences_mapped)
    for level in served.ids:
        sql = np.asarray(level_ids(engine, version.version_id, level))
        np.testing.assert_array_equal(served.ids[level], sql)
        np.testing.assert_array_equal(reloaded.ids[level], sql)
        if level in served.indices:  # a compressed service searches no chunks: none held
            np.testing.assert_array_equal(np.sort(served.indices[level].ids()), sql)
        else:
            assert level == "chunk" and served.sentences_mapped
        assert torch.equal(as_tensor(served.vectors[level]), as_tensor(reloaded.vectors[level]))
    for level in ("sentence", "paragraph"):
        scan = served.indices[level]
        if isinstance(scan, SentenceScan):  # a compressed level: as compressing afresh gives
            afresh = SentenceScan.compressing(reloaded, scan.scan.basis, scan.scan.group, level)
            assert torch.equal(scan.scan.rows, afresh.scan.rows)
            assert torch.equal(scan.scan.group_counts, afresh.scan.group_counts)
    assert served.external_ids == reloaded.external_ids


def test_add_replace_delete(client: TestClient) -> None:
    added = client.post("/documents", json={"documents": [NEW]})
    assert added.status_code == 200, added.text
    assert added.json()["added"] == ["zeppelin-01"] and added.json()["revision"] == 1
    assert client.get("/ready").json()["documents"] == 49
    # the tiny test encoder is random: only the document's own text is surely nearest
    posted = {"document": {k: v for k, v in NEW.items() if k != "id"}}
    for method in ("sdr", "document", "bm25", "hybrid"):
        assert ranked(client, posted, method=method)[0] == "zeppelin-01", method
    assert client.post("/similar", json={"document_id": "zeppelin-01"}).status_code == 200
    stored = client.get("/documents/zeppelin-01").json()
    assert stored["title"] == NEW["title"] and [s["title"] for s in stored["sections"]] == [
        "Hydrogen",
        "Passengers",
    ]
    assert_consistent(client)

    replaced = client.post("/documents", json={"documents": [REPLACEMENT]}).json()
    assert replaced["replaced"] == ["zeppelin-01"] and replaced["revision"] == 2
    assert client.get("/ready").json()["documents"] == 49
    assert client.get("/documents/zeppelin-01").json()["text"] == REPLACEMENT["text"]
    glacier = {"document": {"text": REPLACEMENT["text"]}}
    for method in ("sdr", "document", "bm25", "hybrid"):
        assert ranked(client, glacier, method=method)[0] == "zeppelin-01", method
    assert_consistent(client)

    deleted = client.delete("/documents/zeppelin-01")
    assert deleted.status_code == 200 and deleted.json()["deleted"] == ["zeppelin-01"]
    assert client.get("/ready").json()["documents"] == 48
    for method in ("sdr", "document", "bm25", "hybrid"):
        assert "zeppelin-01" not in ranked(client, glacier, method=method)
    for granularity in ("section", "paragraph", "sentence"):
        units = client.post(
            "/similar", json={**glacier, "top_k": 200, "granularity": granularity}
        ).json()["results"]
        assert "zeppelin-01" not in {u["document_id"] for u in units}
    assert client.get("/documents/zeppelin-01").status_code == 404
    again = client.delete("/documents/zeppelin-01")
    assert again.status_code == 404 and "not in the active index" in again.json()["detail"]
    assert_consistent(client)


def test_a_restart_serves_the_same_index(client: TestClient, fresh_settings) -> None:
    client.post("/documents", json={"documents": [NEW]})
    client.delete("/documents/baking-02")
    query = {"document": {"text": "Bread dough rises while the zeppelin waits."}}
    before = client.post("/similar", json={**query, "top_k": 10}).json()["results"]
    with TestClient(create_app(client.app.state.settings)) as restarted:
        after = restarted.post("/similar", json={**query, "top_k": 10}).json()["results"]
    assert [(r["document_id"], round(r["score"], 5)) for r in after] == [
        (r["document_id"], round(r["score"], 5)) for r in before
    ]


def test_a_crash_after_the_sql_commit_loses_nothing(client: TestClient) -> None:
    """The process dies between committing the change and updating its in-memory index: SQL
    holds the change, and the next start serves it."""
    state = served_state(client.app)
    searcher = state.searcher
    change_documents(
        served_runtime(client.app).engine,
        prepare_data_dir(client.app.state.settings.indexes_dir),
        version_id=state.version_id,
        revision=state.revision,
        upserts=[json_document(NEW, "")],
        deletes=["oceans-03"],
        encoder=searcher.encoder,
        splitter=searcher.splitter,
        chunk_tokens=int(searcher.index.manifest["chunk_tokens"]),
    )  # ... and here the process "dies": its in-memory index never hears of it
    with TestClient(create_app(client.app.state.settings)) as restarted:
        ids = ranked(restarted, {"document": {k: v for k, v in NEW.items() if k != "id"}})
        assert ids[0] == "zeppelin-01" and "oceans-03" not in ids
        assert_consistent(restarted)


def test_a_failed_memory_update_reloads_from_sql(client: TestClient, monkeypatch) -> None:
    def broken(*_args, **_kwargs):
        raise RuntimeError("simulated failure while updating FAISS")

    monkeypatch.setattr(LoadedIndex, "with_changes", broken)
    response = client.post("/documents", json={"documents": [NEW]})
    assert response.status_code == 200  # committed; the service loaded it from SQL instead
    own_text = {"document": {k: v for k, v in NEW.items() if k != "id"}}
    assert ranked(client, own_text)[0] == "zeppelin-01"
    assert_consistent(client)


def test_a_crash_inside_the_transaction_changes_nothing(fresh_settings, monkeypatch) -> None:
    import docsim.indexer.jobs.updates

    def broken(_blob):
        raise RuntimeError("simulated crash after the rows were inserted")

    with TestClient(
        create_app(fresh_settings(embedded_worker=False)), raise_server_exceptions=False
    ) as client:
        monkeypatch.setattr(docsim.indexer.jobs.updates, "pack_vectors", broken)
        response = client.post(
            "/documents", json={"documents": [NEW, {**REPLACEMENT, "id": "baking-01"}]}
        )
        assert response.status_code == 500
        assert client.get("/ready").json()["documents"] == 48
        assert client.get("/documents/zeppelin-01").status_code == 404
        assert client.get("/documents/baking-01").json()["title"] != "Glaciers"
        assert active_version(served_runtime(client.app).engine).revision == 0
        assert_consistent(client)
        monkeypatch.undo()
        assert client.post("/documents", json={"documents": [NEW]}).status_code == 200


def test_changes_wait_for_builds_and_bad_documents_are_refused(client: TestClient) -> None:
    indexes = prepare_data_dir(client.app.state.settings.indexes_dir)
    with build_lock(indexes):
        busy = client.post("/documents", json={"documents": [NEW]})
    assert busy.status_code == 409 and "another build is running" in busy.json()["detail"]
    for body, status in (
        ({"documents": []}, 422),
        ({"documents": [{"id": "x", "text": "   "}]}, 422),
        ({"documents": [{"text": "no id"}]}, 422),
        ({"documents": [NEW, NEW]}, 422),
    ):
        response = client.post("/documents", json=body)
        assert response.status_code == status, (body, response.text)
    assert client.get("/ready").json()["documents"] == 48


def test_changes_need_the_api_key(fresh_settings) -> None:
    with TestClient(create_app(fresh_settings(embedded_worker=False, api_key="k"))) as client:
        assert client.post("/documents", json={"documents": [NEW]}).status_code == 401
        assert client.delete("/documents/baking-01").status_code == 401
        assert client.get("/documents/baking-01").status_code == 200
        ok = client.post("/documents", json={"documents": [NEW]}, headers={"X-API-Key": "k"})
        assert ok.status_code == 200


def test_nul_characters_are_a_clear_422_on_every_backend(client: TestClient) -> None:
    """PostgreSQL text cannot hold NUL: found by the fuzz test on the PostgreSQL run (500)."""
    bodies = [
        ("/documents", {"documents": [{"id": "\x00", "text": "0"}]}),
        ("/documents", {"documents": [{"id": "n", "text": "A\x00B."}]}),
        ("/similar", {"document": {"text": "Fine.", "metadata": {"k\x00": 1}}}),
        ("/similar", {"document_id": "coffee-01\x00"}),
        ("/jobs/reindex", {"source": "current\x00"}),
    ]
    for path, body in bodies:
        response = client.post(path, json=body)
        assert response.status_code == 422, (path, body, response.text)
        assert "NUL" in response.text
    for path, params in (
        ("/documents/coffee-01%00", {}),
        ("/explain", {"source": "coffee-01\x00", "target": "coffee-02"}),
    ):
        response = client.get(path, params=params)
        assert response.status_code == 422, (path, response.text)
        assert response.json()["detail"] == (
            "URL parameters must not contain control characters (%00, %0A, %1B, ...)"
        )
    assert client.get("/documents/coffee-01").status_code == 200  # nothing else changed


def test_deleting_a_built_document_keeps_serving(client: TestClient) -> None:
    """Issue 12: a change with removals and no additions (a DELETE of a document from the
    build's files) answered 500, wedged the service and broke every restart."""
    deleted = client.delete("/documents/baking-02")
    assert deleted.status_code == 200, deleted.text
    assert client.get("/ready").json()["documents"] == 47
    for method in ("sdr", "document", "bm25", "hybrid"):
        assert "baking-02" not in ranked(client, {"document_id": "baking-01"}, method=method)
    assert client.delete("/documents/baking-03").status_code == 200  # not a 409 forever
    assert_consistent(client)
    with TestClient(create_app(client.app.state.settings)) as restarted:
        assert restarted.get("/ready").json()["documents"] == 46
        assert_consistent(restarted)


def _wait_until_ready(client: TestClient, seconds: float = 20.0) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        response = client.get("/ready")
        if response.status_code == 200:
            return response.json()
        time.sleep(0.05)
    raise AssertionError(f"not ready after {seconds} s: {response.text}")


def test_a_failed_update_and_reload_serve_503_not_a_stale_index(
    client: TestClient, monkeypatch
) -> None:
    """Issue 12: when neither the in-memory update nor the reload from SQL works, the service
    says so (503 with the reason everywhere, no endless 409) and recovers once loading works."""

    def broken(*_args, **_kwargs):
        raise RuntimeError("simulated failure while loading")

    monkeypatch.setattr(LoadedIndex, "with_changes", broken)
    monkeypatch.setattr(LoadedIndex, "load", broken)
    assert client.delete("/documents/baking-02").status_code == 200  # committed in SQL
    for response in (
        client.get("/ready"),
        client.post("/similar", json={"document_id": "baking-01"}),
        client.post("/documents", json={"documents": [NEW]}),
        client.delete("/documents/baking-03"),
    ):
        assert response.status_code == 503, response.text
        assert "simulated failure while loading" in response.json()["detail"]
        assert response.headers["retry-after"]
    monkeypatch.undo()
    assert _wait_until_ready(client)["documents"] == 47  # the watcher loaded the change
    assert "baking-02" not in ranked(client, {"document_id": "baking-01"})
    assert client.delete("/documents/baking-03").status_code == 200
    assert_consistent(client)


def test_a_start_that_cannot_load_serves_503_then_recovers(fresh_settings, monkeypatch) -> None:
    def broken(*_args, **_kwargs):
        raise RuntimeError("simulated failure at start")

    monkeypatch.setattr(LoadedIndex, "load", broken)
    with TestClient(create_app(fresh_settings(embedded_worker=False))) as client:
        response = client.get("/ready")
        assert response.status_code == 503
        assert "simulated failure at start" in response.json()["detail"]
        monkeypatch.undo()
        assert _wait_until_ready(client)["documents"] == 48
        assert_consistent(client)


def test_a_posted_document_is_split_once(client: TestClient, monkeypatch) -> None:
    """The API splits a document to check its limits; the change reuses that split."""
    import docsim.indexer.jobs.updates

    def split_again(*_args, **_kwargs):
        raise AssertionError("the change split the posted document a second time")

    monkeypatch.setattr(docsim.indexer.jobs.updates, "split_document", split_again)
    response = client.post("/documents", json={"documents": [NEW]})
    assert response.status_code == 200, response.text


def test_a_change_committed_during_a_load_is_loaded_again_not_503(
    client: TestClient, monkeypatch
) -> None:
    """Found by the fuzz test: the watcher's load read the version's additions, then another
    process committed a change, and the load saw SQL rows of the new revision (a mismatch).
    That served 503 until the next retry. Now a load reads one snapshot, and the runtime
    loads again at once when SQL moved meanwhile: it serves the newer revision."""
    import docsim.search.served.loaded_index

    runtime = served_runtime(client.app)
    state = served_state(client.app)
    searcher = state.searcher
    engine = runtime.engine
    plain = docsim.search.served.loaded_index.stored_additions
    committed = []

    def commit_midway(bind, version_id):  # noqa: ANN001, ANN202
        additions = plain(bind, version_id)
        if not committed:  # another process commits between this read and the next ones
            committed.append(
                change_documents(
                    engine,
                    prepare_data_dir(client.app.state.settings.indexes_dir),
                    version_id=version_id,
                    revision=active_version(engine).revision,
                    upserts=[json_document({**REPLACEMENT, "id": "midway-01"}, "")],
                    deletes=[],
                    encoder=searcher.encoder,
                    splitter=searcher.splitter,
                    chunk_tokens=int(searcher.index.manifest["chunk_tokens"]),
                )
            )
        return additions

    assert client.post("/documents", json={"documents": [NEW]}).status_code == 200
    monkeypatch.setattr(docsim.search.served.loaded_index, "stored_additions", commit_midway)
    runtime._load_and_swap_again_if_moved(served_state(client.app))
    assert committed and runtime.failure is None
    assert client.get("/ready").json()["documents"] == 50  # 48 + zeppelin + midway
    assert_consistent(client)


def test_a_change_updates_the_served_searcher_in_place(client: TestClient) -> None:
    """POST and DELETE carry the served BM25 postings over, changed for the changed documents
    only (untouched postings are the same objects), and score as a BM25 built afresh."""
    from docsim.protocol.choices import Method
    from docsim.search.ranking.scorer import QueryScratch
    from docsim.search.searcher import Searcher

    assert ranked(client, {"document_id": "baking-01"}, method="bm25")  # builds BM25
    served = served_state(client.app).searcher
    before = served.context.postings.built_documents
    assert before is not None
    for change in (
        lambda: client.post("/documents", json={"documents": [NEW]}),
        lambda: client.delete("/documents/baking-02"),
    ):
        assert change().status_code == 200
        changed = served_state(client.app).searcher
        carried = changed.context.postings.built_documents
        assert changed is not served and carried is not None
        shared = [t for t, p in before._postings.items() if carried._postings.get(t) is p]
        assert len(shared) > 0.8 * len(before._postings)
        fresh = Searcher(
            changed.index, changed.encoder, changed.splitter, changed.engine, changed.settings
        )
        for source in ("zeppelin-01", "baking-01"):
            query = fresh.query_from_index(source)
            for method in (Method.bm25, Method.bm25_rm3):
                np.testing.assert_allclose(
                    changed.scorers[method].scores(
                        query, np.arange(changed.index.n_documents), QueryScratch()
                    ),
                    fresh.scorers[method].scores(
                        query, np.arange(fresh.index.n_documents), QueryScratch()
                    ),
                    rtol=1e-12,
                )
        served, before = changed, carried
    assert ranked(client, {"document_id": "zeppelin-01"}, method="bm25")
    assert_consistent(client)


def test_unit_ids_are_never_given_twice(client: TestClient) -> None:
    """Replacing or deleting the newest document frees no id for the next one: a cache keyed
    by id (BM25's postings) must never take a new document for an old one."""
    engine = served_runtime(client.app).engine

    def newest_document_id() -> int:
        return max(level_ids(engine, active_version(engine).version_id, "document"))

    seen = set()
    for change in (
        lambda: client.post("/documents", json={"documents": [NEW]}),
        lambda: client.post("/documents", json={"documents": [REPLACEMENT]}),
        lambda: client.delete("/documents/zeppelin-01"),
        lambda: client.post("/documents", json={"documents": [NEW]}),
    ):
        assert change().status_code == 200
        newest = newest_document_id()
        if client.get("/documents/zeppelin-01").status_code == 200:
            assert newest not in seen
            seen.add(newest)
    assert len(seen) == 3
    assert_consistent(client)


def test_a_load_reads_one_snapshot_of_sql(client: TestClient, monkeypatch) -> None:
    """A change committed while a load reads SQL is wholly outside that load: it succeeds at
    once, at the revision it began with, instead of seeing half of the change (a mismatch)."""
    import docsim.search.served.loaded_index

    assert client.post("/documents", json={"documents": [NEW]}).status_code == 200
    engine = served_runtime(client.app).engine
    searcher = served_state(client.app).searcher
    plain = docsim.search.served.loaded_index.stored_additions

    def commit_midway(bind, version_id):  # noqa: ANN001, ANN202
        additions = plain(bind, version_id)
        change_documents(
            engine,
            prepare_data_dir(client.app.state.settings.indexes_dir),
            version_id=version_id,
            revision=active_version(engine).revision,
            upserts=[json_document({**REPLACEMENT, "id": "midway-01"}, "")],
            deletes=["baking-02"],
            encoder=searcher.encoder,
            splitter=searcher.splitter,
            chunk_tokens=int(searcher.index.manifest["chunk_tokens"]),
        )
        return additions

    monkeypatch.setattr(docsim.search.served.loaded_index, "stored_additions", commit_midway)
    loaded = LoadedIndex.load(engine, active_version(engine))
    assert loaded.revision == 1
    assert "zeppelin-01" in loaded.external_ids and "baking-02" in loaded.external_ids
    assert "midway-01" not in loaded.external_ids
    monkeypatch.undo()
    newer = LoadedIndex.load(engine, active_version(engine))
    assert newer.revision == 2 and "midway-01" in newer.external_ids
    assert "baking-02" not in newer.external_ids


def test_a_loaded_version_is_warm_before_it_serves(fresh_settings) -> None:
    """The default method's BM25 postings are built while the version loads, not by the
    first request (seconds on a real collection)."""
    with TestClient(create_app(fresh_settings(embedded_worker=False))) as client:
        assert served_state(client.app).searcher.context.postings.built_documents is not None
