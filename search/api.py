"""The search layer's one surface for the app: everything `app` may use of `search`, by purpose.
`tests/test_layers.py` refuses an `app` import of any other search module; what is named here
is public, and changes to it are changes of interface.

- **Configuration**: `QuerySettings`, the indexer's settings with the search group
  (`SearchSettings`); the app extends it with its own.
- **Opening the served version**: `open_searcher` (load a version with its encoder, checked to
  be the one it was built with), `serve_on_shards` (score on Ray actors);
  `Searcher.with_changes` follows document changes.
- **Search and explain**: `Searcher` with its options, query and result types (and the
  methods that rank whole documents only, `WHOLE_DOCUMENT_ONLY`); metadata
  filters (`parse_filter`, `Filter`, and `FilterColumns` for the fields and their types);
  `explain_pair` and `Explanation`.

Plain imports, each from the module that defines the name (`tests/test_layers.py` checks it).
"""

from __future__ import annotations

from docsim.protocol.choices import Granularity, Method, Population, ScoringMode
from docsim.search.explanations import Explanation, Side, explain_pair
from docsim.search.filters import Filter, FilterColumns, parse_filter
from docsim.search.scorer_settings import regrouped
from docsim.search.searcher import Searcher
from docsim.search.serving import open_searcher, serve_on_shards
from docsim.search.settings import QuerySettings, SearchSettings
from docsim.search.types import (
    WHOLE_DOCUMENT_ONLY,
    DocumentHit,
    ParagraphStats,
    Query,
    SearchOptions,
    SearchResult,
    UnitHit,
)

__all__ = [
    "WHOLE_DOCUMENT_ONLY",
    "DocumentHit",
    "Explanation",
    "Filter",
    "FilterColumns",
    "Granularity",
    "Method",
    "ParagraphStats",
    "Population",
    "Query",
    "QuerySettings",
    "ScoringMode",
    "SearchOptions",
    "SearchResult",
    "SearchSettings",
    "regrouped",
    "Searcher",
    "Side",
    "UnitHit",
    "explain_pair",
    "open_searcher",
    "parse_filter",
    "serve_on_shards",
]
