"""`docsim evaluate` over the sample corpus indexed with the tiny encoder."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from docsim.app.cli import docsim as command_line
from docsim.search.evaluation.metrics import bootstrap_interval, paired_tests, sdr_rank_metrics
from docsim.search.settings import QuerySettings
from tests.utils.corpora import write_jsonl
from tests.utils.indexes import publish

cli = command_line()  # the indexer's commands, the search layer's `evaluate` and `serve`

runner = CliRunner()


@pytest.fixture()
def data_dir(sample_corpus: Path, tiny_encoder_dir: Path, tmp_path: Path) -> Path:
    data = tmp_path / "data"
    publish(sample_corpus, QuerySettings(data_dir=data), tiny_encoder_dir)
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
    monkeypatch.setattr("docsim.indexer.cli.common.setup_logging", lambda verbose: None)
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


# --- SDR's rank metrics and the paired significance tests, against hand-computed values -----


def test_sdr_rank_metrics_by_hand() -> None:
    """0-based rank r of each relevant document (n - 1 when unranked), MPR = mean r / (n - 1),
    HR@k = share of relevant documents with r < k."""
    ranked = ["d1", "d2", "d3", "d4", "d5"]
    relevant = {"d2", "d5", "d9"}  # ranks 1, 4 and (unranked, of 11 candidates) 10
    metrics = sdr_rank_metrics(ranked, relevant, 11, (1, 2, 5, 10, 11))
    assert metrics == pytest.approx(
        {"MPR": (0.1 + 0.4 + 1.0) / 3, "HR@1": 0.0, "HR@2": 1 / 3, "HR@5": 2 / 3}
        | {"HR@10": 2 / 3, "HR@11": 1.0},
        abs=1e-12,
    )
    assert sdr_rank_metrics(ranked, {"d1"}, 5, (1,)) == {"MPR": 0.0, "HR@1": 1.0}
    assert sdr_rank_metrics(ranked, {"d5", "d4"}, 5, (3, 4)) == pytest.approx(
        {"MPR": (3 / 4 + 4 / 4) / 2, "HR@3": 0.0, "HR@4": 0.5}
    )
    assert sdr_rank_metrics(ranked, set(), 5, (10,)) == {}


def per_query(values: dict[str, float], metric: str = "MAP") -> dict[str, dict[str, float]]:
    return {qid: {metric: value, "other": -1.0} for qid, value in values.items()}


def test_paired_tests_by_hand() -> None:
    """Differences 0.1, 0.2, 0.3: t = mean / (sd / sqrt(n)) = 0.2 / (0.1 / sqrt(3)) = 2 sqrt(3)
    on 2 degrees of freedom, whose two-sided p is 1 - t / sqrt(t^2 + 2) = 1 - sqrt(6/7); the
    exact signed-rank test puts all 3 ranks on one side: p = 2 / 2^3 = 0.25."""
    t = 0.2 / (0.1 / math.sqrt(3))
    assert t == pytest.approx(2 * math.sqrt(3))
    result = paired_tests(
        {
            "bm25": per_query({"q1": 0.1, "q2": 0.2, "q3": 0.3}),
            "sdr": per_query({"q3": 0.6, "q1": 0.2, "q2": 0.4}),  # paired by id, not order
        },
        baseline="bm25",
    )
    low, high = result["sdr"].pop("difference_interval_95")
    assert result == {
        "sdr": {
            "mean_difference": pytest.approx(0.2, abs=1e-12),
            "t_test_p": pytest.approx(1 - t / math.sqrt(t * t + 2), abs=1e-9),
            "wilcoxon_p": pytest.approx(0.25, abs=1e-12),
            "queries": 3,
        }
    }
    # resampled means of 0.1, 0.2, 0.3 lie in [0.1, 0.3], and the middle 95% strictly inside
    assert 0.1 <= low < 0.2 < high <= 0.3
    assert 1 - t / math.sqrt(t * t + 2) == pytest.approx(1 - math.sqrt(6 / 7))


def test_paired_tests_equal_scipy_on_shared_queries() -> None:
    """Each method against the baseline over the queries both have, paired by query id, equals
    scipy's ttest_rel and wilcoxon on those pairs; a method equal to the baseline has p 1."""
    rng = np.random.default_rng(7)
    qids = [f"q{i:02d}" for i in range(14)]
    base = dict(zip(qids, rng.uniform(0, 1, len(qids)).round(3).tolist(), strict=True))
    better = {q: min(1.0, v + rng.uniform(-0.1, 0.3)) for q, v in base.items()}
    better["q04"] = base["q04"]  # a zero difference, which the signed-rank test drops
    worse = {q: max(0.0, v - rng.uniform(-0.1, 0.2)) for q, v in base.items()}
    del better["q13"], worse["q00"]  # queries only some methods ran
    base["extra"] = 0.5
    shuffled = dict(reversed(list(better.items())))
    metric = "NDCG@20"
    result = paired_tests(
        {
            "bm25": per_query(base, metric),
            "better": per_query(shuffled, metric),
            "worse": per_query(worse, metric),
            "same": per_query(base, metric),
        },
        baseline="bm25",
        metric=metric,
    )
    assert set(result) == {"better", "worse", "same"}
    for name, values in (("better", better), ("worse", worse)):
        shared = sorted(set(base) & set(values))
        a = np.array([values[q] for q in shared])
        b = np.array([base[q] for q in shared])
        assert result[name]["queries"] == len(shared) == 13
        assert result[name]["mean_difference"] == pytest.approx(float(np.mean(a - b)), abs=1e-12)
        assert result[name]["t_test_p"] == pytest.approx(stats.ttest_rel(a, b).pvalue, abs=1e-12)
        assert result[name]["wilcoxon_p"] == pytest.approx(stats.wilcoxon(a, b).pvalue, abs=1e-12)
        assert 0.0 < result[name]["t_test_p"] < 1.0
    assert result["better"]["mean_difference"] > 0 > result["worse"]["mean_difference"]
    assert result["same"] == {
        "mean_difference": 0.0,
        "difference_interval_95": [0.0, 0.0],
        "t_test_p": 1.0,
        "wilcoxon_p": 1.0,
        "queries": 15,
    }


