"""AILA judgments with their punctuation and line breaks removed (as OCR output and some
published legal corpora come): how they split, and whether `maxsim` and `sdr` still find
their originals.

    python benchmarks/unpunctuated.py --casedocs AILA/casedocs [--documents 300] [--queries 8]
        [--data-dir DIR] [--out benchmarks/results/unpunctuated.json]

Indexes the first `--documents` judgments (sorted by name) with the defaults into `--data-dir`
(a temporary folder by default), then takes `--queries` of them, spread evenly over the
collection, strips every character that is neither a letter, a digit nor a space and folds
all whitespace into single spaces, and reports for each: its sentences and paragraphs as
indexed and when stripped, the longest stripped sentence, and the rank of its original when
the stripped text is posted as the query (`maxsim`, `sdr`, `document`; the original is in
the collection, so rank 1 is right).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
import tempfile
from pathlib import Path

from record import save

from docsim.indexer.store.db import make_engine, upgrade
from docsim.indexer.text.corpus import json_document, read_corpus
from docsim.indexer.text.sentences import load_splitter
from docsim.indexer.text.split import split_document
from docsim.protocol.choices import Method
from docsim.protocol.requests import SimilarOptions
from docsim.search.serving import open_searcher
from docsim.search.settings import QuerySettings

logger = logging.getLogger("benchmarks.unpunctuated")
METHODS = (Method.maxsim, Method.sdr, Method.document)


def stripped(text: str) -> str:
    """`text` without punctuation or line breaks: letters, digits and single spaces."""
    return " ".join(re.sub(r"[^\w\s]|_", " ", text).split())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--casedocs", type=Path, required=True)
    parser.add_argument("--documents", type=int, default=300)
    parser.add_argument("--queries", type=int, default=8)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/unpunctuated.json"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    work = Path(tempfile.mkdtemp(prefix="unpunctuated-"))
    corpus = work / "casedocs"
    corpus.mkdir()
    for path in sorted(args.casedocs.glob("*.txt"))[: args.documents]:
        shutil.copy(path, corpus / path.name)
    data = args.data_dir or work / "data"
    settings = QuerySettings(data_dir=data)
    upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    from docsim.indexer.builder.pipeline import build_index
    from docsim.indexer.settings import load_configured_encoder

    if not (data / "indexes").is_dir() or not any((data / "indexes").iterdir()):
        build_index(corpus, settings=settings, engine=engine,
                    encoder=load_configured_encoder(settings), splitter=load_splitter(),
                    show_progress=False)  # fmt: skip
    searcher = open_searcher(settings, engine)
    splitter = load_splitter()
    sources = [s for s in read_corpus(corpus) if hasattr(s, "text")]
    step = max(1, len(sources) // args.queries)
    rows = []
    for source in sources[::step][: args.queries]:
        original = split_document(source, splitter).counts()
        text = stripped(source.text)
        query_doc = json_document({"id": "query", "text": text})
        split = split_document(query_doc, splitter)  # type: ignore[arg-type]
        counts = split.counts()
        query = searcher.query_from_source(query_doc)  # type: ignore[arg-type]
        ranks = {}
        for method in METHODS:
            hits = searcher.similar(query, SimilarOptions(top_k=50, method=method)).results
            found = [h.document_id for h in hits]
            ranks[method.value] = found.index(source.doc_id) + 1 if source.doc_id in found else None
        row = {
            "document": source.doc_id,
            "characters": len(text),
            "indexed": {k: original[k] for k in ("sentence", "paragraph")},
            "stripped": {k: counts[k] for k in ("sentence", "paragraph")},
            "longest_stripped_sentence": max(s.end - s.start for s in split.sentences()),
            "rank_of_original": ranks,
        }
        logger.info("%s", row)
        rows.append(row)
    report = {"documents": args.documents, "queries": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save(args.out, report)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
