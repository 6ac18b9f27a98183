"""`docsim evaluate`: judged queries read from files and run through `Searcher.similar`
(the API's code path); `search.evaluation.metrics` scores the runs."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from docsim.indexer.errors import DocumentNotFoundError, EmptyDocumentError
from docsim.indexer.text.corpus import json_document
from docsim.indexer.text.documents import SourceDocument
from docsim.protocol.choices import Method
from docsim.protocol.requests import FilterIn, SimilarOptions
from docsim.search.errors import QueryError
from docsim.search.searcher import Searcher
from docsim.search.types import Query

logger = logging.getLogger(__name__)


def read_qrels(path: Path) -> list[Any]:
    """TREC qrels (`query_id iteration doc_id relevance` per line, relevance an integer) as
    `ir_measures.Qrel`s.

    Raises:
        ValueError: a line that is not four fields with an integer relevance (naming the file
            and line), or a file without any judgment.
    """
    import ir_measures

    judgments = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 4 or not fields[3].lstrip("-").isdigit():
                raise ValueError(
                    f"{path}:{number}: a qrels line is `query_id iteration doc_id relevance` "
                    f"(relevance an integer); found {line.strip()[:120]!r}"
                )
            query_id, iteration, doc_id, relevance = fields
            judgments.append(ir_measures.Qrel(query_id, doc_id, int(relevance), iteration))
    if not judgments:
        raise ValueError(f"{path} holds no relevance judgments")
    return judgments


@dataclass(frozen=True)
class EvalQuery:
    """A judged query: its text or an indexed document's id, and the documents its rankings
    leave out (its own judgment, where the collection holds it)."""

    qid: str
    text: str | None = None
    document_id: str | None = None
    exclude: tuple[str, ...] = ()


@dataclass(frozen=True)
class MethodSpec:
    """A method as named on the command line: `sdr`, `sdr-raw` (no z-score), `document`,
    `bm25`, `hybrid`."""

    name: str
    method: Method
    normalize: bool = True

    @classmethod
    def parse(cls, name: str) -> MethodSpec:
        if name == "sdr-raw":
            return cls(name, Method.sdr, normalize=False)
        try:
            return cls(name, Method(name))
        except ValueError:
            valid = [m.value for m in Method] + ["sdr-raw"]
            raise ValueError(
                f"unknown method {name!r}; valid methods are: {', '.join(valid)}"
            ) from None


def read_queries(path: Path, field: str = "text") -> list[EvalQuery]:
    """AILA lines `QID||text`, or JSONL `{"qid", "text"|"document_id", "facet_text"}`, with
    `"exclude_id"` (an id or a list of ids) naming documents the query's rankings leave out."""
    queries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        if line.lstrip().startswith("{"):
            record = json.loads(line)
            text = record.get(field) if field != "text" else record.get("text")
            if field != "text" and text is None:
                raise ValueError(f"{path}:{number}: query has no {field!r}")
            # an indexed source document is the query unless another text field is asked for
            excluded = record.get("exclude_id") or []
            exclude = tuple(map(str, [excluded] if isinstance(excluded, str) else excluded))
            if record.get("document_id") and field == "text":
                document_id = str(record["document_id"])
                queries.append(EvalQuery(str(record["qid"]), document_id=document_id,
                                         exclude=exclude))  # fmt: skip
            else:
                queries.append(EvalQuery(str(record["qid"]), text=text, exclude=exclude))
        elif "||" in line:
            qid, text = line.split("||", 1)
            queries.append(EvalQuery(qid.strip(), text=text.strip()))
        else:
            raise ValueError(f"{path}:{number}: expected 'QID||text' or a JSON object")
    return queries


def excluding_own(queries: Sequence[EvalQuery], pattern: str) -> list[EvalQuery]:
    """`queries`, each leaving out the document whose id `pattern` (a regular expression)
    takes from its query id: its first group where it matches the whole id (`Q(.+)` maps
    the query `Q123` to the document `123`).

    Raises:
        ValueError: `pattern` is not a regular expression with a group.
    """
    try:
        compiled = re.compile(pattern)
    except re.error as error:
        raise ValueError(
            f"--exclude-own {pattern!r} is not a regular expression: {error}"
        ) from None
    if compiled.groups < 1:
        raise ValueError(f"--exclude-own {pattern!r} has no group to take the document id from")
    out = []
    for query in queries:
        found = compiled.fullmatch(query.qid)
        own = (found.group(1),) if found and found.group(1) else ()
        out.append(replace(query, exclude=query.exclude + own))
    return out


