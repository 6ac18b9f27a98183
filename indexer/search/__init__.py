"""Answering queries against a loaded version: SDR, single-vector, BM25, fusion, units, explain."""
