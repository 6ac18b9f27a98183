"""`docsim.local.open_local`: the service in this process, over a data directory, answering
as a server over the same directory answers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from docsim import DocsimError
from docsim.app.core.settings import ServiceSettings
from docsim.app.main import create_app
from docsim.local import open_local
from tests.app.browser import live_server


def test_open_local_indexes_searches_and_explains_as_the_service(
    tmp_path: Path, tiny_encoder_dir: Path, sample_corpus: Path
) -> None:
    """On the run's database (DOCSIM_DB__URL on the PostgreSQL pass, which both read)."""
    data = tmp_path / "data"
    with open_local(data, encoder={"name": str(tiny_encoder_dir)}) as docsim:
        with pytest.raises(DocsimError) as empty:
            docsim.similar("Coffee beans. Roasting.")
        assert empty.value.status_code == 503  # nothing indexed yet
        job = docsim.wait(docsim.reindex(str(sample_corpus)).job_id, timeout=120, poll=0.05)
        assert job.served and docsim.ready()["documents"] == 48
        local = docsim.similar(document_id="coffee-01", top_k=5, method="sdr")
        why = docsim.explain("coffee-01", local.results[0].document_id)
        notes = docsim.in_collection("notes")
        with pytest.raises(DocsimError) as missing:
            notes.similar(document_id="coffee-01")
        assert missing.value.status_code == 404 and "notes" in missing.value.detail
    settings = ServiceSettings(data_dir=data)
    with live_server(create_app(settings)) as url:
        served = httpx.post(
            f"{url}/similar", json={"document_id": "coffee-01", "top_k": 5, "method": "sdr"}
        ).json()
        served_why = httpx.get(
            f"{url}/explain",
            params={"source": "coffee-01", "target": served["results"][0]["document_id"]},
        ).json()
    assert [(h.document_id, h.score) for h in local] == [
        (h["document_id"], h["score"]) for h in served["results"]
    ]
    assert why.score == served_why["score"]
    answered = why.model_dump()
    assert answered["top_pairs"] == served_why["top_pairs"]
    assert answered["source"] == served_why["source"]


@pytest.mark.no_sql
def test_importing_the_client_loads_nothing_of_the_server() -> None:
    """A notebook that talks to a remote docsim needs neither torch, FAISS nor FastAPI."""
    code = (
        "import sys, docsim, docsim.local; "
        "heavy = {'torch', 'faiss', 'fastapi', 'sqlalchemy', 'docsim.app', 'docsim.indexer', "
        "'docsim.models'}; "
        "print(sorted(heavy & set(sys.modules)))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "[]"
