"""A facts detector trained on a judgment's own structure, and whether weighting paragraphs by
it helps `bm25-paragraph` and `maxsim` find AILA's precedents (issue 30, "facts-aware legal
matching").

    python benchmarks/facts_detector.py --data-dir AILA-INDEX
        [--out benchmarks/results/facts_detector.json]

The position cut (`benchmarks/paragraph_position.py`) lost: what matches a query's facts is
spread through a judgment. A detector can find fact-stating paragraphs wherever they are. With
no relevance label, it learns from position: a judgment's first quarter of paragraphs is taken
as facts (1) and its second half as the rest (0), the quarter between left out; a logistic
regression over the paragraphs' TF-IDF words (scikit-learn) then gives every paragraph
`w = P(facts | words)`, each document's paragraphs scored by a model fitted on the other half
of the documents (two folds by document), so no paragraph is scored by a model that saw it.

Two uses, fixed before any query was run and never tuned:
- `soft`: each paragraph's score (its BM25, or each of its sentences' cosine) times `0.5 + w`;
- `hard`: only paragraphs with `w >= 0.5` count (a document with none keeps them all).
`maxsim` weights a document's sentence vectors by their paragraph's factor, which scales their
cosines (`weighted_sentences`): the mean over query sentences of the best weighted match.
The unweighted rows are the methods as served (`bm25-paragraph` on the service's paragraph
postings; `maxsim` on the float32 sentence level); metrics by ir_measures, cut at 1,000 as
`docsim evaluate` cuts them; paired t and Wilcoxon tests and bootstrap intervals against the
unweighted method.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import ir_measures
import numpy as np
import torch
from ir_measures import AP, nDCG
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from docsim.indexer.config import Settings
from docsim.indexer.evaluation.metrics import mean_intervals, mean_metrics, paired_tests
from docsim.indexer.search.postings import Postings
from docsim.indexer.search.scorers import top_mean_per_group
from docsim.indexer.search.settings import SearchSettings
from docsim.indexer.serving import open_searcher
from docsim.indexer.store.db import make_engine
from docsim.indexer.store.reader import document_paragraph_texts
from docsim.indexer.text.corpus import json_document
from docsim.models.alignment import maxsim_scores, sentence_best
from docsim.models.scoring import RaggedCollection

logger = logging.getLogger("benchmarks.facts_detector")
AILA = Path(__file__).resolve().parents[2] / "shared" / "data" / "aila2019"
FACTS_SPAN, REST_FROM = 0.25, 0.5  # the position labels: first quarter 1, second half 0


def relative_places(doc_paragraph_start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`(J,)` each paragraph's document and its place in it, in [0, 1), collection order."""
    lengths = np.diff(doc_paragraph_start)
    doc = np.repeat(np.arange(len(lengths)), lengths)
    return doc, (np.arange(len(doc)) - doc_paragraph_start[doc]) / lengths[doc]


def facts_weights(texts: list[str], doc: np.ndarray, place: np.ndarray) -> tuple[np.ndarray, dict]:
    """`(J,)` P(facts | words) of every paragraph, cross-fitted over two folds of documents,
    and the detector's facts: held-out AUC on its position labels, its most telling words."""
    label = np.where(place < FACTS_SPAN, 1, np.where(place >= REST_FROM, 0, -1))
    fold = doc % 2
    out = np.zeros(len(texts))
    facts: dict = {"auc": [], "words": {}}
    for k in (0, 1):
        train = (fold != k) & (label >= 0)
        vectorizer = TfidfVectorizer(
            token_pattern=r"(?u)\b[a-zA-Z][a-zA-Z]+\b", min_df=5, max_df=0.5, sublinear_tf=True
        )
        x_train = vectorizer.fit_transform([texts[i] for i in np.flatnonzero(train)])
        model = LogisticRegression(C=1.0, max_iter=2000).fit(x_train, label[train])
        scored = np.flatnonzero(fold == k)
        out[scored] = model.predict_proba(vectorizer.transform([texts[i] for i in scored]))[:, 1]
        held = scored[label[scored] >= 0]
        facts["auc"].append(float(roc_auc_score(label[held], out[held])))
        if k == 0:
            words = np.asarray(vectorizer.get_feature_names_out())
            order = np.argsort(model.coef_[0])
            facts["words"] = {
                "facts": words[order[-25:]][::-1].tolist(),
                "rest": words[order[:25]].tolist(),
            }
    return out, facts


