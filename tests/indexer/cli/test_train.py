"""The trained encoders on tiny configurations: training lowers the loss, a resumed run
equals an uninterrupted one, save/load keeps the vectors, and each one indexes and serves;
held-out early stopping, and `docsim train adapt` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from docsim.app.core.settings import ServiceSettings
from docsim.app.main import create_app
from docsim.indexer.choices import CorpusFormat
from docsim.indexer.cli.main import cli
from docsim.indexer.settings import JobSettings
from docsim.indexer.text.sentences import SentenceSplitter
from docsim.indexer.train import EVALUATED, KINDS, run_training, training_documents
from docsim.models.encoders.loading import load_encoder
from docsim.models.encoders.transformer import TransformerEncoder
from docsim.models.training.loop import TrainConfig, TrainingError
from tests.utils.indexes import publish

OPTIONS = {
    "sdr": {"positives": "document"},
    "colde": {"views": 2, "dim": 16},
    "graph": {"edges": "neighbours", "dim": 16, "max_passages": 6},
    "bregman": {"weight": 1.0, "k": 4, "sigma": 2.0},
    "adapt": {"pairs": "neighbours", "temperature": 0.05},
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


@pytest.mark.heavy_sql
@pytest.mark.long
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


@pytest.mark.parametrize("kind", EVALUATED)
def test_held_out_evaluation_keeps_the_best_model(
    kind: str, docs, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / kind
    result = run(kind, docs, out, config(kind, tiny_encoder_dir, steps=4, eval_every=2))
    assert [e["step"] for e in result.evaluations] == [0, 2, 4]  # the base is evaluated too
    assert all(0 < e["mrr"] <= 1 and e["loss"] > 0 for e in result.evaluations)
    best = max(result.evaluations, key=lambda e: e["score"])
    assert result.best_step == best["step"]
    report = json.loads((out / "training.json").read_text())
    assert report["evaluations"] == result.evaluations and report["best_step"] == best["step"]
    saved = json.loads((out / "config.json").read_text())["docsim"]
    assert saved["held_out_documents"] == 4 and saved["documents"] == len(docs) - 4
    load_encoder(out, precision="fp32").encode(["The bread rose."])


def test_sdr_without_mlm_trains(docs, tiny_encoder_dir: Path, tmp_path: Path) -> None:
    cfg = config(
        "sdr", tiny_encoder_dir, steps=2, options={"positives": "document", "mlm_weight": 0}
    )
    assert len(run("sdr", docs, tmp_path / "sdr", cfg).losses) == 2


def test_eval_every_is_refused_where_it_does_not_apply(
    docs, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    with pytest.raises(TrainingError, match="--eval-every applies to sdr, bregman, adapt"):
        run("colde", docs, tmp_path / "c", config("colde", tiny_encoder_dir, 2, eval_every=1))


@pytest.mark.heavy_sql
def test_docsim_train_adapt_then_index(
    sample_corpus: Path, tiny_encoder_dir: Path, tmp_path: Path
) -> None:
    out, runner = tmp_path / "adapted", CliRunner()
    trained = runner.invoke(
        cli,
        ["train", "adapt", "--corpus", str(sample_corpus), "--out", str(out)]
        + ["--base", str(tiny_encoder_dir), "--steps", "6", "--batch-size", "4"]
        + ["--max-tokens", "32", "--eval-every", "3", "--patience", "2", "--no-progress"],
    )
    assert trained.exit_code == 0, trained.output
    summary = json.loads(trained.stdout.strip().splitlines()[-1])
    assert summary["kind"] == "adapt" and summary["best_step"] in (0, 3, 6)
    report = json.loads((out / "training.json").read_text())
    assert [e["step"] for e in report["evaluations"]] == [0, 3, 6]
    assert report["config"]["learning_rate"] == 1e-5 and report["config"]["warmup_steps"] == 1
    # the output is a plain transformer with mean pooling, loaded as the base is
    encoder = load_encoder(out, precision="fp32")
    assert isinstance(encoder, TransformerEncoder) and encoder.pooling == "mean"
    assert encoder.identity()["type"] == "adapt"
    assert encoder.encode(["The bread rose.", "Stars are far away."]).shape == (2, 32)
    data = tmp_path / "data"
    indexed = runner.invoke(
        cli,
        ["index", str(sample_corpus), "--encoder", str(out), "--data-dir", str(data)]
        + ["--no-progress"],
    )
    assert indexed.exit_code == 0, indexed.output
    assert json.loads(indexed.stdout)["counts"]["document"] == 48


@pytest.mark.parametrize(("pairs", "minutes"), [("opening", None), ("excerpt", 0)])
def test_docsim_train_adapt_on_query_shaped_pairs(
    sample_corpus: Path, tiny_encoder_dir: Path, tmp_path: Path, pairs: str, minutes: int | None
) -> None:
    """The query-shaped pair sources train and evaluate from the command line; the choice is
    recorded with the run. `--max-minutes 0` stops after the first step."""
    out = tmp_path / pairs
    bound = [] if minutes is None else ["--max-minutes", str(minutes)]
    trained = CliRunner().invoke(
        cli,
        ["train", "adapt", "--corpus", str(sample_corpus), "--out", str(out), "--pairs", pairs]
        + ["--base", str(tiny_encoder_dir), "--steps", "2", "--batch-size", "4"]
        + ["--max-tokens", "32", "--eval-every", "1", "--no-progress"]
        + bound,
    )
    assert trained.exit_code == 0, trained.output
    report = json.loads((out / "training.json").read_text())
    assert report["config"]["options"]["pairs"] == pairs
    steps = [0, 1, 2] if minutes is None else [0, 1]  # the step run before the bound is evaluated
    assert [e["step"] for e in report["evaluations"]] == steps
    assert report["out_of_time"] == (minutes is not None)
