"""Per-collection tuning without labels: pseudo-queries cut from the collection's own documents
choose the fusion, and the development sets' judgments check that choice.

    python benchmarks/pseudo_queries.py --set aila=DATA_DIR --set csfcube=DATA_DIR@COLLECTION \\
        --work SCRATCH [--queries 60] [--cache DIR] [--out FILE]

1. **Pseudo-queries, no labels.** `--queries` documents of the collection are drawn at random
   (seeded) and each is cut in two at a sentence boundary (the index's own sentences). The
   query is its opening: from the first sentence of at least 8 words, until 150 words or a
   third of the document, whichever comes first. The positive is the rest of the document.
   The data directory is copied to SCRATCH, and there each drawn document is replaced by its
   rest (`POST /documents`, the API's path), so that the query's own text is not in the
   collection it is ranked against.
2. Every lever of `ranking_cv.py` ranks each pseudo-query over the whole copy; a query's value
   is the AP of its one positive (its reciprocal rank).
3. For each family of fusion configurations (`ranking_cv.fusion_families`), the configuration
   with the best mean AP over the collection's pseudo-queries, relative to BM25's, is chosen:
   each collection by its own pseudo-queries.
4. That choice ranks the set's development queries on the original index (the runs cached by
   `ranking_cv.py`, same `--cache`), against the shipped default, `bm25` and `document`:
   paired t and Wilcoxon tests, bootstrap intervals.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
from pathlib import Path

import ir_measures
import numpy as np
import ranking_cv as cv  # this folder is on the path when the script runs
from fastapi.testclient import TestClient
from record import save
from sqlalchemy import Engine, select, update

from docsim.app.core.settings import ServiceSettings
from docsim.app.main import create_app
from docsim.indexer.choices import DEFAULT_COLLECTION
from docsim.indexer.settings import JobSettings
from docsim.indexer.store.db import make_engine
from docsim.indexer.store.generations import live_documents
from docsim.indexer.store.reader import document_units
from docsim.indexer.store.tables import documents, index_versions
from docsim.indexer.store.versions import active_version
from docsim.search.evaluation.metrics import score_runs
from docsim.search.evaluation.runs import read_pools
from docsim.search.evaluation.selection import choose

logger = logging.getLogger("benchmarks.pseudo_queries")
MIN_WORDS = 8  # a query starts at the first sentence this long (after titles and headers)
QUERY_WORDS = 150
QUERY_SHARE = 1 / 3
BATCH = 10  # documents replaced per request


def cut(text: str, spans: list[tuple[int, int]]) -> tuple[int, int] | None:
    """`(start, end)` of the pseudo-query in `text`, whose sentences are `spans`, or None
    when the document leaves fewer than two sentences after it."""
    words = [len(text[a:b].split()) for a, b in spans]
    first = next((i for i, w in enumerate(words) if w >= MIN_WORDS), None)
    if first is None:
        return None
    budget, taken, last = min(QUERY_WORDS, sum(words) * QUERY_SHARE), 0, first
    for last in range(first, len(spans)):
        taken += words[last]
        if taken >= budget:
            break
    if len(spans) - last - 1 < 2:
        return None
    return spans[first][0], spans[last][1]


def draw(engine: Engine, collection: str, n: int, seed: int) -> list[dict]:
    """`n` documents cut into `{"id", "title", "query", "rest"}`, drawn at random."""
    version = active_version(engine, collection).version_id
    with engine.connect() as conn:
        rows = conn.execute(
            select(documents.c.doc_id, documents.c.external_id, documents.c.title)
            .where(documents.c.doc_id.in_(live_documents(version)))
            .order_by(documents.c.doc_id)
        ).all()
    order = list(rows)
    random.Random(seed).shuffle(order)
    drawn = []
    for row in order:
        with engine.connect() as conn:
            text = conn.execute(
                select(documents.c.text).where(documents.c.doc_id == row.doc_id)
            ).scalar_one()
        spans = [(a, b) for _, a, b in document_units(engine, "sentence", int(row.doc_id))]
        where = cut(text, spans)
        if where is None:
            continue
        start, end = where
        drawn.append(
            {
                "id": row.external_id,
                "title": row.title,
                "query": text[start:end],
                "rest": (text[:start] + text[end:]).strip(),
            }
        )
        if len(drawn) == n:
            break
    return drawn


def relocate(engine: Engine, old: Path, new: Path) -> None:
    """Point the copied database's versions at the copy's folders (SQL holds absolute
    paths), so that nothing written for the copy lands in the original."""
    with engine.begin() as conn:
        rows = conn.execute(select(index_versions.c.version_id, index_versions.c.path)).all()
        for version_id, path in rows:
            moved = Path(path).resolve()
            if moved.is_relative_to(old):
                conn.execute(
                    update(index_versions)
                    .where(index_versions.c.version_id == version_id)
                    .values(path=str(new / moved.relative_to(old)))
                )


def make_pseudo_set(index: str, work: Path, n: int, seed: int) -> tuple[str, cv.JudgedSet]:
    """Copy `index` under `work`, replace the drawn documents by their rests, and write the
    pseudo-queries and their judgments; returns the copy's index argument and its set."""
    folder, _, collection = index.partition("@")
    copy = work / f"{Path(folder).name}-pseudo"  # its own name in the runs' cache
    queries, qrels = work / "queries.jsonl", work / "qrels.txt"
    copied_index = str(copy) + (f"@{collection}" if collection else "")
    judged = cv.JudgedSet(queries, qrels, None, 1, "text")
    if queries.exists():  # made by an earlier run
        return copied_index, judged
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(folder, copy)
    settings = ServiceSettings(data_dir=copy, jobs=JobSettings(embedded_worker=False))
    engine = make_engine(settings.database_url)
    relocate(engine, Path(folder).resolve(), copy.resolve())
    drawn = draw(engine, collection or DEFAULT_COLLECTION, n, seed)
    engine.dispose()
    prefix = f"/collections/{collection}" if collection else ""
    with TestClient(create_app(settings)) as client:
        for start in range(0, len(drawn), BATCH):
            body = [
                {"id": d["id"], "title": d["title"], "text": d["rest"]}
                for d in drawn[start : start + BATCH]
            ]
            response = client.post(f"{prefix}/documents", json={"documents": body})
            response.raise_for_status()
            logger.info("Replaced %d of %d drawn documents", start + len(body), len(drawn))
    with queries.open("w") as out:
        for d in drawn:
            out.write(json.dumps({"qid": d["id"], "text": d["query"]}) + "\n")
    qrels.write_text("".join(f"{d['id']} 0 {d['id']} 1\n" for d in drawn))
    return copied_index, judged


