"""Collections: one service, several collections, each with its own documents, versions, jobs
and keys; the routes at the root are the collection `default`'s."""

from __future__ import annotations

import random
import shutil
import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event

from docsim.app.main import create_app

NOTES = "notes"
A_KEY, B_KEY, A_READ, SERVER = (f"{name}-key-0123456789abcdef" for name in "abrs")


def key(value: str) -> dict[str, str]:
    return {"X-API-Key": value}


def wait_for_job(client: TestClient, prefix: str, job_id: int, headers: dict) -> dict:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job = client.get(f"{prefix}/jobs/{job_id}", headers=headers).json()
        if job["status"] in {"succeeded", "failed", "cancelled"}:
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish: {job}")


def ranked(response) -> list[tuple[str, float]]:
    assert response.status_code == 200, response.text
    return [(hit["document_id"], hit["score"]) for hit in response.json()["results"]]


@pytest.fixture()
def notes_corpus(tmp_path: Path, sample_corpus: Path) -> Path:
    """Six of the sample corpus's documents, under other ids: a second, smaller collection."""
    folder = tmp_path / "notes-corpus"
    folder.mkdir()
    for path in sorted(sample_corpus.glob("*.md"))[:6]:
        shutil.copy(path, folder / f"note-{path.name}")
    return folder


def test_collections_hold_their_own_documents_versions_and_jobs(
    fresh_settings, tiny_encoder_dir: Path, notes_corpus: Path
) -> None:
    with TestClient(create_app(fresh_settings())) as client:
        (default,) = client.get("/collections").json()["collections"]
        assert default["name"] == "default" and default["documents"] == 48
        version = client.get("/ready").json()["index_version"]
        before = ranked(client.post("/similar", json={"document_id": "coffee-01"}))
        assert (
            ranked(client.post("/collections/default/similar", json={"document_id": "coffee-01"}))
            == before
        )

        created = client.post("/collections", json={"name": NOTES, "write_key": A_KEY})
        assert created.status_code == 201, created.text
        assert created.json()["keys"] == {"write": True, "read": False}
        assert created.json()["index_version"] is None
        assert client.post("/collections", json={"name": NOTES}).status_code == 409
        empty = client.post(
            f"/collections/{NOTES}/similar", json={"document": {"text": "Coffee. Beans."}}
        )
        assert empty.status_code == 409 and NOTES in empty.json()["detail"]

        reindex = {"source": str(notes_corpus), "encoder": str(tiny_encoder_dir)}
        prefix = f"/collections/{NOTES}"
        assert client.post(f"{prefix}/jobs/reindex", json=reindex).status_code == 401
        job = client.post(f"{prefix}/jobs/reindex", json=reindex, headers=key(A_KEY)).json()
        done = wait_for_job(client, prefix, job["job_id"], key(A_KEY))
        assert done["status"] == "succeeded" and done["served"], done
        # the job is the collection's: not found, not listed, from the default's routes
        assert client.get(f"/jobs/{job['job_id']}").status_code == 404
        assert job["job_id"] not in [j["job_id"] for j in client.get("/jobs").json()["jobs"]]
        listed = client.get(f"{prefix}/jobs", headers=key(A_KEY)).json()["jobs"]
        assert [j["job_id"] for j in listed] == [job["job_id"]]

        hits = ranked(client.post(f"{prefix}/similar", json={"document_id": "note-astronomy-01"}))
        assert hits and all(doc.startswith("note-") for doc, _ in hits)
        assert len(hits) == 5  # six documents, the query's own left out
        # the default collection is untouched: same version, same ranking
        assert client.get("/ready").json()["index_version"] == version
        assert ranked(client.post("/similar", json={"document_id": "coffee-01"})) == before
        assert client.get("/documents/note-astronomy-01").status_code == 404
        assert client.post("/similar", json={"document_id": "note-astronomy-01"}).status_code == 404

        added = client.post(
            f"{prefix}/documents",
            json={"documents": [{"id": "note-new", "text": "Roasted coffee beans. Brewing."}]},
            headers=key(A_KEY),
        )
        assert added.status_code == 200, added.text
        assert client.get(f"{prefix}/documents/note-new").status_code == 200
        assert client.get("/documents/note-new").status_code == 404

        listing = {c["name"]: c for c in client.get("/collections").json()["collections"]}
        assert listing[NOTES]["documents"] == 7 and listing["default"]["documents"] == 48

        folder = client.app.state.settings.data_dir / "collections" / NOTES
        assert folder.is_dir()
        assert client.delete(f"/collections/{NOTES}").status_code == 401  # it has a write key
        deleted = client.delete(f"/collections/{NOTES}", headers=key(A_KEY))
        assert deleted.status_code == 200 and deleted.json()["versions"] == [done["index_version"]]
        assert not folder.exists()
        assert (
            client.post(
                f"{prefix}/similar", json={"document": {"text": "Coffee. Beans."}}
            ).status_code
            == 404
        )
        assert client.get(f"/collections/{NOTES}").status_code == 404
        assert client.delete("/collections/default").status_code == 409
        assert ranked(client.post("/similar", json={"document_id": "coffee-01"})) == before


