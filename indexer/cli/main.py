"""The `docsim` command line: `index`, `info`, `reindex`, `worker`, `train-splitter`.

Importing this module registers every command on `cli`; the command modules are imported
in the order `docsim --help` lists them."""

from __future__ import annotations

# isort: off
import indexer.cli.index  # noqa: F401  index, info, train-splitter
import indexer.cli.evaluate  # noqa: F401  evaluate
import indexer.cli.jobs  # noqa: F401  reindex, worker
import indexer.cli.train  # noqa: F401  train

# isort: on
from indexer.cli.common import cli

__all__ = ["cli", "main"]


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
