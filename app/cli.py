"""`docsim`: the indexer's commands, the search layer's `evaluate`, and `serve`."""

from __future__ import annotations

import gc
from typing import Annotated

import typer

from docsim.indexer.cli.common import DataDir, existing_data_dir
from docsim.indexer.cli.main import command_line
from docsim.search.cli import commands as search_commands


def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (DOCSIM_API__HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (DOCSIM_API__PORT).")] = None,
    data_dir: DataDir = None,
    shards: Annotated[
        int | None,
        typer.Option(
            help="Score on this many Ray shard actors (DOCSIM_SHARDS__COUNT; on "
            "DOCSIM_RAY__ADDRESS, else a local Ray); 0: in this process."
        ),
    ] = None,
) -> None:
    """Serve the active index over HTTP (OpenAPI docs at /docs). The data directory must
    exist (`docsim index` makes it): a mistyped path exits 2 instead of serving nothing."""
    import uvicorn

    from docsim.app.core.settings import get_service_settings
    from docsim.app.main import create_app

    settings = get_service_settings()
    if data_dir:
        settings = settings.model_copy(update={"data_dir": data_dir})
    existing_data_dir(settings)
    if shards is not None:
        settings = settings.model_copy(
            update={"shards": settings.shards.model_copy(update={"count": shards})}
        )
    app = create_app(settings)
    freeze_imports()
    # log_config=None: uvicorn's loggers go through docsim's handler (text or JSON)
    uvicorn.run(
        app, host=host or settings.api.host, port=port or settings.api.port, log_config=None
    )


def freeze_imports() -> None:
    """Import what loading and serving a version needs, then move every object made so far
    into the garbage collector's permanent generation (`gc.freeze`). A full collection pauses
    every thread for as long as it walks the tracked objects; the imported modules' own
    (about half of a served AILA process's) live as long as the process, so it need not walk
    them. Versions load after this, so a retired one is still collected as before."""
    from docsim.search.api import open_searcher  # noqa: F401 - imported for its modules

    gc.collect()
    gc.freeze()


def docsim() -> typer.Typer:
    """The indexer's command line with the search layer's commands (`evaluate`) and `serve`
    added."""
    cli = command_line()
    registered = {c.callback for c in cli.registered_commands}
    for command in search_commands.registered_commands:
        if command.callback not in registered:
            cli.registered_commands.append(command)
    if serve not in registered:
        cli.command()(serve)
    return cli


def main() -> None:
    docsim()()
