"""The pure search maths, tensors in and tensors out (no model runs here): SDR's hierarchical
scoring (`scoring`) and its exact split over shards (`shard_moments`), sentence-set matching
(`alignment`), proportional relevance (`proportional`), the maps behind an explanation
(`explain`), the compressed sentence scan (`scan`), PLAID-style centroid interaction and
residual codes (`centroid_interaction`, `residuals`), and the index arithmetic they share
(`ranges`)."""
