"""Proportional relevance from sentence evidence (RPRS: Askari, Verberne et al., 2023,
"Retrieval for Extremely Long Queries and Documents with RPRS").

Each source sentence finds its `n` nearest sentences in the whole collection (the cosine of
unit vectors). A document is relevant in proportion to how much of the source finds it and
how much of it is found. With source sentences s^1..s^k, F_d the distinct sentences of
document d among all the nearest ones, m_d its sentences and m the collection's mean:

    QP(s, d)   = |{i : one of the n nearest sentences of s^i lies in d}| / k
    DP(s, d)   = F_d (k1 + 1) / (F_d + k1 (1 - b + b m_d / m))
    rprs(s, d) = QP(s, d) DP(s, d)

With `weights` w (one per source sentence, mean 1), QP counts each finding source sentence
by its weight: sum_i w_i [s^i finds d] / sum_i w_i. `rarity_weights` gives a sentence the
weight of its distinctiveness in the collection, one minus the mean cosine of its nearest
sentences, as IDF weights a term by its rarity: a sentence close to many (a court's formula, a
date line) counts for little.

QP is the share of the source that finds the document; DP the document's found sentences,
saturated and corrected for its length as BM25 corrects a term's frequency (`k1`, `b`), so a
long document is not found merely for offering many sentences. A document no source sentence
finds scores 0. Three parameters: `n`, `k1` and `b`. Tensors in, tensors out.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from docsim.models.inference.pacing import before_batch
from docsim.models.kernels.scoring import block_cosines, block_rows

BLOCK_SENTENCES = 4096  # collection rows per product on the CPU (as `alignment.sentence_best`)


class Nearest(NamedTuple):
    """Each source sentence's nearest sentences: `cosines` `(k, n)` float32, highest first,
    and their `positions` `(k, n)` in the collection."""

    cosines: torch.Tensor
    positions: torch.Tensor


def nearest_sentences(
    source: torch.Tensor,
    sentences: torch.Tensor,
    n: int,
    *,
    allowed: torch.Tensor | None = None,
    block_sentences: int = BLOCK_SENTENCES,
) -> Nearest:
    """`(k, min(n, S))` the cosines and positions in `sentences` `(S, d)` of each source
    sentence's `n` nearest (highest cosine first; ties to the lower position), from source
    rows `(k, d)`; only among the `allowed` rows `(S,)` bool where given (others only where
    fewer than `n` are allowed, after them)."""
    k, total = source.shape[0], sentences.shape[0]
    n = min(n, total)
    best_values = torch.empty(k, 0, dtype=torch.float32)  # (k, <=n) the running best
    best_positions = torch.empty(k, 0, dtype=torch.long)
    step = block_rows(block_sentences, k)
    for r0 in range(0, total, step):
        r1 = min(r0 + step, total)
        before_batch(r1 - r0)  # a long pass yields and meets its deadline between blocks
        sims = block_cosines(sentences[r0:r1], source).float().T.cpu()  # (k, r)
        if allowed is not None:
            sims[:, ~allowed[r0:r1]] = -torch.inf
        positions = torch.arange(r0, r1).expand(k, -1)  # (k, r)
        values = torch.cat([best_values, sims], dim=1)  # (k, <=n + r), positions ascending
        candidates = torch.cat([best_positions, positions], dim=1)
        # a stable descending sort keeps the lower position first among equal cosines
        order = torch.sort(values, dim=1, descending=True, stable=True).indices[:, :n]
        best_values = torch.gather(values, 1, order)
        best_positions = torch.gather(candidates, 1, order)
    return Nearest(best_values, best_positions)


def rarity_weights(cosines: torch.Tensor) -> torch.Tensor:
    """`(k,)` float64 weight of each source sentence from the cosines `(k, m)` of its nearest
    sentences: one minus their mean (at least 1e-6), scaled to mean 1 over the source."""
    finite = torch.where(torch.isfinite(cosines), cosines, 0.0).double()  # masked rows: 0
    rarity = (1 - finite.mean(dim=1)).clamp(min=1e-6)  # (k,)
    return rarity / rarity.mean()


def proportional_scores(
    nearest: torch.Tensor,
    sentence_lengths: torch.Tensor,
    *,
    k1: float,
    b: float,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """`(D,)` float64 rprs of each document from the positions of the source's nearest
    sentences `(k, n)` (`nearest_sentences`) and each document's sentences `(D,)`, in
    collection order; QP weighs each source sentence by `weights` `(k,)` (default: 1 each)."""
    lengths = sentence_lengths.to(torch.long)
    n_documents, k = len(lengths), nearest.shape[0]
    ends = torch.cumsum(lengths, 0)  # (D,)
    doc_of = torch.searchsorted(ends, nearest, right=True)  # (k, n) document of each
    # QP: the source sentences with a nearest sentence in each document, each counted once
    rows = torch.arange(k).unsqueeze(1).expand_as(doc_of)  # (k, n)
    pairs = torch.unique(rows.reshape(-1) * n_documents + doc_of.reshape(-1))  # (p,)
    weights = torch.ones(k, dtype=torch.float64) if weights is None else weights.double()
    qp = torch.bincount(
        pairs % n_documents, weights=weights[pairs // n_documents], minlength=n_documents
    ) / max(float(weights.sum()), 1e-12)
    # DP: each document's distinct found sentences, saturated and length-corrected
    found_sentences = torch.unique(nearest.reshape(-1))  # (f,)
    found = torch.bincount(
        torch.searchsorted(ends, found_sentences, right=True), minlength=n_documents
    ).double()  # (D,)
    relative = lengths.double() / lengths.double().mean()  # (D,) m_d / m
    dp = found * (k1 + 1) / (found + k1 * (1 - b + b * relative))
    return torch.where(found > 0, qp * dp, 0.0)  # 0 for the unfound (and the empty: 0 / 0)