@pytest.mark.heavy_sql
def test_a_key_of_one_collection_opens_nothing_in_another(fresh_settings) -> None:
    with TestClient(create_app(fresh_settings(api_key=SERVER))) as client:
        body = {"name": "a", "write_key": A_KEY, "read_key": A_READ}
        assert client.post("/collections", json=body).status_code == 401  # the server's key
        assert client.post("/collections", json=body, headers=key(A_KEY)).status_code == 401
        assert client.post("/collections", json=body, headers=key(SERVER)).status_code == 201
        b = {"name": "b", "write_key": B_KEY}
        assert client.post("/collections", json=b, headers=key(SERVER)).status_code == 201

        query = {"document": {"text": "Coffee. Beans."}}
        change = {"documents": [{"id": "x", "text": "Some text. More text."}]}
        for who, read_a, write_a, read_b, write_b, read_default in [
            # an empty collection's first change publishes its first version (then: 200)
            (None, 401, 401, 409, 401, 200),
            (A_READ, 409, 401, 409, 401, 200),
            (A_KEY, 409, 200, 409, 401, 200),
            (B_KEY, 401, 401, 409, 200, 200),
            (SERVER, 200, 200, 200, 200, 200),
        ]:
            headers = key(who) if who else {}
            seen = (
                client.post("/collections/a/similar", json=query, headers=headers).status_code,
                client.post("/collections/a/documents", json=change, headers=headers).status_code,
                client.post("/collections/b/similar", json=query, headers=headers).status_code,
                client.post("/collections/b/documents", json=change, headers=headers).status_code,
                client.post("/similar", json=query, headers=headers).status_code,
            )
            assert seen == (read_a, write_a, read_b, write_b, read_default), who
        # the default collection's changes need the server's key, not a collection's
        for who, status in [(A_KEY, 401), (B_KEY, 401)]:
            assert client.delete("/documents/coffee-01", headers=key(who)).status_code == status

        def names(headers: dict) -> list[str]:
            found = client.get("/collections", headers=headers).json()["collections"]
            return [c["name"] for c in found]

        assert names({}) == ["b", "default"]  # `a` needs its read key to be seen
        assert names(key(A_READ)) == ["a", "b", "default"]
        assert names(key(B_KEY)) == ["b", "default"]
        assert names(key(SERVER)) == ["a", "b", "default"]
        assert client.get("/collections/a").status_code == 401
        assert client.get("/collections/a", headers=key(A_READ)).json()["keys"] == {
            "write": True,
            "read": True,
        }
        for who in (None, A_READ, B_KEY):  # deleting needs the write key or the server's
            headers = key(who) if who else {}
            assert client.delete("/collections/a", headers=headers).status_code == 401, who
        assert client.delete("/collections/a", headers=key(A_KEY)).status_code == 200
        assert client.delete("/collections/b", headers=key(SERVER)).status_code == 200


