"""Lexical ranking: Okapi BM25 over the documents' texts (`bm25`), its postings per served
version (`postings`), and the query variants that reweigh them (`query_terms`: reduction, RM3)."""
