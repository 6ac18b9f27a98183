"""A published copy (`PublishedCopies`) is the build it copies: same rows, same files, same
answers, in a data directory (and a database) of its own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import DateTime, Engine, select

from docsim.indexer.settings import DatabaseSettings
from docsim.indexer.store.db import make_engine
from docsim.indexer.store.tables import documents, index_versions, metadata
from docsim.protocol.choices import Method
from docsim.protocol.requests import SimilarOptions
from docsim.search.serving import open_searcher
from docsim.search.settings import QuerySettings
from tests.utils.indexes import PublishedCopies, publish
from tests.utils.postgres import PostgresServer

# What two builds of the same corpus write differently: when, and how long they took. A
# timestamp column is compared by whether it is set.
TIMED_FILES = {"manifest.json", "calibration.json"}


def rows(engine: Engine, data_dir: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows in key order; a version's folder relative to `data_dir`."""
    found: dict[str, list[tuple[Any, ...]]] = {}
    with engine.connect() as conn:
        for table in metadata.sorted_tables:
            columns = [c for c in table.columns if c.name != "manifest"]  # compared apart
            key = list(table.primary_key.columns) or columns
            result = conn.execute(select(*columns).order_by(*key))
            found[table.name] = [
                tuple(
                    v is not None
                    if isinstance(c.type, DateTime)
                    else Path(v).relative_to(data_dir.resolve())
                    if c is index_versions.c.path
                    else v
                    for c, v in zip(columns, row, strict=True)
                )
                for row in result
            ]
    return found


def files(version: Path) -> dict[str, bytes]:
    return {
        p.relative_to(version).as_posix(): p.read_bytes()
        for p in sorted(version.rglob("*"))
        if p.is_file() and p.name not in TIMED_FILES
    }


def untimed(manifest: dict[str, Any]) -> dict[str, Any]:
    manifest = json.loads(json.dumps(manifest))
    for key in ("created_at", "build"):
        manifest.pop(key)
    manifest["backend"]["calibration"].pop("seconds")
    return manifest


def test_a_copy_is_the_build_it_copies(
    tmp_path: Path,
    sample_corpus: Path,
    tiny_encoder_dir: Path,
    published_copies: PublishedCopies,
    _postgres: PostgresServer | None,
) -> None:
    copied_settings = QuerySettings(data_dir=tmp_path / "copied")
    built_settings = QuerySettings(
        data_dir=tmp_path / "built",
        db=DatabaseSettings(url=_postgres.database() if _postgres is not None else None),
    )
    copied = published_copies.publish(sample_corpus, copied_settings, tiny_encoder_dir)
    built = publish(sample_corpus, built_settings, tiny_encoder_dir)
    assert copied_settings.database_url != built_settings.database_url
    assert copied.path.parent == (copied_settings.data_dir / "indexes").resolve()
    assert copied.path.name == built.path.name
    assert untimed(copied.manifest) == untimed(built.manifest)
    assert files(copied.path) == files(built.path)

    engines = [make_engine(s.database_url) for s in (copied_settings, built_settings)]
    try:
        copied_rows, built_rows = (
            rows(e, s.data_dir)
            for e, s in zip(engines, (copied_settings, built_settings), strict=True)
        )
        assert copied_rows == built_rows
        assert len(copied_rows["sentences"]) > 1000
        with engines[0].connect() as conn:
            first = conn.execute(select(documents.c.external_id).limit(1)).scalar_one()
        answers = []
        for engine, settings in zip(engines, (copied_settings, built_settings), strict=True):
            searcher = open_searcher(settings, engine)
            assert searcher.index.path == Path(
                settings.data_dir.resolve() / "indexes" / built.path.name
            )
            query = searcher.query_from_index(first)
            answers.append(
                [
                    [
                        (h.document_id, h.score)
                        for h in searcher.similar(
                            query, SimilarOptions(top_k=48, method=method)
                        ).results
                    ]
                    for method in (Method.sdr, Method.bm25, Method.maxsim)
                ]
            )
        assert answers[0] == answers[1]
    finally:
        for engine in engines:
            engine.dispose()


def test_a_copy_goes_only_into_a_new_data_directory(
    tmp_path: Path, sample_corpus: Path, tiny_encoder_dir: Path, published_copies: PublishedCopies
) -> None:
    settings = QuerySettings(data_dir=tmp_path / "data")
    published_copies.publish(sample_corpus, settings, tiny_encoder_dir)
    with pytest.raises(FileExistsError, match="publish into it with `publish`"):
        published_copies.publish(sample_corpus, settings, tiny_encoder_dir)
