"""What every `docsim` command shares: the typer app, option types, error and settings
helpers, logging setup and the top-level callback. The command modules register on `cli`."""

from __future__ import annotations

import logging
import signal
from importlib.metadata import version as package_version
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from docsim.indexer.choices import BackendChoice, CorpusFormat, EngineName
from docsim.indexer.logs import configure_logging
from docsim.indexer.settings import AnySettings, Settings, get_settings

if TYPE_CHECKING:
    from sqlalchemy import Engine

HELP = (
    "docsim: find the documents of a collection most like a given one, and why. Build an "
    "index (`index`, `reindex`, `worker`), inspect it (`info`), serve it over HTTP (`serve`), "
    "measure its rankings (`evaluate`), and train encoders and splitters (`train`, "
    "`train-splitter`)."
)

logger = logging.getLogger("docsim")
cli = typer.Typer(add_completion=False, no_args_is_help=True, help=HELP)


USAGE = 2  # a command's exit on a `DocsimError`: one line that says what to fix or wait for


def user_errors() -> tuple[type[Exception], ...]:
    """The errors a command answers with one line on stderr and exit `USAGE` (`fail_with`),
    no traceback: every `DocsimError` (`models.errors`, a leaf that loads neither torch nor
    the pipeline: `docsim --help` imports neither)."""
    from docsim.models.errors import DocsimError

    return (DocsimError,)


def fail_with(error: BaseException) -> NoReturn:
    """Fail the command with `error`'s message and exit `USAGE`."""
    fail(str(error), code=USAGE)


EncoderOption = Annotated[
    str | None, typer.Option(help="Built-in encoder name (minilm) or a model directory.")
]
FormatOption = Annotated[CorpusFormat, typer.Option("--format", help="Corpus format.")]
ProgressOption = Annotated[bool, typer.Option(help="Show progress bars.")]

DataDir = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Where indexes and the SQLite file live (DOCSIM_DATA_DIR)."),
]


EngineOption = Annotated[
    EngineName,
    typer.Option(
        "--engine",
        help="Where the encode stage runs: `local` (this process) or `ray` (Ray Data; a local "
        "Ray unless DOCSIM_RAY__ADDRESS names a cluster).",
    ),
]

ReencodeOption = Annotated[
    bool,
    typer.Option(
        "--reencode",
        help="Encode every document, also those the active version holds unchanged (whose "
        "vectors are reused by default: same text and split, encoder and chunk size).",
    ),
]
BackendOption = Annotated[
    BackendChoice | None,
    typer.Option(
        "--backend",
        help="What runs the encoder: `openvino-int8`, `openvino-fp32`, `torch` or `auto` "
        "(OpenVINO for a transformer on the CPU when it is installed: int8 where the CPU has "
        "VNNI or AMX, fp32 where not). Default: DOCSIM_ENCODER__BACKEND, else auto.",
    ),
]


def fail(message: str, code: int = USAGE) -> NoReturn:
    typer.echo(f"docsim: error: {message}", err=True)
    raise typer.Exit(code)


_chosen: dict[str, str] = {}  # `docsim --collection NAME ...`: the collection of the command


def cli_settings(data_dir: Path | None) -> Settings:
    """The settings of a command: the environment's, with `--data-dir` and `--collection`."""
    return with_command_options(get_settings(), data_dir)


def with_command_options(settings: AnySettings, data_dir: Path | None) -> AnySettings:
    """`settings` (the indexer's, or a layer's above that extends them) with the command's
    `--data-dir` and `--collection`."""
    update: dict[str, Any] = {}
    if data_dir:
        update["data_dir"] = data_dir
    if "collection" in _chosen:
        update["collection"] = _chosen["collection"]
    return settings.model_copy(update=update) if update else settings


def in_collection(settings: AnySettings, engine: Engine, *, create: bool = False) -> AnySettings:
    """`settings` as the command's collection sees them (its encoder, index and search
    settings over the server's); `create`: a collection that does not exist yet is created
    with none of its own (`docsim --collection new index ...`).

    Raises:
        CollectionNotFoundError: it does not exist, and `create` is false.
    """
    from docsim.indexer.errors import CollectionConflictError, CollectionNotFoundError
    from docsim.indexer.settings import collection_settings
    from docsim.indexer.store.collections import create_collection, get_collection

    try:
        row = get_collection(engine, settings.collection)
    except CollectionNotFoundError:
        if not create:
            raise
        try:
            row = create_collection(engine, settings.collection)
        except CollectionConflictError:  # created meanwhile by another process
            row = get_collection(engine, settings.collection)
    return collection_settings(settings, row)


def existing_data_dir(settings: AnySettings) -> AnySettings:
    """`settings`, for a command that only reads: it must not create the data directory."""
    if not settings.data_dir.is_dir():
        problem = "is not a directory" if settings.data_dir.exists() else "does not exist"
        fail(
            f"data directory {str(settings.data_dir)!r} {problem}: "
            "run `docsim index` first, or pass --data-dir"
        )
    return settings


def setup_logging(verbose: bool) -> None:
    configure_logging(get_settings().log, verbose)


def _raise_interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _print_version(asked: bool) -> None:
    if asked:
        typer.echo(f"docsim {package_version('docsim')}")
        raise typer.Exit()


@cli.callback()
def main_options(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
    collection: Annotated[
        str | None,
        typer.Option(
            "--collection",
            "-c",
            help="The collection the command works on (DOCSIM_COLLECTION; default: `default`). "
            "`index` creates it when it does not exist.",
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """docsim: which documents in my collection are most like this one, and why?"""
    setup_logging(verbose)
    if collection is not None:
        from docsim.indexer.errors import CollectionNameError
        from docsim.indexer.store.collections import check_collection_name

        try:
            check_collection_name(collection)
        except CollectionNameError as error:
            fail(str(error))
        _chosen["collection"] = collection
    signal.signal(signal.SIGTERM, _raise_interrupt)
