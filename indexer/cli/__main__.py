from __future__ import annotations

from docsim.indexer.cli.main import main

main()
