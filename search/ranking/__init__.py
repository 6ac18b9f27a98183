"""Ranking a version's documents against a request, as a pipeline of named stages.

1. **pool** (`pool`): the positions a query may rank (the request's candidates, filter and
   exclusions, minus its own source), the scoring mode, and candidate mode's first pass.
2. **scorers** (`table`): each method is one class and one row of `SCORERS`. A `Scorer`
   (`scorer`) gives every document a score of its own; a `Ranking` (`sdr_rankings`: `sdr`,
   `sdr-window` and the fusions) ranks its own pool in its own mode, and the fusions call the
   other rows (`fusion` normalises and sums their scores).
3. **examples** (`examples`): the runs of a request's `like` and `unlike` documents combined.
4. **paging**: the top `top_k` in the fixed tie order (`search.order`); other granularities rank and
   group units (`search.units`).
5. **matches** (`hits`): each hit with its evidence: SDR's best paragraph pairs and the
   passages it shares with the query.

`pipeline.RankingPipeline` runs them in that order; `search.searcher.Searcher` is the façade
that loads what they read.
"""
