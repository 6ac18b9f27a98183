"""`docsim index`, `docsim info` and `docsim train-splitter`."""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path
from typing import Annotated

import typer

from docsim.indexer.choices import BackendChoice, CorpusFormat, EngineName
from docsim.indexer.cli.common import (
    BackendOption,
    DataDir,
    EncoderOption,
    EngineOption,
    FormatOption,
    ProgressOption,
    ReencodeOption,
    cli,
    cli_settings,
    existing_data_dir,
    fail,
    fail_with,
    in_collection,
    user_errors,
)
from docsim.indexer.settings import Settings, load_configured_encoder
from docsim.indexer.text.sentences import DEFAULT_PARAMS  # a path: NLTK loads on first use

logger = logging.getLogger("docsim")


@cli.command()
def index(
    path: Annotated[
        Path | None,
        typer.Argument(
            help="Corpus: a folder of .txt/.md files, a JSONL file or an AILA folder. "
            "Default: the sample corpus shipped with docsim."
        ),
    ] = None,
    encoder: EncoderOption = None,
    fmt: FormatOption = CorpusFormat.auto,
    data_dir: DataDir = None,
    progress: ProgressOption = True,
    encode_engine: EngineOption = EngineName.local,
    backend: BackendOption = None,
    reencode: ReencodeOption = False,
) -> None:
    """Build a new index version of a corpus and publish it atomically; documents the active
    version holds unchanged keep their vectors (only new and changed ones are encoded)."""
    from docsim.indexer.builder.engines import make_encode_engine
    from docsim.indexer.builder.pipeline import build_index, prepare_data_dir
    from docsim.indexer.store.db import make_engine, upgrade
    from docsim.indexer.store.versions import collect_garbage
    from docsim.indexer.text.corpus import SAMPLE_CORPUS
    from docsim.indexer.text.sentences import load_splitter

    settings = cli_settings(data_dir)
    corpus = path or SAMPLE_CORPUS
    if path is None:
        logger.info("No corpus given: indexing the shipped sample corpus %s", corpus)
    if not corpus.exists():  # before the encoder loads: a typo is reported at once
        fail(f"the corpus path {str(corpus)!r} does not exist")
    try:
        if settings.db.auto_migrate:
            upgrade(settings.database_url)
        engine = make_engine(settings.database_url)
        settings = _with_options(in_collection(settings, engine, create=True), backend, reencode)
        model = load_configured_encoder(settings, encoder)
        result = build_index(
            corpus,
            settings=settings,
            engine=engine,
            encoder=model,
            splitter=load_splitter(settings.punkt_params),
            fmt=fmt,
            show_progress=progress,
            encode_engine=make_encode_engine(
                encode_engine.value, settings, model, settings.index.block_documents
            ),
        )
    except user_errors() as error:
        fail_with(error)
    except KeyboardInterrupt:
        fail("interrupted: nothing was published and the active version is unchanged", code=130)
    retired = collect_garbage(  # retention after every publish, as the worker does
        engine,
        prepare_data_dir(settings.indexes_dir),
        keep_versions=settings.jobs.keep_versions,
        grace_seconds=settings.jobs.retire_grace_seconds,
        collection=settings.collection,
    )
    typer.echo(
        json.dumps(
            {
                "version_id": result.version_id,
                "path": str(result.path),
                "counts": result.manifest["counts"],
                "skipped": len(result.skipped),
                "reused": result.manifest["build"].get("reused"),
                "retired": retired,
            },
            indent=2,
        )
    )


def _with_options(settings: Settings, backend: BackendChoice | None, reencode: bool) -> Settings:
    """The collection's settings with the command line's options over them."""
    if backend is not None:
        encoder_settings = settings.encoder.model_copy(update={"backend": backend.value})
        settings = settings.model_copy(update={"encoder": encoder_settings})
    if reencode:
        index_settings = settings.index.model_copy(update={"reuse_vectors": False})
        settings = settings.model_copy(update={"index": index_settings})
    return settings


@cli.command()
def info(data_dir: DataDir = None) -> None:
    """Print the active version's manifest and its counts per level as JSON."""
    from docsim.indexer.store.db import make_engine, upgrade
    from docsim.indexer.store.units import count_units
    from docsim.indexer.store.versions import active_version

    settings = existing_data_dir(cli_settings(data_dir))
    try:
        if settings.db.auto_migrate:
            upgrade(settings.database_url)
        engine = make_engine(settings.database_url)
        version = active_version(engine, in_collection(settings, engine).collection)
        counts = count_units(engine, version.version_id)
    except user_errors() as error:
        fail_with(error)
    typer.echo(
        json.dumps(
            {
                "version_id": version.version_id,
                "path": version.path,
                "counts": counts,
                "manifest": version.manifest,
            },
            indent=2,
            sort_keys=True,
        )
    )


@cli.command("train-splitter")
def train_splitter(
    corpora: Annotated[list[Path], typer.Argument(help="Corpora to learn from (any format).")],
    out: Annotated[
        Path, typer.Option(help="Where to write the Punkt parameters (JSON).")
    ] = DEFAULT_PARAMS,
    max_documents: Annotated[int, typer.Option(help="Documents sampled per corpus.")] = 300,
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = 0,
) -> None:
    """Train Punkt sentence-splitting parameters offline on your own corpora."""
    from docsim.indexer.errors import CorpusError
    from docsim.indexer.text.corpus import Skipped, read_corpus
    from docsim.indexer.text.sentences import params_to_json, train_params

    texts: list[str] = []
    try:
        for corpus in corpora:
            docs = [d.text for d in read_corpus(corpus) if not isinstance(d, Skipped)]
            random.Random(seed).shuffle(docs)
            texts.extend(docs[:max_documents])
    except CorpusError as error:
        fail(str(error))
    logger.info("Training Punkt on %d documents", len(texts))
    out.write_text(params_to_json(train_params(texts)), encoding="utf-8")
    logger.info("Wrote %s", out)