def weighted_sentences(collection: RaggedCollection, factor: torch.Tensor) -> RaggedCollection:
    """The collection with each sentence vector `(R, d)` scaled by its paragraph's `factor`
    `(J,)`: a query sentence's cosine with it is scaled alike."""
    per_sentence = torch.repeat_interleave(factor, collection.paragraph_lengths)  # (R,)
    return RaggedCollection(
        sentences=collection.sentences * per_sentence[:, None].to(collection.sentences.dtype),
        paragraph_lengths=collection.paragraph_lengths,
        document_lengths=collection.document_lengths,
    )


def factors(w: np.ndarray, doc: np.ndarray, n_documents: int) -> dict[str, np.ndarray]:
    """`(J,)` each use's factor per paragraph (see the module docstring)."""
    kept = w >= 0.5
    any_kept = np.bincount(doc, kept, minlength=n_documents) > 0
    return {
        "none": np.ones_like(w),
        "soft": 0.5 + w,
        "hard": np.where(kept | ~any_kept[doc], 1.0, 0.0),
    }


def evaluate(runs: dict[str, dict[str, list[tuple[str, float]]]], qrels: list) -> dict:
    per: dict[str, dict[str, dict[str, float]]] = {}
    for name, run in runs.items():
        scored = [ir_measures.ScoredDoc(q, d, s) for q, ranked in run.items() for d, s in ranked]
        found: dict[str, dict[str, float]] = {}
        for value in ir_measures.iter_calc([AP, nDCG @ 20], qrels, scored):
            metric = "MAP" if value.measure == AP else "NDCG@20"
            found.setdefault(value.query_id, {})[metric] = value.value
        per[name] = found
    return per


def ranked(scores: np.ndarray, external_ids: list[str]) -> list[tuple[str, float]]:
    order = np.argsort(-scores, kind="stable")[:1000]
    return [(external_ids[d], float(scores[d])) for d in order]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--queries", type=Path, default=AILA / "queries_dev.txt")
    parser.add_argument("--qrels", type=Path, default=AILA / "qrels_dev.txt")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/facts_detector.json"))
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )

    settings = Settings(data_dir=args.data_dir, search=SearchSettings(sentence_store="float32"))
    engine = make_engine(settings.database_url)
    searcher = open_searcher(settings, engine)
    index = searcher.index
    doc, place = relative_places(index.doc_paragraph_start)
    paragraph_text = document_paragraph_texts(engine, [int(d) for d in index.doc_ids])
    texts = [paragraph_text[int(p)] for p in index.paragraph_ids]  # collection order
    logger.info("Training the detector on %d paragraphs", len(texts))
    w, detector = facts_weights(texts, doc, place)
    detector["share_facts_by_quarter"] = [
        float((w[(place >= q / 4) & (place < (q + 1) / 4)] >= 0.5).mean()) for q in range(4)
    ]
    uses = factors(w, doc, index.n_documents)

    bm25, doc_of = Postings(index, engine, settings.search.bm25_stemmer).paragraphs()
    ids = index.paragraph_ids
    order = np.argsort(ids)
    row = order[np.searchsorted(ids[order], bm25.doc_ids)]  # posting row -> collection order
    collections = {
        use: weighted_sentences(index.collection, torch.from_numpy(f).float())
        for use, f in uses.items()
    }
    queries = [
        line.split("||", 1) for line in args.queries.read_text().splitlines() if "||" in line
    ]
    runs: dict[str, dict[str, list[tuple[str, float]]]] = {}
    for qid, text in queries:
        paragraph_scores = bm25.scores(text.strip())  # (J,) posting order
        source = searcher.query_from_source(
            json_document({"id": qid, "text": text})
        ).sentence_vectors
        for use, f in uses.items():
            documents = top_mean_per_group(paragraph_scores * f[row], doc_of, index.n_documents, 1)
            runs.setdefault(f"bm25-paragraph {use}", {})[qid] = ranked(
                documents, index.external_ids
            )
            best = sentence_best(source, collections[use])  # (D, n)
            scores = maxsim_scores(best).numpy()
            runs.setdefault(f"maxsim {use}", {})[qid] = ranked(scores, index.external_ids)
    per = evaluate(runs, list(ir_measures.read_trec_qrels(str(args.qrels))))
    report: dict = {"detector": detector, "queries": len(queries), "methods": {}}
    for method in ("bm25-paragraph", "maxsim"):
        names = {use: f"{method} {use}" for use in uses}
        report["methods"][method] = {
            "means": {use: mean_metrics(per[name]) for use, name in names.items()},
            "intervals_95": {use: mean_intervals(per[name]) for use, name in names.items()},
            "against_unweighted": {
                metric: paired_tests(
                    {use: per[name] for use, name in names.items()}, "none", metric
                )
                for metric in ("MAP", "NDCG@20")
            },
        }
    print(json.dumps(report, indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
