"""The query engine: ranking a collection's served version against a query document, and
explaining a pair. `searcher` is the façade (`Searcher`), `serving` opens the active version,
`api` is the app's surface; the methods' scorers (`scorers`, `sdr_scorer`, `sdr_ranker`,
`lexical`), candidate generation (`candidates`), fusion, units, filters, explanations, the
served version in memory (`served`), shards (`shards`) and `docsim evaluate` (`evaluation`)
each live in the module or package of that name."""
