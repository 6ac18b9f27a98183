"""Building a published index version for tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from indexer.builder.pipeline import BuildResult, build_index
from indexer.config import Settings, load_configured_encoder
from indexer.store.db import make_engine, upgrade
from indexer.text.sentences import load_splitter
from models.encoder import Encoder


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