def test_a_collection_with_keys_is_never_deleted_anonymously(fresh_settings) -> None:
    """On a server without a key of its own, a collection's keys still guard its deletion;
    it once answered 200 to anyone, who could then create it again with keys of their own."""
    with TestClient(create_app(fresh_settings())) as client:
        for body in (
            {"name": "a", "write_key": A_KEY, "read_key": A_READ},
            {"name": "w", "write_key": B_KEY},
            {"name": "open"},
        ):
            assert client.post("/collections", json=body).status_code == 201

        for who in (None, A_READ, B_KEY):
            headers = key(who) if who else {}
            answer = client.delete("/collections/a", headers=headers)
            assert answer.status_code == 401 and "deleting" in answer.json()["detail"], who
        assert client.delete("/collections/w", headers=key(A_KEY)).status_code == 401
        assert client.delete("/collections/w", headers=key(B_KEY)).status_code == 200
        assert client.delete("/collections/a", headers=key(A_KEY)).status_code == 200
        assert client.delete("/collections/open").status_code == 200
        assert [c["name"] for c in client.get("/collections").json()["collections"]] == ["default"]


BAD_COLLECTIONS = [
    ({"name": "Bad Name"}, "name"),
    ({"name": "-dash"}, "name"),
    ({"name": "x" * 65}, "name"),
    ({"name": "ok", "search": {"no_such_setting": 1}}, "no_such_setting"),
    ({"name": "ok", "search": {"default_method": "telepathy"}}, "default_method"),
    ({"name": "ok", "read_key": A_READ}, "write key"),
    ({"name": "ok", "write_key": "short"}, "write_key"),
    ({"name": "ok", "backend": "gpu-magic"}, "backend"),
    ({"name": "ok", "encoder": "/etc"}, "encoder"),
]


def test_a_bad_collection_is_refused_with_what_is_wrong(fresh_settings) -> None:
    with TestClient(create_app(fresh_settings())) as client:
        for body, field in BAD_COLLECTIONS:
            response = client.post("/collections", json=body)
            assert response.status_code in (403, 422), (body, response.text)
            assert field in response.text, (body, response.text)
        assert [c["name"] for c in client.get("/collections").json()["collections"]] == ["default"]
        assert client.post("/collections/Bad%20Name/similar", json={}).status_code == 422
        absent = client.post("/collections/absent/similar", json={"document": {"text": "A. B."}})
        assert absent.status_code == 404 and "absent" in absent.json()["detail"]


def test_a_collection_loading_holds_up_no_other(fresh_settings, monkeypatch) -> None:
    """The first request to a collection started elsewhere loads its runtime (seconds, for a
    real index); requests to other collections go on meanwhile, and concurrent requests to
    the loading one start it once."""
    from docsim.app.services import collections as registry_module
    from docsim.indexer.store.collections import create_collection
    from docsim.indexer.store.db import make_engine

    settings = fresh_settings()
    engine = make_engine(settings.database_url)
    registry = registry_module.Collections(settings, engine)
    for name in ("slow", "fast"):
        create_collection(engine, name)
    release, starts = threading.Event(), []
    real_start = registry._start

    def start(row):  # noqa: ANN001, ANN202
        starts.append(row.name)
        if row.name == "slow":
            assert release.wait(30)
        return real_start(row)

    monkeypatch.setattr(registry, "_start", start)
    opened: list[str] = []
    waiting = [
        threading.Thread(target=lambda: opened.append(registry.open("slow").name)) for _ in range(3)
    ]
    for thread in waiting:
        thread.start()
    deadline = time.monotonic() + 30
    while "slow" not in starts:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert registry.open("fast").name == "fast"  # while `slow` is still loading
    assert opened == []
    release.set()
    for thread in waiting:
        thread.join(30)
    assert opened == ["slow"] * 3 and sorted(starts) == ["fast", "slow"]
    registry.stop(timeout=5)
    engine.dispose()


