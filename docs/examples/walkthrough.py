"""The walk-through of docs/walkthrough.md, against a running docsim serving AILA 2019 as
`default` and CSFCube as `csfcube`: `python docs/examples/walkthrough.py URL`, run from the
repository's root beside `../shared/data`. It prints what a user sees."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from docsim import Client

DATA = Path("../shared/data")
url = sys.argv[1]
aila_query = (DATA / "aila2019/queries_dev.txt").read_text().splitlines()[0].split("||", 1)[1]
abstract = json.loads((DATA / "csfcube/queries_dev.jsonl").read_text().splitlines()[0])

with Client(url) as docsim:
    print("# collections")
    for c in docsim.collections():
        print(f"{c.name:10s} version {c.index_version}  {c.documents} documents")

    print("\n# AILA: judgments like this query, from the Supreme Court, from 1990 on")
    after_1990 = {
        "and": [
            {"field": "court", "eq": "Supreme Court of India"},
            {"field": "date", "gte": "1990-01-01"},
        ]
    }
    found = docsim.similar(aila_query, top_k=5, filter=after_1990)
    print(f"{found.scored_documents} judgments scored, {found.took_ms:.0f} ms, {found.method}")
    for hit in found:
        meta = docsim.document(hit.document_id).metadata
        print(f"{hit.rank}. {hit.document_id:6s} {hit.score:.3f}  {meta['date']}")

    print("\n# like these two judgments, unlike this one, same filter")
    unlike = found.results[0].document_id
    liked = docsim.similar(like=["C14", "C9"], unlike=[unlike], top_k=5, filter=after_1990)
    for hit in liked:
        print(f"{hit.rank}. {hit.document_id:6s} {hit.score:.3f}")

    print("\n# the 5 best paragraphs, from 5 different judgments")
    paragraphs = docsim.similar(
        aila_query, granularity="paragraph", top_k=5, group_by="document", group_size=1
    )
    for hit in paragraphs:
        print(f"{hit.rank}. {hit.document_id:6s} {hit.score:.3f}  {hit.text[:70]!r}")

    print("\n# CSFCube: abstracts like a posted abstract, in the collection csfcube")
    papers = docsim.in_collection("csfcube")
    found = papers.similar({"title": "", "text": abstract["text"]}, top_k=5)
    print(f"{found.scored_documents} abstracts scored, {found.took_ms:.0f} ms, {found.method}")
    for hit in found:
        print(f"{hit.rank}. {hit.document_id:8s} {hit.score:.3f}  {hit.title[:60]}")

    print("\n# its best sentences in other abstracts, one per abstract")
    sentences = papers.similar(
        document_id=abstract["document_id"],
        granularity="sentence",
        top_k=3,
        group_by="document",
        group_size=1,
    )
    for hit in sentences:
        print(f"{hit.rank}. {hit.document_id:8s} {hit.score:.3f}  {hit.text[:60]!r}")
