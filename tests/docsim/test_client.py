"""`docsim.Client` and `docsim.AsyncClient` against a live server (`tests.utils.live`:
uvicorn on a loopback port, in a thread of this process): every route, typed answers equal to
the raw JSON, and errors raised with the server's message."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from docsim import AsyncClient, Client, DocsimError, Hit, JobFailedError, UnitHit
from docsim.app.core.settings import ApiSettings, ServiceSettings
from docsim.indexer.settings import JobSettings
from tests.utils.indexes import PublishedCopies
from tests.utils.live import live_server

KEY = "client-test-key"


@pytest.fixture()
def url(
    tmp_path: Path,
    tiny_encoder_dir: Path,
    sample_corpus: Path,
    published_copies: PublishedCopies,
) -> Iterator[str]:
    settings = ServiceSettings(
        data_dir=tmp_path / "data",
        jobs=JobSettings(
            poll_seconds=0.05,
            heartbeat_seconds=0.1,
            allowed_roots=[tmp_path, tiny_encoder_dir, sample_corpus],
        ),
        api=ApiSettings(api_key=KEY, swap_poll_seconds=0.05),
    )
    published_copies.publish(sample_corpus, settings, tiny_encoder_dir)
    with live_server(settings) as url:
        yield url


def test_the_client_covers_search_documents_and_jobs(
    url: str, sample_corpus: Path, tmp_path: Path
) -> None:
    raw = httpx.post(
        f"{url}/similar", json={"document_id": "baking-01", "top_k": 5, "method": "sdr"}
    ).json()
    with Client(url, api_key=KEY) as docsim:
        assert docsim.health() == {"status": "ok"}
        assert docsim.ready()["documents"] == 48
        # typed answers, equal to the JSON
        found = docsim.similar(document_id="baking-01", top_k=5, method="sdr")
        assert all(isinstance(h, Hit) for h in found)
        assert [(h.document_id, h.score) for h in found] == [
            (r["document_id"], r["score"]) for r in raw["results"]
        ]
        assert found.results[0].model_dump()["matches"] == raw["results"][0]["matches"]
        # text, a JSON document and a file give the same ranking of the same text
        text = (sample_corpus / "coffee-02.md").read_text()
        by_text = docsim.similar(text, method="document")
        by_json = docsim.similar({"title": "", "text": text}, method="document")
        by_file = docsim.similar(sample_corpus / "coffee-02.md", method="document")
        assert [h.document_id for h in by_text] == [h.document_id for h in by_json]
        assert by_file.results[0].document_id == "coffee-02"
        # filters and grouped units, also through a form upload (the filter as JSON text)
        coffee = {"field": "source", "in": [str(sample_corpus / "coffee-01.md")]}
        assert [h.document_id for h in docsim.similar(text, filter=coffee)] == ["coffee-01"]
        upload = docsim.similar(sample_corpus / "baking-02.md", filter=coffee, method="sdr")
        assert [h.document_id for h in upload] == ["coffee-01"]
        units = docsim.similar(
            document_id="oceans-01", granularity="paragraph", group_by="document", top_k=4
        )
        assert all(isinstance(u, UnitHit) for u in units) and len(units) == 4
        assert len({u.document_id for u in units}) == 4
        liked = docsim.similar(like=["baking-01", {"text": text}], unlike=["oceans-01"])
        raw_liked = httpx.post(
            f"{url}/similar",
            json={
                "like": [{"document_id": "baking-01"}, {"document": {"text": text}}],
                "unlike": [{"document_id": "oceans-01"}],
            },
        ).json()
        assert [(h.document_id, h.score) for h in liked] == [
            (r["document_id"], r["score"]) for r in raw_liked["results"]
        ]
        why = docsim.explain(found.query_id, found.results[0].document_id)
        assert why.score == pytest.approx(found.results[0].score, abs=1e-4)
        assert why.target.ref == found.results[0].document_id and why.top_pairs
        # documents: add, read, upload, delete
        changed = docsim.add({"id": "new-1", "title": "New", "text": "A brand new text."})
        assert changed.added == ["new-1"]
        assert docsim.document("new-1").text == "A brand new text."
        assert docsim.upload(sample_corpus / "coffee-03.md", document_id="copy").added == ["copy"]
        assert docsim.delete("new-1").deleted == ["new-1"]
        odd = "case #3? 50%/b"  # a fragment, a query and an escape, were the id not quoted
        assert docsim.add({"id": odd, "text": "An odd id."}).added == [odd]
        assert docsim.document(odd).id == odd
        assert docsim.delete(odd).deleted == [odd]
        # errors carry the server's message
        with pytest.raises(DocsimError) as missing:
            docsim.document("new-1")
        assert missing.value.status_code == 404 and "new-1" in missing.value.detail
        with pytest.raises(DocsimError) as invalid:
            docsim.similar(document_id="baking-01", filter={"field": "nope", "eq": 1})
        assert invalid.value.status_code == 422 and "'nope'" in invalid.value.detail
        with pytest.raises(DocsimError) as bad_top_k:
            docsim.similar(document_id="baking-01", top_k=0)
        assert bad_top_k.value.status_code == 422 and "top_k" in bad_top_k.value.detail
        # jobs: a reindex waited for, with its progress shown
        job = docsim.reindex("current")
        done = docsim.wait(job.job_id, timeout=120, poll=0.05, progress=True)
        assert done.status == "succeeded" and done.served
        assert docsim.ready()["index_version"] == done.index_version
        assert [j.job_id for j in docsim.jobs()] == [job.job_id]
        with pytest.raises(DocsimError) as nowhere:
            docsim.reindex(str(sample_corpus / "nothing-here"))
        assert nowhere.value.status_code == 422 and "does not exist" in nowhere.value.detail
        unreadable = tmp_path / "unreadable"
        unreadable.mkdir()
        (unreadable / "empty.txt").write_text("")
        failed = docsim.reindex(str(unreadable))
        with pytest.raises(JobFailedError) as failure:
            docsim.wait(failed.job_id, timeout=120, poll=0.05)
        assert failure.value.job.status == "failed" and failure.value.job.error
    with Client(url) as anonymous, pytest.raises(DocsimError) as unauthorised:
        anonymous.add({"id": "x", "text": "No key."})
    assert unauthorised.value.status_code == 401 and "X-API-Key" in unauthorised.value.detail


def test_the_async_client_answers_as_the_sync_one(url: str) -> None:
    async def search() -> list[tuple[str, float]]:
        async with AsyncClient(url) as docsim:
            found = await docsim.similar(document_id="oceans-02", top_k=5, method="sdr")
            return [(h.document_id, h.score) for h in found]

    async def change() -> None:
        async with AsyncClient(url, api_key=KEY) as docsim:
            changed = await docsim.add({"id": "async-1", "text": "Tides turn twice a day."})
            assert changed.added == ["async-1"]
            assert (await docsim.document("async-1")).text == "Tides turn twice a day."
            job = await docsim.reindex("current")
            done = await docsim.wait(job.job_id, timeout=120, poll=0.05)
            assert done.served and (await docsim.ready())["documents"] == 49
            with pytest.raises(DocsimError) as missing:
                await docsim.delete("never-there")
            assert missing.value.status_code == 404

    found = asyncio.run(search())
    with Client(url) as docsim:
        again = docsim.similar(document_id="oceans-02", top_k=5, method="sdr")
    assert found == [(h.document_id, h.score) for h in again]
    asyncio.run(change())


def test_the_clients_work_in_a_collection_of_their_own(
    url: str, sample_corpus: Path, tmp_path: Path, tiny_encoder_dir: Path
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    for path in sorted(sample_corpus.glob("*.md"))[:4]:
        (notes / f"note-{path.name}").write_text(path.read_text())
    write = "notes-write-key-0123456789"
    with Client(url, api_key=KEY) as server:
        made = server.create_collection("notes", encoder=str(tiny_encoder_dir), write_key=write)
        assert (made.name, made.index_version, made.keys) == (
            "notes",
            None,
            {"write": True, "read": False},
        )
        assert made.settings == {"encoder": {"name": str(tiny_encoder_dir.resolve())}}
        with pytest.raises(DocsimError) as taken:
            server.create_collection("notes")
        assert taken.value.status_code == 409
    with Client(url, api_key=write, collection="notes") as docsim:
        done = docsim.wait(docsim.reindex(str(notes)).job_id, timeout=120, poll=0.05)
        assert done.served and docsim.ready()["documents"] == 4
        found = docsim.similar(document_id="note-astronomy-01", top_k=10)
        expected = sorted(f"note-{p.stem}" for p in sorted(sample_corpus.glob("*.md"))[1:4])
        assert sorted(h.document_id for h in found) == expected
        with pytest.raises(DocsimError) as elsewhere:  # its key opens nothing in `default`
            docsim.in_collection("default").add({"id": "x", "text": "No. Key."})
        assert elsewhere.value.status_code == 401

    async def listed() -> list[tuple[str, int | None]]:
        async with AsyncClient(url, collection="notes") as docsim:
            hits = await docsim.similar(document_id="note-astronomy-01", top_k=10)
            assert len(hits) == 3
            return [(c.name, c.documents) for c in await docsim.collections()]

    assert asyncio.run(listed()) == [("default", 48), ("notes", 4)]
    with Client(url, api_key=KEY) as server:
        assert server.delete_collection("notes") == [done.index_version]
        assert [c.name for c in server.collections()] == ["default"]


def test_the_clients_search_options_are_the_services() -> None:
    """`SimilarKeywords` types the client's keyword arguments; the one request model defines
    the options: the same names, every one (the query itself aside)."""
    from docsim.client.answers import SimilarKeywords
    from docsim.protocol.requests import SimilarRequest

    served = set(SimilarRequest.model_fields) - {"document", "document_id"}
    assert set(SimilarKeywords.__annotations__) == served


def test_a_choice_is_sent_as_its_value_in_json_and_in_a_form(tmp_path: Path) -> None:
    """The client takes a choice as its enum member or its value: both reach the wire as the
    value, in a JSON body and in an upload's form fields."""
    from docsim.client import calls
    from docsim.protocol.choices import Granularity, Method

    as_json = calls.similar(None, "a", {"method": Method.bm25_rm3}).request
    assert json.loads(json.dumps(as_json.options["json"]))["method"] == "bm25-rm3"
    query = tmp_path / "q.txt"
    query.write_text("A query.")
    options = {"method": Method.sdr, "granularity": Granularity.paragraph, "top_k": 3}
    upload = calls.similar(query, None, options).request  # type: ignore[arg-type]
    try:
        assert upload.options["data"] == {"method": "sdr", "granularity": "paragraph", "top_k": "3"}
    finally:
        for handle in upload.opened:
            handle.close()
