"""Building a published index version for tests, and copying one built before."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sqlalchemy import func, update

from docsim.indexer.builder.pipeline import BuildResult, build_index
from docsim.indexer.settings import DatabaseSettings, Settings, load_configured_encoder
from docsim.indexer.store.db import make_engine, upgrade
from docsim.indexer.store.tables import index_versions
from docsim.indexer.text.sentences import load_splitter
from docsim.models.encoders.encoder import Encoder
from tests.utils.postgres import PostgresServer


def publish(
    corpus: Path, settings: Settings, encoder: Path | Encoder, **build_options: Any
) -> BuildResult:
    """Migrate the settings' database and publish one version of `corpus` with `encoder` (a
    directory or a loaded encoder); `build_options` go to `build_index`."""
    upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    try:
        return build_index(
            corpus,
            settings=settings,
            engine=engine,
            # a directory is loaded as the service loads it: the settings' device and precision
            encoder=(
                load_configured_encoder(settings, encoder) if isinstance(encoder, Path) else encoder
            ),
            splitter=load_splitter(),
            show_progress=False,
            **build_options,
        )
    finally:
        engine.dispose()


# What a build does not read: where it writes, and how the service and its jobs run.
NOT_BUILD_SETTINGS = {"data_dir", "db", "jobs", "api", "log", "database_url"}


@dataclass(frozen=True)
class _Template:
    data_dir: Path
    database_url: str
    built: BuildResult


class PublishedCopies:
    """`publish`, for a new data directory, by copying a build made once per test session.

    Most service tests need a data directory of their own holding one published version of the
    sample corpus, which they then change. Building it again for each test costs a second or
    more of CPU; a copy of the same build (same corpus, encoder and build settings) holds the
    same files and rows. The version's folder is the one absolute path a build records, and it
    is moved to the copy. On PostgreSQL the database is copied with `CREATE DATABASE ...
    TEMPLATE`. `tests/utils/test_indexes.py` checks a copy against a build of its own.
    """

    def __init__(self, root: Path, server: PostgresServer | None) -> None:
        self.root = root
        self.server = server
        self._templates: dict[tuple[str, ...], _Template] = {}

    def publish(self, corpus: Path, settings: Settings, encoder: Path) -> BuildResult:
        """What `publish(corpus, settings, encoder)` gives; `settings.data_dir` must not exist
        yet (a second version in one directory is a build: call `publish`)."""
        if settings.data_dir.exists():
            raise FileExistsError(f"{settings.data_dir} exists: publish into it with `publish`")
        template = self._template(corpus, settings, encoder)
        shutil.copytree(template.data_dir, settings.data_dir)
        if self.server is not None:
            self.server.copy_database(template.database_url, settings.database_url)
        old, new = str(template.data_dir.resolve()), str(settings.data_dir.resolve())
        engine = make_engine(settings.database_url)
        try:
            with engine.begin() as conn:
                conn.execute(
                    update(index_versions).values(
                        path=func.replace(index_versions.c.path, old, new)
                    )
                )
        finally:
            engine.dispose()
        built = template.built
        return replace(built, path=Path(new) / built.path.relative_to(old))

    def _template(self, corpus: Path, settings: Settings, encoder: Path) -> _Template:
        build_settings = settings.model_dump_json(exclude=NOT_BUILD_SETTINGS)
        key = (type(settings).__qualname__, str(corpus), str(encoder), build_settings)
        if key not in self._templates:
            folder = self.root / f"template-{len(self._templates)}"
            database = DatabaseSettings(url=self.server.database() if self.server else None)
            template_settings = settings.model_copy(
                update={"data_dir": folder / "data", "db": database}
            )
            built = publish(corpus, template_settings, encoder)
            self._templates[key] = _Template(folder / "data", template_settings.database_url, built)
        return self._templates[key]
