"""Candidate generation: the documents worth scoring exactly when a collection is too large
to score every one (`centroids`: PLAID-style cells and residual codes; `neighbours`: the
nearest units of each query level in the levels' FAISS indices)."""
