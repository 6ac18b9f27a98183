"""The documents a build reads (`Source`), and stage 1 of `docsim index`: reading and
splitting them into the build's scratch plan (`indexer.builder.split_plan`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from docsim.indexer.builder.split_plan import SplitPlan
from docsim.indexer.builder.split_workers import default_workers
from docsim.indexer.choices import CorpusFormat
from docsim.indexer.errors import IndexBuildError
from docsim.indexer.settings import Settings
from docsim.indexer.text.corpus import Skipped, detect_format, read_corpus
from docsim.indexer.text.documents import SourceDocument
from docsim.indexer.text.readers.registry import FileLimits
from docsim.indexer.text.sentences import SentenceSplitter


@dataclass(frozen=True)
class Source:
    """The documents a build reads, the corpus format they were read as, and the label the
    manifest and the logs give them."""

    documents: Iterable[SourceDocument | Skipped]
    fmt: CorpusFormat
    label: str


def open_source(
    corpus: Path | None,
    documents: Iterable[SourceDocument | Skipped] | None,
    fmt: CorpusFormat | str,
    label: str | None,
    settings: Settings,
) -> Source:
    """The documents to index: `documents` as given, else a reader of `corpus` (its format
    detected when `auto`, under the configured file limits). Reads nothing yet.

    Raises:
        IndexBuildError: neither a corpus nor documents.
        ValueError: `fmt` is not a corpus format.
    """
    fmt = CorpusFormat(fmt)
    if documents is None:
        if corpus is None:
            raise IndexBuildError("give a corpus path or documents to index")
        if fmt is CorpusFormat.auto:
            fmt = detect_format(corpus)  # recorded in the manifest as detected
        documents = read_corpus(corpus, fmt, FileLimits(**settings.files.model_dump()))
    return Source(documents, fmt, label or str(corpus))


def split_source(
    source: Source,
    splitter: SentenceSplitter,
    indexes_dir: Path,
    settings: Settings,
    *,
    show_progress: bool,
) -> SplitPlan:
    """Stage 1 (`SplitPlan.write`): read and split every document of `source` into a
    scratch folder under the data directory's `indexes/`, in the build's blocks; the caller
    removes it (`SplitPlan.remove`).

    Raises:
        IndexBuildError: no document could be indexed.
    """
    plan = SplitPlan.write(
        source.documents,
        splitter,
        indexes_dir,
        block_documents=settings.index.block_documents,
        show_progress=show_progress,
        workers=settings.index.split_workers or default_workers(),
    )
    if not len(plan):
        plan.remove()
        raise IndexBuildError(
            f"no indexable documents in {source.label!r} ({len(plan.skipped)} skipped); "
            "nothing was published"
        )
    return plan
