"""`docsim evaluate` over the sample corpus indexed with the tiny encoder."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from typer.testing import CliRunner

from indexer.cli import cli
from indexer.config import Settings
from tests.utils.corpora import write_jsonl
from tests.utils.indexes import publish

runner = CliRunner()


@pytest.fixture()
def data_dir(sample_corpus: Path, tiny_encoder_dir: Path, tmp_path: Path) -> Path:
    data = tmp_path / "data"
    publish(sample_corpus, Settings(data_dir=data), tiny_encoder_dir)
    return data


def evaluate(data: Path, queries: Path, qrels: Path, *options: str):
    return runner.invoke(
        cli,
        [
            "evaluate",
            "--data-dir",
            str(data),
            "--queries",
            str(queries),
            "--qrels",
            str(qrels),
            *options,
        ],
    )


def test_bm25_evaluates_a_query_without_indexed_words(
    data_dir: Path, sample_corpus: Path, tmp_path: Path
) -> None:
    queries = write_jsonl(
        tmp_path / "queries.jsonl",
        [
            {"qid": "stop", "text": "The of and. It is not that."},
            {"qid": "baking", "text": (sample_corpus / "baking-01.md").read_text()},
        ],
    )
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("stop Q0 oceans-01 1\nbaking Q0 baking-02 1\n")
    out, run = tmp_path / "evaluation.json", tmp_path / "run.txt"
    result = evaluate(
        data_dir, queries, qrels, "--method", "bm25", "--out", str(out), "--run-out", str(run)
    )
    assert result.exit_code == 0, f"{result.exception!r}\n{result.output}"
    per_query = json.loads(out.read_text())["methods"]["bm25"]["per_query"]
    assert set(per_query) == {"stop", "baking"}
    stop_lines = [line.split() for line in run.read_text().splitlines() if line.startswith("stop")]
    assert len(stop_lines) == 48 and {line[4] for line in stop_lines} == {"0.000000"}


def test_unknown_judged_queries_and_documents_are_warned_about(
    data_dir: Path, sample_corpus: Path, tmp_path: Path, caplog, monkeypatch
) -> None:
    # the CLI's logging setup replaces the root handlers, caplog's among them
    monkeypatch.setattr("indexer.cli._setup_logging", lambda verbose: None)
    queries = write_jsonl(
        tmp_path / "queries.jsonl",
        [{"qid": "q1", "text": (sample_corpus / "baking-01.md").read_text()}],
    )
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(
        "q1 Q0 baking-02 1\n"
        "q1 Q0 gone-01 1\n"
        "q1 Q0 gone-02 0\n"
        "q2 Q0 baking-03 1\n"
        "q2 Q0 gone-01 1\n"
        "q3 Q0 oceans-01 1\n"
    )
    out = tmp_path / "evaluation.json"
    with caplog.at_level(logging.WARNING):
        result = evaluate(data_dir, queries, qrels, "--method", "document", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert set(json.loads(out.read_text())["methods"]["document"]["per_query"]) == {"q1"}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        "2 judged queries are not in the queries file" in w and "q2, q3" in w for w in warnings
    ), warnings
    assert any(
        "2 judged documents are not in the index" in w and "gone-01, gone-02" in w for w in warnings
    ), warnings


def test_a_query_that_cannot_run_scores_0_and_the_rest_is_evaluated(
    data_dir: Path, sample_corpus: Path, tmp_path: Path
) -> None:
    """A query without a sentence, or by a document id the index lacks, is warned about and
    scores 0 (it stays in the means); the other queries are evaluated as usual."""
    queries = write_jsonl(
        tmp_path / "queries.jsonl",
        [
            {"qid": "empty", "text": "  ...  "},
            {"qid": "gone", "document_id": "no-such-document"},
            {"qid": "baking", "text": (sample_corpus / "baking-01.md").read_text()},
        ],
    )
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("empty Q0 oceans-01 1\ngone Q0 oceans-02 1\nbaking Q0 baking-02 1\n")
    out = tmp_path / "evaluation.json"
    result = evaluate(data_dir, queries, qrels, "--method", "sdr", "--out", str(out))
    assert result.exit_code == 0, f"{result.exception!r}\n{result.output}"
    per_query = json.loads(out.read_text())["methods"]["sdr"]["per_query"]
    assert set(per_query) == {"empty", "gone", "baking"}
    assert per_query["empty"]["MAP"] == 0.0 and per_query["gone"]["NDCG@20"] == 0.0
    assert per_query["baking"]["MAP"] > 0.0
