"""Does a judgment's position carry its facts? `bm25-paragraph` scored on the first part of
each document's paragraphs only (issue 30, "facts-aware legal matching").

    python benchmarks/paragraph_position.py --data-dir AILA-INDEX
        [--spans 0.25 0.5 0.75 1.0] [--out benchmarks/results/paragraph_position.json]

AILA's queries state facts, and a judgment states its facts first: if matching the facts is
what finds a relevant precedent, a document's early paragraphs should carry its score. For
each span, every document scores its best paragraph's BM25 among the first `span` of its
paragraphs (1.0: all of them, which is `bm25-paragraph` itself). The paragraph postings are
the service's own (`Postings.paragraphs`); metrics by ir_measures, cut at 1,000 as
`docsim evaluate` cuts them; paired tests against span 1.0 (`paired_tests`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import ir_measures
import numpy as np
from ir_measures import AP, nDCG

from docsim.indexer.config import Settings
from docsim.indexer.evaluation.metrics import paired_tests
from docsim.indexer.search.postings import Postings
from docsim.indexer.search.scorers import top_mean_per_group
from docsim.indexer.serving import open_searcher
from docsim.indexer.store.db import make_engine

AILA = Path(__file__).resolve().parents[2] / "shared" / "data" / "aila2019"


def relative_positions(index, rows: np.ndarray) -> np.ndarray:  # noqa: ANN001
    """`(J,)` each paragraph posting row's place in its document, in [0, 1)."""
    starts = index.doc_paragraph_start
    doc = np.repeat(np.arange(index.n_documents), np.diff(starts))  # (J,) collection order
    place = (np.arange(len(doc)) - starts[doc]) / np.diff(starts)[doc]
    return place[rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--queries", type=Path, default=AILA / "queries_dev.txt")
    parser.add_argument("--qrels", type=Path, default=AILA / "qrels_dev.txt")
    parser.add_argument("--spans", type=float, nargs="+", default=[0.25, 0.5, 0.75, 1.0])
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/paragraph_position.json")
    )
    args = parser.parse_args()

    settings = Settings(data_dir=args.data_dir)
    engine = make_engine(settings.database_url)
    index = open_searcher(settings, engine).index
    bm25, doc_of = Postings(index, engine, settings.search.bm25_stemmer).paragraphs()
    ids = index.paragraph_ids
    order = np.argsort(ids)
    rows = order[np.searchsorted(ids[order], bm25.doc_ids)]  # posting row -> collection order
    place = relative_positions(index, rows)
    queries = [
        line.split("||", 1) for line in args.queries.read_text().splitlines() if "||" in line
    ]
    qrels = list(ir_measures.read_trec_qrels(str(args.qrels)))

    per_span: dict[str, dict[str, dict[str, float]]] = {}
    for span in args.spans:
        run = []
        for qid, text in queries:
            scores = np.where(place < span, bm25.scores(text.strip()), 0.0)
            documents = top_mean_per_group(scores, doc_of, index.n_documents, 1)
            for d in np.argsort(-documents, kind="stable")[:1000]:
                run.append(ir_measures.ScoredDoc(qid, str(index.external_ids[d]), documents[d]))
        found: dict[str, dict[str, float]] = {}
        for value in ir_measures.iter_calc([AP, nDCG @ 20], qrels, run):
            name = "MAP" if value.measure == AP else "NDCG@20"
            found.setdefault(value.query_id, {})[name] = value.value
        per_span[f"span {span}"] = found
    baseline = f"span {args.spans[-1]}"
    report = {
        "spans": {
            name: {m: float(np.mean([q[m] for q in found.values()])) for m in ("MAP", "NDCG@20")}
            for name, found in per_span.items()
        },
        "against_all_paragraphs": {
            metric: paired_tests(per_span, baseline, metric) for metric in ("MAP", "NDCG@20")
        },
        "queries": len(queries),
    }
    print(json.dumps(report, indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
