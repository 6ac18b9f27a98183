"""The search layer's one surface for the app: everything `app` may use of `search`, by purpose.
`tests/test_layers.py` refuses an `app` import of any other search module; what is named here
is public, and changes to it are changes of interface.

- **Configuration**: `QuerySettings`, the indexer's settings with the search group
  (`SearchSettings`); the app extends it with its own.
- **Opening the served version**: `open_searcher` (load a version with its encoder, checked to
  be the one it was built with), `serve_on_shards` (score on Ray actors);
  `Searcher.with_changes` follows document changes.
- **Search and explain**: `Searcher` with its query and result types (a request's options are
  the protocol's `SimilarOptions`); metadata filters (`FilterColumns`, the fields and
  their types; a filter's tree is the protocol's); `explain_pair` and `PairExplanation`.

Plain imports, each from the module that defines the name (`tests/test_layers.py` checks it).
"""

from __future__ import annotations

from docsim.protocol.choices import Granularity, Method, Population, ScoringMode
from docsim.search.explanations import PairExplanation, Side, explain_pair
from docsim.search.filters import FilterColumns
from docsim.search.scorer_settings import regrouped
from docsim.search.searcher import Searcher
from docsim.search.serving import open_searcher, serve_on_shards
from docsim.search.settings import QuerySettings, SearchSettings
from docsim.search.types import (
    ParagraphStats,
    Query,
    SearchResult,
)

__all__ = [
    "PairExplanation",
    "FilterColumns",
    "Granularity",
    "Method",
    "ParagraphStats",
    "Population",
    "Query",
    "QuerySettings",
    "ScoringMode",
    "SearchResult",
    "SearchSettings",
    "regrouped",
    "Searcher",
    "Side",
    "explain_pair",
    "open_searcher",
    "serve_on_shards",
]
