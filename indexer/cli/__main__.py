from __future__ import annotations

from indexer.cli.main import main

main()
