"""One write's total work is bounded: its documents' characters together
(`max_change_characters`, 413 before any is split) and its time (`write_deadline_seconds`,
503 before the next batch of work); a refused write changes nothing."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from docsim.app.main import create_app

SENTENCE = "The appellant's counsel relied on the earlier judgment of this court. "


def document(doc_id: str, sentences: int) -> dict:
    return {"id": doc_id, "title": "A judgment", "text": SENTENCE * sentences}


def test_a_write_over_its_total_characters_is_413_and_changes_nothing(fresh_settings) -> None:
    settings = fresh_settings(embedded_worker=False, max_change_characters=5_000)
    with TestClient(create_app(settings)) as client:
        three = [document(f"w-{n}", 30) for n in range(3)]  # 2,100 characters each
        answer = client.post("/documents", json={"documents": three})
        assert answer.status_code == 413, answer.text
        assert "DOCSIM_API__MAX_CHANGE_CHARACTERS" in answer.json()["detail"]
        assert all(client.get(f"/documents/w-{n}").status_code == 404 for n in range(3))
        # the same in files
        files = [("file", (f"f-{n}.txt", (SENTENCE * 30).encode(), "text/plain")) for n in range(3)]
        answer = client.post("/documents", files=files)
        assert answer.status_code == 413, answer.text
        assert "DOCSIM_API__MAX_CHANGE_CHARACTERS" in answer.json()["detail"]
        assert client.get("/documents/f-0").status_code == 404
        assert client.post("/documents", json={"documents": three[:2]}).status_code == 200


def test_a_write_past_its_deadline_is_503_and_changes_nothing(fresh_settings) -> None:
    settings = fresh_settings(embedded_worker=False, write_deadline_seconds=1e-6)
    with TestClient(create_app(settings)) as client:
        answer = client.post("/documents", json={"documents": [document("late", 200)]})
        assert answer.status_code == 503, answer.text
        assert "DOCSIM_API__WRITE_DEADLINE_SECONDS" in answer.json()["detail"]
        assert "Retry-After" in answer.headers
        assert client.get("/documents/late").status_code == 404
        files = [("file", ("late-file.txt", (SENTENCE * 200).encode(), "text/plain"))]
        assert client.post("/documents", files=files).status_code == 503
        assert client.get("/documents/late-file").status_code == 404


@pytest.mark.parametrize("seconds", [0, 3_601])
def test_the_write_deadline_is_bounded(fresh_settings, seconds: float) -> None:
    with pytest.raises(ValueError, match="write_deadline_seconds"):
        fresh_settings(embedded_worker=False, write_deadline_seconds=seconds)
