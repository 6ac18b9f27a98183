"""A collection's life on a running server (issue 68): its writes after the first, its
settings' bounds, its keys, and its deletion and creation again."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from docsim.app.core.settings import ApiSettings, ServiceSettings
from docsim.app.main import create_app
from docsim.app.schemas.documents import DocumentsRequest
from docsim.app.services import collections as registry_module
from docsim.app.services.documents import upsert
from docsim.search.settings import SearchSettings
from tests.app.conftest import FAST_JOBS

NOTES = "notes"
QUERY = {"document": {"text": "Roasted coffee beans. Brewing at dawn."}, "top_k": 10}


def _empty_server(tmp_path: Path, tiny_encoder_dir: Path) -> ServiceSettings:
    """Settings over a data directory whose `default` collection has no index yet."""
    return ServiceSettings(
        data_dir=tmp_path / "data",
        jobs=FAST_JOBS.model_copy(
            update={"allowed_roots": [tmp_path, tiny_encoder_dir], "embedded_worker": False}
        ),
        api=ApiSettings(swap_poll_seconds=0.05),
    )


def test_a_new_collection_takes_every_write_while_the_default_has_no_index(
    tmp_path: Path, tiny_encoder_dir: Path
) -> None:
    """Its first write published its first version; every later one answered 503 "no index
    version is active yet" (the writer looked for the default collection's version)."""
    with TestClient(create_app(_empty_server(tmp_path, tiny_encoder_dir))) as client:
        assert client.get("/ready").status_code == 503  # the default has no index
        body = {"name": NOTES, "encoder": str(tiny_encoder_dir)}
        assert client.post("/collections", json=body).status_code == 201
        prefix = f"/collections/{NOTES}"
        written = []
        for i in range(4):
            doc = {"id": f"note-{i}", "text": f"Note {i} on roasted coffee beans. Brew {i}."}
            answer = client.post(f"{prefix}/documents", json={"documents": [doc]})
            assert answer.status_code == 200, (i, answer.text)
            written.append(doc["id"])
        assert client.delete(f"{prefix}/documents/note-0").status_code == 200
        kept = set(written) - {"note-0"}
        assert client.get(prefix).json()["documents"] == len(kept)
        found = client.post(f"{prefix}/similar", json=QUERY)
        assert found.status_code == 200, found.text
        assert {hit["document_id"] for hit in found.json()["results"]} == kept
        assert client.get("/ready").status_code == 503  # the default is still empty


class _Paused:
    """A registry function whose next call, once armed, pauses after it returns (a real
    call): how a request that read or changed SQL just before another request goes on after
    it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, function: str) -> None:
        self.real = getattr(registry_module, function)
        self.reached, self.resume = threading.Event(), threading.Event()
        self.armed = False
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        monkeypatch.setattr(registry_module, function, self)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        result = self.real(*args, **kwargs)
        with self.lock:
            pause, self.armed = self.armed, False
        if pause:
            self.reached.set()
            assert self.resume.wait(60)
        return result

    def run(self, target: Callable[[], object]) -> None:
        """Run `target` in a thread until its call of the function has returned."""
        self.reached.clear()
        self.resume.clear()
        self.armed = True
        self.thread = threading.Thread(target=target)
        self.thread.start()
        assert self.reached.wait(60)

    def finish(self) -> None:
        assert self.thread is not None
        self.resume.set()
        self.thread.join(60)


def test_a_collection_deleted_and_created_again_is_empty_every_round(
    tmp_path: Path, tiny_encoder_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Created again, it answered 503 "is loading its index" in about half the rounds, where
    an empty new collection answers 409. A request that had read the deleted collection's row
    (a listing, a read) replaced the new collection's runtime with one of the old row, and
    the deletion's end stopped whichever runtime held the name, the new one's too; a write of
    a request holding the new runtime then loaded its version where no later request looked.
    Each round: deleted while such requests run, created again, empty (409), and a write of
    a request that holds its runtime is served to the next search."""
    settings = _empty_server(tmp_path, tiny_encoder_dir)
    settings = settings.model_copy(
        update={"api": settings.api.model_copy(update={"swap_poll_seconds": 30.0})}
    )
    body = {"name": NOTES, "encoder": str(tiny_encoder_dir)}
    prefix = f"/collections/{NOTES}"
    reading = _Paused(monkeypatch, "get_collection")
    deleting = _Paused(monkeypatch, "delete_collection")
    app = create_app(settings)
    with TestClient(app) as client:
        registry = app.state.collections
        assert client.post("/collections", json=body).status_code == 201
        deleted: list[int] = []  # the deletion's answer, each round
        for round_ in range(4):
            reading.run(lambda: registry.open(NOTES))  # read the row, then wait
            deleted.clear()
            deleting.run(lambda: deleted.append(client.delete(prefix).status_code))
            assert client.post("/collections", json=body).status_code == 201, round_
            collection = registry.open(NOTES)  # what the new collection's requests hold
            deleting.finish()
            reading.finish()
            assert deleted == [200]
            assert registry.runtime(NOTES) is collection.runtime, round_

            empty = client.post(f"{prefix}/similar", json=QUERY)
            assert empty.status_code == 409, (round_, empty.text)
            assert "has no documents yet" in empty.json()["detail"]
            doc = {"id": f"note-{round_}", "text": "Roasted coffee beans. Brewing at dawn."}
            upsert(collection, None, DocumentsRequest.model_validate({"documents": [doc]}))
            found = client.post(f"{prefix}/similar", json=QUERY)
            assert found.status_code == 200, (round_, found.text)
            assert [hit["document_id"] for hit in found.json()["results"]] == [doc["id"]]


