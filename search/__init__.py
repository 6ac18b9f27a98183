"""The query engine: ranking a collection's served version against a query document, and
explaining a pair. `searcher` is the façade (`Searcher`), `serving` opens the active version,
`api` is the app's surface; the ranking pipeline and its method table (`ranking`), the
methods' scorers (`scorers`, `sdr_scorer`, `sentence_sets`, `evidence`, `lexical`), candidate
generation (`candidates`), units, filters, explanations, the served version in memory
(`served`), shards (`shards`) and `docsim evaluate` (`evaluation`) each live in the module or
package of that name."""