def lever_runs(index: str, judged: cv.JudgedSet, cache: Path) -> dict[str, dict]:
    """The fusion components' runs (plain and stemmed BM25 levers), `{lever: {qid: run}}`."""
    levers = [*cv.LEXICAL, *(f"{c}+stem" for c in cv.LEXICAL), *cv.DENSE]
    return {lever: cv.lever_runs(lever, index, judged, cache) for lever in levers}


def scored_levers(runs: dict[str, dict], judged: cv.JudgedSet, levers: tuple) -> dict:
    """`{lever: {qid: {metric: value}}}` by ir_measures, as `ranking_cv.py` scores its levers."""
    qrels = list(ir_measures.read_trec_qrels(str(judged.qrels)))
    pools = read_pools(judged.pools) if judged.pools else None
    return {
        lever: score_runs(
            {q: r[: cv.DEPTH] for q, r in runs[lever].items()},
            qrels,
            min_rel=judged.min_rel,
            pools=pools,
        )
        for lever in levers
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", action="append", required=True, help="NAME=DATA_DIR[@COLL]")
    parser.add_argument("--work", type=Path, required=True, help="scratch space for the copies")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache", type=Path, default=Path("ranking-cv-cache"))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/pseudo_queries.json"))
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    components = list(cv.LEXICAL + cv.DENSE)
    configs = cv.all_configs(components)
    shipped = cv.shipped_config(configs, components)
    report: dict = {"shipped": cv.describe(configs[shipped]), "sets": {}}
    for spec in args.set:
        name, _, index = spec.partition("=")
        work = args.work / name
        work.mkdir(parents=True, exist_ok=True)
        copied, pseudo = make_pseudo_set(index, work, args.queries, args.seed)
        real = cv.SETS[name]
        pseudo_runs, real_runs = (
            lever_runs(copied, pseudo, args.cache),
            lever_runs(index, real, args.cache),
        )
        per_set = {
            "pseudo": (pseudo, cv.query_tables(pseudo_runs, pseudo)),
            name: (real, cv.query_tables(real_runs, real)),
        }
        singles = scored_levers(real_runs, real, ("bm25", "document"))
        report["sets"][name] = tune_and_check(name, per_set, configs, components, shipped, singles)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save(args.out, report)
    logger.info("Saved %s", args.out)


def tune_and_check(
    name: str,
    per_set: dict,
    configs: list[tuple],
    components: list[str],
    shipped: int,
    singles: dict[str, dict],
) -> dict:
    """Each family's choice on the pseudo-queries of `per_set`, scored on the set `name`'s
    development queries against the shipped default and the levers of `singles`."""
    value = cv.fusion_values(per_set, configs, components)
    baseline = cv.bm25_baseline({"pseudo": per_set["pseudo"]})
    pseudo_values = {"pseudo": value["pseudo"]["MAP"]}
    everyone = {"pseudo": np.ones(pseudo_values["pseudo"].shape[1], bool)}
    tables = per_set[name][1]
    fixed = np.full(len(tables), shipped)
    others = {
        "shipped": cv.per_query_of(value[name], tables, fixed),
        **singles,
    }
    metrics = ("MAP", cv.ndcg_metric(name))
    out: dict = {
        "pseudo_queries": len(per_set["pseudo"][1]),
        "pseudo_bm25_map": float(baseline["pseudo"].mean()),
        "families": {},
    }
    for family in cv.fusion_families(configs, shipped):
        pick = choose(pseudo_values, baseline, everyone, family.members)
        mine = cv.per_query_of(value[name], tables, np.full(len(tables), pick))
        result = {
            "chosen": cv.describe(configs[pick]),
            "pseudo_map": float(value["pseudo"]["MAP"][pick].mean()),
            **cv.with_intervals(mine, others, metrics),
        }
        out["families"][family.name] = result
        logger.info(
            "%s %s: %s, pseudo MAP %.4f, dev %s",
            name,
            family.name,
            result["chosen"],
            result["pseudo_map"],
            {m: round(v, 4) for m, v in result["mean"].items()},
        )
    return out


if __name__ == "__main__":
    main()