@pytest.mark.slow
def test_many_clients_in_several_collections_at_once(
    fresh_settings, tiny_encoder_dir: Path, notes_corpus: Path
) -> None:
    """Readers and writers in two collections, and a client creating, querying and deleting
    a third, all at once against a live server: no 5xx, and each collection ends holding
    exactly the changes acknowledged in it."""
    import httpx

    from tests.utils.live import live_server

    with live_server(fresh_settings()) as url, httpx.Client(base_url=url, timeout=120) as http:
        http.post("/collections", json={"name": NOTES}).raise_for_status()
        reindex = {"source": str(notes_corpus), "encoder": str(tiny_encoder_dir)}
        job = http.post(f"/collections/{NOTES}/jobs/reindex", json=reindex).json()
        deadline = time.monotonic() + 120
        while http.get(f"/collections/{NOTES}/jobs/{job['job_id']}").json()["status"] not in (
            "succeeded",
            "failed",
        ):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        prefixes = {"default": "", NOTES: f"/collections/{NOTES}"}
        errors: list[str] = []
        acked: dict[tuple[str, str], str | None] = {}  # (collection, id) -> text, None: deleted
        stop = threading.Event()
        answered: list[str] = []  # the 200 rankings, per collection

        def check(response: httpx.Response, what: str) -> httpx.Response:
            if response.status_code >= 500:
                errors.append(f"{what}: {response.status_code} {response.text[:200]}")
            return response

        def write(collection: str, writer: int) -> None:
            rng = random.Random(f"{collection}-{writer}")
            with httpx.Client(base_url=url, timeout=120) as own:
                while not stop.is_set():
                    doc_id = f"w-{collection}-{writer}-{rng.randrange(3)}"
                    if acked.get((collection, doc_id)) and rng.random() < 0.3:
                        path = f"{prefixes[collection]}/documents/{doc_id}"
                        if check(own.delete(path), "delete").status_code == 200:
                            acked[(collection, doc_id)] = None
                        continue
                    text = f"Tides and bakers. Note {rng.random()}."
                    body = {"documents": [{"id": doc_id, "text": text}]}
                    response = check(
                        own.post(f"{prefixes[collection]}/documents", json=body), "put"
                    )
                    if response.status_code == 200:
                        acked[(collection, doc_id)] = text

        def read(collection: str) -> None:
            with httpx.Client(base_url=url, timeout=120) as own:
                while not stop.is_set():
                    found = check(
                        own.post(
                            f"{prefixes[collection]}/similar",
                            json={"document": {"text": "Tides turn. Bakers fold."}, "top_k": 20},
                        ),
                        "similar",
                    )
                    if found.status_code == 200:
                        answered.append(collection)
                        ids = [h["document_id"] for h in found.json()["results"]]
                        mine = [i.startswith(("note-", f"w-{NOTES}")) for i in ids]
                        if any(mine) != (collection == NOTES) or len(set(mine)) > 1:
                            errors.append(f"{collection} ranked another collection's: {ids}")

        def admin() -> None:
            with httpx.Client(base_url=url, timeout=120) as own:
                for round_ in range(1000):
                    if stop.is_set():
                        return
                    name = f"temp-{round_}"
                    check(own.post("/collections", json={"name": name}), "create")
                    check(own.post(f"/collections/{name}/similar", json={}), "empty")
                    check(own.get("/collections"), "list")
                    check(own.delete(f"/collections/{name}"), "delete collection")

        threads = [
            threading.Thread(target=write, args=(c, w)) for c in prefixes for w in range(2)
        ] + [threading.Thread(target=read, args=(c,)) for c in prefixes for _ in range(2)]
        threads.append(threading.Thread(target=admin))
        for thread in threads:
            thread.start()
        time.sleep(8)
        stop.set()
        for thread in threads:
            thread.join(120)
        assert errors == []
        print(f"{len(answered)} rankings, {len(acked)} documents changed")
        assert set(answered) == set(prefixes) and len(acked) >= 2 * len(prefixes)
        for (collection, doc_id), text in acked.items():
            other = NOTES if collection == "default" else "default"
            shown = http.get(f"{prefixes[collection]}/documents/{doc_id}")
            assert shown.status_code == (404 if text is None else 200), (collection, doc_id)
            if text is not None:
                assert shown.json()["text"] == text
            assert http.get(f"{prefixes[other]}/documents/{doc_id}").status_code == 404
        names = [c["name"] for c in http.get("/collections").json()["collections"]]
        assert names == ["default", NOTES]