def read_pools(path: Path) -> dict[str, list[str]]:
    pools = json.loads(path.read_text(encoding="utf-8"))
    return {str(q): [str(d) for d in docs] for q, docs in pools.items()}


def unmatched_judgments(
    qrels: Iterable[Any], query_ids: Iterable[str], document_ids: Iterable[str]
) -> tuple[list[str], list[str]]:
    """The query ids and the document ids that `qrels` name but the queries and the index do
    not have, each once, in the order the qrels first name them."""
    known_queries, known_documents = set(query_ids), set(document_ids)
    queries: dict[str, None] = {}
    documents: dict[str, None] = {}
    for judgment in qrels:
        if judgment.query_id not in known_queries:
            queries[judgment.query_id] = None
        if judgment.doc_id not in known_documents:
            documents[judgment.doc_id] = None
    return list(queries), list(documents)


def warn_unmatched_judgments(
    qrels: Iterable[Any],
    queries: Sequence[EvalQuery],
    document_ids: Iterable[str],
    shown: int = 5,
) -> None:
    """Log a warning for judged queries that no query has (they are not evaluated) and for
    judged documents that the index does not have (they can never be retrieved)."""
    missing_queries, missing_documents = unmatched_judgments(
        qrels, (q.qid for q in queries), document_ids
    )
    if missing_queries:
        logger.warning(
            "%d judged queries are not in the queries file and are not evaluated: %s",
            len(missing_queries),
            _first(missing_queries, shown),
        )
    if missing_documents:
        logger.warning(
            "%d judged documents are not in the index and can never be retrieved: %s",
            len(missing_documents),
            _first(missing_documents, shown),
        )


def _first(ids: Sequence[str], shown: int) -> str:
    more = f", ... ({len(ids) - shown} more)" if len(ids) > shown else ""
    return ", ".join(ids[:shown]) + more


def build_query(searcher: Searcher, query: EvalQuery) -> Query:
    if query.document_id is not None:
        return searcher.query_from_index(query.document_id)
    source = json_document({"id": query.qid, "title": "", "text": query.text or ""}, query.qid)
    if not isinstance(source, SourceDocument):
        raise ValueError(f"query {query.qid}: {source.reason}")
    return searcher.query_from_source(source)


def run_queries(
    searcher: Searcher,
    queries: Sequence[EvalQuery],
    spec: MethodSpec,
    pools: dict[str, list[str]] | None,
    depth: int,
    filter: FilterIn | None = None,
) -> dict[str, list[tuple[str, float]]]:
    """`{qid: [(doc_id, score), ...]}` best first, through the API's code path (the
    documents `filter` keeps only, when given)."""
    runs: dict[str, list[tuple[str, float]]] = {}
    for query in tqdm(queries, desc=spec.name, unit="query"):
        candidates = pools.get(query.qid) if pools is not None else None
        if pools is not None and candidates is None:
            logger.warning("query %s has no pool: skipped", query.qid)
            continue
        left_out = {*query.exclude, *([query.document_id] if query.document_id else [])}
        if candidates is not None:
            candidates = [c for c in candidates if c not in left_out]
        try:
            options = SimilarOptions(
                top_k=depth,
                exclude=list(query.exclude),  # out of the population, not only of the list
                method=spec.method,
                normalize=spec.normalize,
                candidates=candidates,
                filter=filter,
                matches_per_result=0,
            )
            result = searcher.similar(build_query(searcher, query), options)
        except (EmptyDocumentError, DocumentNotFoundError, QueryError, ValueError) as error:
            logger.warning(
                "query %s cannot be run (%s): it ranks nothing and scores 0", query.qid, error
            )
            runs[query.qid] = []
            continue
        ranked = [(h.document_id, h.score) for h in result.results if h.document_id not in left_out]
        runs[query.qid] = ranked[:depth]
    return runs
