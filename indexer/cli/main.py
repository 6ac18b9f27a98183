"""The indexer's commands of the `docsim` command line: `index`, `info`, `train-splitter`,
`reindex`, `worker`, `train`.

`command_line()` returns the Typer application with every indexer command registered, in the
order `docsim --help` lists them (each command module registers its commands on `cli` when
imported); the app adds the search layer's `evaluate` and its own `serve` (`app.cli`)."""

from __future__ import annotations

import typer

# isort: off
import docsim.indexer.cli.index  # noqa: F401  index, info, train-splitter
import docsim.indexer.cli.jobs  # noqa: F401  reindex, worker
import docsim.indexer.cli.train  # noqa: F401  train

# isort: on
from docsim.indexer.cli.common import cli

__all__ = ["cli", "command_line", "main"]


def command_line() -> typer.Typer:
    """The indexer's command line, every command registered."""
    return cli


def main() -> None:
    command_line()()


if __name__ == "__main__":
    main()
