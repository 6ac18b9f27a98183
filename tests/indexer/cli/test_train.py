"""The four trained encoders on tiny configurations: training lowers the loss, a resumed run
equals an uninterrupted one, save/load keeps the vectors, and each one indexes and serves."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from fastapi.testclient import TestClient

from app.core.config import ServiceSettings
from app.main import create_app
from indexer.config import JobSettings
from indexer.text.corpus import CorpusFormat
from indexer.text.sentences import SentenceSplitter
from indexer.train import KINDS, run_training, training_documents
from models.loading import load_encoder
from models.training import TrainConfig, TrainingError
from tests.utils.indexes import publish

OPTIONS = {
    "sdr": {"positives": "document"},
    "colde": {"views": 2, "dim": 16},
    "graph": {"edges": "neighbours", "dim": 16, "max_passages": 6},
    "bregman": {"weight": 1.0, "k": 4, "sigma": 2.0},
}


@pytest.fixture(scope="module")
def docs(sample_corpus: Path, splitter: SentenceSplitter):
    return training_documents(sample_corpus, CorpusFormat.auto, splitter, None)


def config(kind: str, base: Path, steps: int, **overrides) -> TrainConfig:
    values = {
        "kind": kind,
        "base": str(base),
        "steps": steps,
        "batch_size": 4,
        "learning_rate": 3e-3,
        "max_tokens": 32,
        "checkpoint_every": 4,
        "precision": "fp32",
        "options": OPTIONS[kind],
    }
    values.update(overrides)
    return TrainConfig(**values)


def run(kind, docs, out, cfg, **kw):  # noqa: ANN001, ANN201
    return run_training(
        kind,
        docs,
        out,
        cfg,
        device=torch.device("cpu"),
        resume=kw.get("resume", False),
        force=kw.get("force", False),
        show_progress=False,
    )


@pytest.mark.parametrize("kind", KINDS)
def test_training_lowers_the_loss_and_the_saved_encoder_serves(
    kind: str, docs, tiny_encoder_dir: Path, tmp_path: Path, sample_corpus: Path
) -> None:
    out = tmp_path / kind
    result = run(kind, docs, out, config(kind, tiny_encoder_dir, steps=24))
    first, last = sum(result.losses[:6]) / 6, sum(result.losses[-6:]) / 6
    assert last < first, (kind, result.losses)
    encoder = load_encoder(out, precision="fp32")
    again = load_encoder(out, precision="fp32")
    texts = ["A loaf rises in a warm kitchen.", "Stars are far away."]
    assert torch.equal(encoder.encode(texts), again.encode(texts))  # save -> load is stable
    assert encoder.identity()["type"] == kind
    vectors = encoder.encode(texts)
    assert torch.allclose(vectors.norm(dim=1), torch.ones(2), atol=1e-5)
    # batching (length-sorted, padded) gives each text the vector it gets alone
    varied = [
        "Tea.",
        "The court held that the appeal must fail on every ground raised. " * 6,
        "A loaf rises in a warm kitchen while the oven heats.",
        "Stars are far away.",
    ]
    alone = torch.cat([encoder.encode([t]) for t in varied])
    assert torch.allclose(encoder.encode(varied), alone, atol=1e-5)

    settings = ServiceSettings(data_dir=tmp_path / "data", jobs=JobSettings(embedded_worker=False))
    built = publish(sample_corpus, settings, encoder)
    assert built.manifest["encoder"]["type"] == kind
    with TestClient(create_app(settings)) as client:
        ranked = client.post("/similar", json={"document_id": "coffee-01", "top_k": 3})
        assert ranked.status_code == 200, ranked.text
        target = ranked.json()["results"][0]["document_id"]
        explained = client.get("/explain", params={"source": "coffee-01", "target": target})
        assert explained.status_code == 200, explained.text
        body = explained.json()
        assert body["encoder"] == encoder.name
        if kind == "colde":
            attention = body["chunk_attention"]
            assert len(attention["source"]) == len(body["source"]["chunks"])
            assert len(attention["target"][0]) == len(body["target"]["chunks"])
        else:
            assert "chunk_attention" not in body


@pytest.mark.parametrize("kind", KINDS)
def test_a_resumed_run_equals_an_uninterrupted_one(
    kind: str, docs, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    whole = run(kind, docs, tmp_path / "whole", config(kind, tiny_encoder_dir, steps=8))
    run(kind, docs, tmp_path / "parts", config(kind, tiny_encoder_dir, steps=4))
    with pytest.raises(TrainingError, match="pass --resume"):
        run(kind, docs, tmp_path / "parts", config(kind, tiny_encoder_dir, steps=8))
    resumed = run(
        kind, docs, tmp_path / "parts", config(kind, tiny_encoder_dir, steps=8), resume=True
    )
    assert resumed.resumed_from == 4
    assert resumed.losses == pytest.approx(whole.losses, rel=1e-5, abs=1e-6)
    texts = ["The bread rose.", "A lighthouse keeper climbed the stairs at night."]
    a = load_encoder(tmp_path / "whole", precision="fp32").encode(texts)
    b = load_encoder(tmp_path / "parts", precision="fp32").encode(texts)
    assert torch.allclose(a, b, atol=1e-5)


def test_bad_requests_get_clear_errors(docs, tiny_encoder_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(TrainingError, match="use --batch-size 48 or less"):
        run("colde", docs, tmp_path / "a", config("colde", tiny_encoder_dir, 2, batch_size=100))
    with pytest.raises(TrainingError, match="--base"):
        run("sdr", docs, tmp_path / "b", config("sdr", tmp_path / "nowhere", 2))
    run("sdr", docs, tmp_path / "c", config("sdr", tiny_encoder_dir, 2))
    with pytest.raises(TrainingError, match="different model"):
        run("graph", docs, tmp_path / "c", config("graph", tiny_encoder_dir, 2))
    with pytest.raises(TrainingError, match="another configuration"):
        run(
            "sdr",
            docs,
            tmp_path / "c",
            config("sdr", tiny_encoder_dir, 4, learning_rate=1.0),
            resume=True,
        )
    replaced = run("graph", docs, tmp_path / "c", config("graph", tiny_encoder_dir, 2), force=True)
    assert replaced.steps == 2