def reference_percentile_bootstrap(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """The textbook percentile bootstrap: resample the queries with replacement, take each
    resample's mean, and read the 2.5th and 97.5th percentiles of those means."""
    rng = np.random.default_rng(seed)
    means = rng.choice(values, size=(resamples, values.size), replace=True).mean(axis=1)
    return np.percentile(means, [2.5, 97.5])


def test_bootstrap_interval_agrees_with_a_plain_resampling_and_the_normal_approximation() -> None:
    """Per-query APs of 50 queries: the interval equals a plain resampling's (other random
    draws: within 0.01), lies near mean +- 1.96 sd / sqrt(n), holds the mean, is the same on
    every call, and follows sd / sqrt(n) as the queries grow four times in number."""
    rng = np.random.default_rng(3)
    values = rng.beta(0.6, 3.0, 50)
    low, high = bootstrap_interval(values.tolist())
    ref_low, ref_high = reference_percentile_bootstrap(values, 20_000, seed=11)
    assert low == pytest.approx(ref_low, abs=0.01) and high == pytest.approx(ref_high, abs=0.01)
    half = 1.96 * values.std(ddof=1) / math.sqrt(values.size)
    assert (high - low) / 2 == pytest.approx(half, rel=0.15)
    assert low < values.mean() < high
    assert bootstrap_interval(values.tolist()) == (low, high)
    more = np.concatenate([values, rng.beta(0.6, 3.0, 150)])
    more_low, more_high = bootstrap_interval(more.tolist())
    more_half = 1.96 * more.std(ddof=1) / math.sqrt(more.size)
    assert (more_high - more_low) / 2 == pytest.approx(more_half, rel=0.15)
    assert more_half < 0.75 * half


def test_bootstrap_interval_of_no_spread_and_of_nothing() -> None:
    assert bootstrap_interval([0.25, 0.25, 0.25]) == (0.25, 0.25)
    assert all(math.isnan(bound) for bound in bootstrap_interval([]))


def test_without_a_method_the_services_default_is_evaluated_and_tested_against_both_baselines(
    data_dir: Path, sample_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    queries = write_jsonl(
        tmp_path / "queries.jsonl",
        [
            {"qid": "baking", "text": (sample_corpus / "baking-01.md").read_text()},
            {"qid": "coffee", "text": (sample_corpus / "coffee-03.md").read_text()},
        ],
    )
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("baking Q0 baking-02 1\ncoffee Q0 coffee-04 1\n")
    out = tmp_path / "nested" / "evaluation.json"  # a missing folder is made
    monkeypatch.setenv("DOCSIM_SEARCH__DEFAULT_METHOD", "maxsim")
    result = evaluate(data_dir, queries, qrels, "--out", str(out))
    assert result.exit_code == 0, f"{result.exception!r}\n{result.output}"
    report = json.loads(out.read_text())
    assert list(report["methods"]) == ["maxsim"]
    maxsim = report["methods"]["maxsim"]
    assert set(maxsim["interval_95"]) == set(maxsim["mean"])
    for metric, (low, high) in maxsim["interval_95"].items():
        assert low <= maxsim["mean"][metric] <= high
    assert report["search_settings"]["default_method"] == "maxsim"
    both = evaluate(
        data_dir,
        queries,
        qrels,
        "--method",
        "fused",
        "--method",
        "bm25",
        "--method",
        "hybrid",
        "--out",
        str(out),
    )
    assert both.exit_code == 0, both.output
    report = json.loads(out.read_text())
    assert set(report["paired_tests_vs_bm25_on_MAP"]) == {"fused", "hybrid"}
    assert set(report["paired_tests_vs_hybrid_on_MAP"]) == {"fused", "bm25"}
    bad = evaluate(data_dir, queries, qrels, "--method", "bm26", "--out", str(out))
    assert bad.exit_code == 2 and "unknown method 'bm26'" in bad.output


def test_bad_qrels_name_the_file_and_line(tmp_path: Path) -> None:
    from docsim.search.evaluation.runs import read_qrels

    good = tmp_path / "good.txt"
    good.write_text("Q1 0 C1 1\n\nQ1 0 C2 0\n")
    assert [(q.query_id, q.doc_id, q.relevance) for q in read_qrels(good)] == [
        ("Q1", "C1", 1),
        ("Q1", "C2", 0),
    ]
    short = tmp_path / "short.txt"
    short.write_text("Q1 0 C1 1\nQ1 C2 1\n")
    with pytest.raises(ValueError, match=r"short.txt:2: a qrels line is"):
        read_qrels(short)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    with pytest.raises(ValueError, match="holds no relevance judgments"):
        read_qrels(empty)


def test_a_filter_ranks_and_judges_only_the_documents_it_keeps(
    data_dir: Path, sample_corpus: Path, tmp_path: Path
) -> None:
    """The sample's documents have their file path as `source`: keep the baking ones."""
    queries = write_jsonl(
        tmp_path / "queries.jsonl",
        [{"qid": "q", "text": (sample_corpus / "baking-01.md").read_text()}],
    )
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q Q0 baking-02 1\nq Q0 coffee-04 1\n")  # coffee-04 is filtered out
    baking = [str(sample_corpus / f"baking-0{n}.md") for n in range(1, 7)]
    wanted = {"field": "source", "in": baking}
    out, runs = tmp_path / "evaluation.json", tmp_path / "run.txt"
    options = ("--method", "document", "--out", str(out), "--run-out", str(runs))
    result = evaluate(data_dir, queries, qrels, *options, "--filter", json.dumps(wanted))
    assert result.exit_code == 0, f"{result.exception!r}\n{result.output}"
    ranked = [line.split()[2] for line in runs.read_text().splitlines()]
    assert ranked and all(d.startswith("baking-") for d in ranked)
    report = json.loads(out.read_text())
    assert report["filter"] == wanted
    # judged on the kept documents only: baking-02 is the one relevant document
    per_query = report["methods"]["document"]["per_query"]["q"]
    expected_rr = 1 / (ranked.index("baking-02") + 1)
    assert per_query["MRR"] == pytest.approx(expected_rr)
    assert per_query["MAP"] == pytest.approx(expected_rr)  # coffee-04 no longer counts
    bad = evaluate(data_dir, queries, qrels, *options, "--filter", '{"field": "court", "eq": 1}')
    assert bad.exit_code == 2 and "'court' is in no document's metadata" in bad.output


def test_a_query_leaves_out_its_own_document_and_micro_f1_is_reported(
    data_dir: Path, sample_corpus: Path, tmp_path: Path
) -> None:
    """IL-PCR's queries are judgments of the collection: `--exclude-own` (or a query's
    `exclude_id`) keeps each out of its own ranking, at the same depth; micro P, R and F1 at
    k are reported beside the means."""
    queries = write_jsonl(
        tmp_path / "queries.jsonl",
        [
            {"qid": "Qbaking-01", "text": (sample_corpus / "baking-01.md").read_text()},
            {
                "qid": "coffee",
                "text": (sample_corpus / "coffee-03.md").read_text(),
                "exclude_id": "coffee-03",
            },
        ],  # fmt: skip
    )
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(
        "Qbaking-01 Q0 baking-02 1\nQbaking-01 Q0 baking-03 1\ncoffee Q0 coffee-04 1\n"
    )
    out, runs = tmp_path / "evaluation.json", tmp_path / "run.txt"
    options = ("--method", "bm25", "--out", str(out), "--run-out", str(runs), "--depth", "5")
    kept = evaluate(data_dir, queries, qrels, *options, "--micro-at", "3")
    assert kept.exit_code == 0, f"{kept.exception!r}\n{kept.output}"
    ranked = [line.split()[:3] for line in runs.read_text().splitlines()]
    assert ["Qbaking-01", "Q0", "baking-01"] in ranked  # by its text, it finds itself first
    assert not any(line[0] == "coffee" and line[2] == "coffee-03" for line in ranked)
    left = evaluate(data_dir, queries, qrels, *options, "--exclude-own", "Q(.+)", "--micro-at", "3")
    assert left.exit_code == 0, f"{left.exception!r}\n{left.output}"
    lines = [line.split() for line in runs.read_text().splitlines()]
    assert not any(line[0] == "Qbaking-01" and line[2] == "baking-01" for line in lines)
    assert sum(line[0] == "Qbaking-01" for line in lines) == 5  # as deep as asked
    report = json.loads(out.read_text())["methods"]["bm25"]
    hits = {q: sum(line[0] == q and line[2] in relevant for line in lines if int(line[3]) <= 3)
            for q, relevant in (("Qbaking-01", {"baking-02", "baking-03"}),
                                ("coffee", {"coffee-04"}))}  # fmt: skip
    precision, recall = sum(hits.values()) / 6, sum(hits.values()) / 3
    assert report["micro"]["microP@3"] == pytest.approx(precision)
    assert report["micro"]["microR@3"] == pytest.approx(recall)
    f1 = 2 * precision * recall / (precision + recall) if hits else 0.0
    assert report["micro"]["microF1@3"] == pytest.approx(f1)
    low, high = report["micro"]["microF1@3_interval_95"]
    assert low <= f1 <= high
    assert "microF1@3" in left.output  # in the table
    bad = evaluate(data_dir, queries, qrels, *options, "--exclude-own", "Q.+")
    assert bad.exit_code == 2 and "has no group" in bad.output


def test_micro_averages_by_hand() -> None:
    from docsim.search.evaluation.metrics import micro_at

    per_query = {"a": {"P@2": 1.0}, "b": {"P@2": 0.5}, "c": {"P@2": 0.0}}
    found = micro_at(per_query, {"a": 2, "b": 4, "c": 2}, 2)
    assert found["microP@2"] == pytest.approx(3 / 6)  # 3 hits in 3 queries' top 2
    assert found["microR@2"] == pytest.approx(3 / 8)
    assert found["microF1@2"] == pytest.approx(2 * 0.5 * 0.375 / 0.875)
