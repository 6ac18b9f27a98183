from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import insert, inspect, text

from docsim.indexer.jobs.queue import create_job, list_jobs
from docsim.indexer.store.collections import create_collection, list_collections
from docsim.indexer.store.db import downgrade, make_engine, upgrade
from docsim.indexer.store.tables import jobs, metadata
from docsim.indexer.store.versions import active_version, create_version, publish_version
from docsim.protocol.requests import SimilarOptions
from docsim.search.serving import open_searcher
from docsim.search.settings import QuerySettings

TABLES = {
    "index_versions",
    "active_versions",
    "documents",
    "sections",
    "paragraphs",
    "sentences",
    "chunks",
    "collections",
}


def test_upgrade_downgrade_on_a_fresh_database(tmp_path: Path) -> None:
    url = QuerySettings(data_dir=tmp_path).database_url  # SQLite, or the run's PostgreSQL
    upgrade(url)
    engine = make_engine(url)
    assert TABLES <= set(inspect(engine).get_table_names())
    with engine.connect() as conn:
        # the migrations create exactly what the table metadata describes
        assert compare_metadata(MigrationContext.configure(conn), metadata) == []
    downgrade(url, "base")
    assert not TABLES & set(inspect(engine).get_table_names())
    upgrade(url)
    assert TABLES <= set(inspect(engine).get_table_names())
    engine.dispose()


def test_an_existing_data_directory_comes_in_as_the_default_collection(
    settings: QuerySettings, published_copies, sample_corpus: Path, tiny_encoder_dir: Path
) -> None:
    """A data directory of the schema before collections (0006), with a published version,
    a job and a document change, is served as `default` after the upgrade: same version,
    same revision, same files, nothing rebuilt."""
    built = published_copies.publish(sample_corpus, settings, tiny_encoder_dir)
    url = settings.database_url
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(
            insert(jobs).values(
                kind="reindex",
                parameters={"source": "current"},
                status="succeeded",
                done=0,
                unit="sentences",
                cancel_requested=False,
                attempts=1,
                version_id=built.version_id,
                created_at=datetime.now(timezone.utc),
            )
        )
    searcher = open_searcher(settings, engine)
    before = searcher.similar(searcher.query_from_index("coffee-01"), SimilarOptions(top_k=5))
    downgrade(url, "0006")
    columns = {c["name"] for c in inspect(engine).get_columns("index_versions")}
    assert "collection" not in columns and "collections" not in inspect(engine).get_table_names()
    files = sorted(p.relative_to(settings.data_dir) for p in settings.data_dir.rglob("*"))

    upgrade(url)
    (row,) = list_collections(engine)
    assert (row.name, row.settings, row.write_key_sha256) == ("default", {}, None)
    active = active_version(engine, "default")
    assert (active.version_id, active.collection) == (built.version_id, "default")
    assert [job.collection for job in list_jobs(engine)] == ["default"]
    assert sorted(p.relative_to(settings.data_dir) for p in settings.data_dir.rglob("*")) == files
    served = open_searcher(settings, engine)
    after = served.similar(served.query_from_index("coffee-01"), SimilarOptions(top_k=5))
    assert [(h.document_id, h.score) for h in after.results] == [
        (h.document_id, h.score) for h in before.results
    ]
    engine.dispose()


def test_downgrading_drops_the_other_collections_and_keeps_default(
    settings: QuerySettings, published_copies, sample_corpus: Path, tiny_encoder_dir: Path
) -> None:
    built = published_copies.publish(sample_corpus, settings, tiny_encoder_dir)
    engine = make_engine(settings.database_url)
    create_collection(engine, "other")
    other = create_version(engine, encoder_name="tiny", path="", collection="other")
    publish_version(engine, other, path="/nowhere", manifest={})
    create_job(engine, "reindex", {"source": "current"}, "other")
    assert active_version(engine, "other").version_id == other
    downgrade(settings.database_url, "0006")
    with engine.connect() as conn:
        slots = conn.execute(text("SELECT slot, version_id FROM active_versions")).all()
        statuses = dict(conn.execute(text("SELECT version_id, status FROM index_versions")).all())
        assert conn.execute(text("SELECT count(*) FROM jobs")).scalar() == 0
    assert slots == [("default", built.version_id)]
    assert statuses == {built.version_id: "ready", other: "retired"}
    upgrade(settings.database_url)
    assert [r.name for r in list_collections(engine)] == ["default"]
    assert active_version(engine).version_id == built.version_id
    engine.dispose()


def test_the_field_types_migration_takes_them_from_the_documents(
    settings: QuerySettings, published_copies, sample_corpus: Path, tiny_encoder_dir: Path, caplog
) -> None:
    """Documents written before types were fixed give the collection its types; a field on
    which they disagree stays `mixed`, and the migration says so."""
    import logging

    from sqlalchemy import select, update

    from docsim.indexer.store.tables import documents

    built = published_copies.publish(sample_corpus, settings, tiny_encoder_dir)
    url = settings.database_url
    engine = make_engine(url)
    downgrade(url, "0007")
    with engine.begin() as conn:
        ids = (
            conn.execute(
                select(documents.c.doc_id).where(documents.c.version_id == built.version_id)
            )
            .scalars()
            .all()
        )
        for i, doc_id in enumerate(ids):
            metadata = {"year": 1990 + i, "date": "2001-01-01" if i % 2 else 2001}
            conn.execute(
                update(documents).where(documents.c.doc_id == doc_id).values(metadata=metadata)
            )

    with caplog.at_level(logging.WARNING):
        upgrade(url)

    (row,) = list_collections(engine)
    assert row.field_types == {"date": "mixed", "year": "number"}
    assert "'date' holds values of several types" in caplog.text
    engine.dispose()