UNSENDABLE_KEYS = [
    ("write_key", "clé-secrète-0123456789abcdef"),  # non-ASCII
    ("write_key", " padded-key-0123456789abcdef"),
    ("write_key", "padded-key-0123456789abcdef "),
    ("write_key", "tabbed-key-0123456789abcdef\t"),
    ("read_key", "lecture-clé-0123456789abcdef"),
]


def test_a_key_no_request_can_carry_is_refused_at_creation(
    fresh_settings, tiny_encoder_dir: Path
) -> None:
    """A key with non-ASCII characters or surrounding spaces was accepted, yet no HTTP request
    carries it as it was given: its owner was locked out of the collection."""
    with TestClient(create_app(fresh_settings())) as client:
        for field, value in UNSENDABLE_KEYS:
            body = {"name": NOTES, "write_key": "owner-key-0123456789abcdef", field: value}
            refused = client.post("/collections", json=body)
            assert refused.status_code == 422, (field, value, refused.text)
            assert field in refused.text and "visible ASCII" in refused.text, refused.text
            assert client.get(f"/collections/{NOTES}").status_code == 404
        spaced = "inner spaces are fine-0123456789"
        body = {"name": NOTES, "write_key": spaced, "encoder": str(tiny_encoder_dir)}
        assert client.post("/collections", json=body).status_code == 201
        change = {"documents": [{"id": "n", "text": "Roasted beans. Brewing."}]}
        written = client.post(
            f"/collections/{NOTES}/documents", json=change, headers={"X-API-Key": spaced}
        )
        assert written.status_code == 200, written.text
        schema = client.get("/openapi.json").json()["components"]["schemas"]
        for field in ("write_key", "read_key"):
            described = schema["CollectionRequest"]["properties"][field]["description"]
            assert "visible ASCII" in described, described


def _over_bound(field: FieldInfo) -> int | float:
    """A value just past the field's upper bound (which every numeric search setting has)."""
    upper = min(m.le for m in field.metadata if hasattr(m, "le"))
    return upper + 1 if field.annotation is int else upper * 2 + 1


def numeric_settings(model: type[BaseModel], prefix: str = "") -> dict[str, FieldInfo]:
    """`dotted.name -> field` of every number among `model`'s settings, its groups' too."""
    found = {}
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found |= numeric_settings(annotation, f"{prefix}{name}.")
        elif annotation in (int, float):
            found[f"{prefix}{name}"] = field
    return found


def nested(dotted: str, value: object) -> dict[str, object]:
    """`{"ot": {"iterations": value}}` for `ot.iterations`."""
    *groups, name = dotted.split(".")
    body: dict[str, object] = {name: value}
    for group in reversed(groups):
        body = {group: body}
    return body


def test_every_numeric_search_setting_of_a_collection_is_bounded(fresh_settings) -> None:
    """`{"search": {"ot_iterations": 100000000}}` was accepted, and an `ot` search then
    worked past its deadline: every number a collection sets is bounded (422 naming it), by
    its name in its group (`ot.iterations`) or by its flat name of before (`ot_iterations`,
    read with a warning for one release)."""
    numeric = numeric_settings(SearchSettings)
    assert {"ot.iterations", "ot.reg", "candidates.refine", "seed"} <= set(numeric)
    unbounded = [n for n, f in numeric.items() if not any(hasattr(m, "le") for m in f.metadata)]
    assert unbounded == []
    with TestClient(create_app(fresh_settings())) as client:
        for name, field in numeric.items():
            body = {"name": NOTES, "search": nested(name, _over_bound(field))}
            refused = client.post("/collections", json=body)
            assert refused.status_code == 422, (name, refused.text)
            assert name in json.dumps(refused.json()["detail"]), refused.text
        body = {"name": NOTES, "search": {"ot_iterations": 100_000_000}}
        with pytest.warns(DeprecationWarning, match="ot_iterations -> ot.iterations"):
            refused = client.post("/collections", json=body)
        assert refused.status_code == 422 and "ot.iterations" in json.dumps(
            refused.json()["detail"]
        )
        body = {"name": NOTES, "search": {"ot_iterations": 2000, "seed": 7}}
        with pytest.warns(DeprecationWarning):
            created = client.post("/collections", json=body)
        assert created.status_code == 201, created.text
        assert created.json()["settings"]["search"] == {"ot": {"iterations": 2000}, "seed": 7}
        assert [c["name"] for c in client.get("/collections").json()["collections"]] == [
            "default",
            NOTES,
        ]