def test_watching_many_collections_reads_sql_once_per_interval(fresh_settings) -> None:
    """Every collection's watcher follows SQL, but the active versions are read for all of
    them at once: the reads per second do not grow with the number of collections (before,
    each collection read its own, 20 times a second at this interval)."""
    settings = fresh_settings(embedded_worker=False)
    poll = settings.api.swap_poll_seconds
    with TestClient(create_app(settings)) as client:
        for i in range(11):
            assert client.post("/collections", json={"name": f"many-{i}"}).status_code == 201
        reads: list[float] = []

        def count(_conn, _cursor, statement: str, *_args) -> None:  # noqa: ANN001
            if "active_versions" in statement:
                reads.append(time.monotonic())

        event.listen(Engine, "before_cursor_execute", count)
        try:
            time.sleep(2.0)
        finally:
            event.remove(Engine, "before_cursor_execute", count)
        per_second = len(reads) / 2.0
        # 12 watchers reading for themselves: 12 / poll = 240 a second; shared: at most one
        # read per half interval, 2 / poll = 40
        assert 0 < per_second <= 2 / poll + 2, per_second
        assert client.get("/ready").status_code == 200  # the default is still served


def test_requests_on_a_collection_deleted_meanwhile_get_404(
    fresh_settings, tiny_encoder_dir: Path, notes_corpus: Path
) -> None:
    """Readers and writers busy on a collection while it is deleted once got 503 "rows purged
    by later document changes" and 409 "another build is running"; each answer is now a
    success (it began before the deletion) or 404, never 503 or 409."""
    with TestClient(create_app(fresh_settings())) as client:
        assert client.post("/collections", json={"name": NOTES}).status_code == 201
        reindex = {"source": str(notes_corpus), "encoder": str(tiny_encoder_dir)}
        job = client.post(f"/collections/{NOTES}/jobs/reindex", json=reindex).json()["job_id"]
        assert wait_for_job(client, f"/collections/{NOTES}", job, {})["status"] == "succeeded"
        deadline = time.monotonic() + 60
        while client.get(f"/collections/{NOTES}").json()["index_version"] is None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        seen: list[int] = []
        stop = threading.Event()

        def reader() -> None:
            query = {"document": {"text": "Stars and planets. Light dims."}, "method": "fused"}
            while not stop.is_set():
                seen.append(client.post(f"/collections/{NOTES}/similar", json=query).status_code)

        def writer(n: int) -> None:
            i = 0
            while not stop.is_set():
                text = f"Note {n} {i}. Beans were roasted."
                body = {"documents": [{"id": f"w{n}-{i}", "text": text}]}
                seen.append(client.post(f"/collections/{NOTES}/documents", json=body).status_code)
                i += 1

        threads = [threading.Thread(target=reader) for _ in range(3)]
        threads += [threading.Thread(target=writer, args=(n,)) for n in range(2)]
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        assert client.delete(f"/collections/{NOTES}").status_code == 200
        time.sleep(1.0)
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        assert seen and set(seen) <= {200, 404}, sorted(set(seen))
        assert 404 in seen


def test_a_new_collection_takes_documents_at_once(fresh_settings, tiny_encoder_dir: Path) -> None:
    """Its first documents once got 409 until a reindex job built a version: now the first
    changes publish it, however many writers race for it, and none of their acknowledged
    documents is lost."""
    with TestClient(create_app(fresh_settings())) as client:
        body = {"name": NOTES, "encoder": str(tiny_encoder_dir), "write_key": A_KEY}
        assert client.post("/collections", json=body).status_code == 201
        prefix = f"/collections/{NOTES}"
        answers: dict[str, int] = {}

        def writer(n: int) -> None:
            for i in range(3):
                doc = {"id": f"w{n}-{i}", "text": f"Writer {n} wrote note {i}. Beans roast."}
                answer = client.post(
                    f"{prefix}/documents", json={"documents": [doc]}, headers=key(A_KEY)
                )
                answers[doc["id"]] = answer.status_code

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)

        assert set(answers.values()) == {200}, answers
        shown = client.get(prefix).json()
        assert shown["documents"] == 12 and shown["index_version"] is not None
        for doc_id in answers:
            assert client.get(f"{prefix}/documents/{doc_id}").status_code == 200, doc_id
        query = {"document": {"text": "Writer 2 wrote note 1. Beans roast."}, "top_k": 12}
        found = ranked(client.post(f"{prefix}/similar", json=query))
        assert {doc_id for doc_id, _ in found} == set(answers)
