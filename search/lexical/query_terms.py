"""Query variants for BM25: other terms and weights for the same postings
(`Bm25Index.weighted_scores`): the query cut to its highest-IDF terms (`reduced_query`, the best
AILA 2019 run's query reduction), pseudo-relevance feedback (`rm3_weights`, Lavrenko and
Croft's relevance model RM3 mixed with the query), and a long query cut to its strongest terms
(`strongest_terms`, as Lucene's MoreLikeThis selects a document's terms), which bounds the
postings a query reads."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence


def reduced_query(tokens: Sequence[str], idf: dict[str, float], keep: float) -> dict[str, float]:
    """The query cut to its highest-IDF terms: the `ceil(keep * V)` of its V distinct tokens
    with the highest `idf` (ties by first occurrence), each weighted by its count in the query,
    as BM25 scores a repeated token."""
    counts = Counter(tokens)
    distinct = sorted(counts, key=lambda t: -idf[t])  # stable: ties keep query order
    kept = distinct[: math.ceil(keep * len(distinct))]
    return {t: float(counts[t]) for t in kept}


def strongest_terms(tokens: Sequence[str], idf: Mapping[str, float], most: int) -> list[str]:
    """`tokens` with only the occurrences of its `most` distinct tokens of the highest count
    times `idf` (ties by first occurrence), in their order; `tokens` itself when it holds at
    most `most` distinct tokens."""
    counts = Counter(tokens)
    if len(counts) <= most:
        return list(tokens)
    ranked = sorted(counts, key=lambda t: -counts[t] * idf[t])  # stable: ties keep query order
    kept = set(ranked[:most])
    return [t for t in tokens if t in kept]


def rm3_weights(
    query: Sequence[str],
    feedback: Sequence[Mapping[str, int]],
    feedback_scores: Sequence[float],
    *,
    terms: int,
    query_weight: float,
) -> dict[str, float]:
    """RM3: the query's term distribution mixed with a relevance model of the feedback
    documents (each given by its token counts), as term weights that sum to the query's length
    (so that with `query_weight` = 1 they equal the plain query's counts).

        P(w | R)  = sum_d P(w | d) * s_d / sum_d s_d      over the feedback documents d,
                                                          s_d their first-pass scores
        P'(w | R) = P(w | R) on its `terms` most likely words (ties by the word), renormalised
        weight(w) = query_weight * P(w | q) + (1 - query_weight) * P'(w | R)

    That is `query_weight` times the query's counts plus `rm3_expansion`: BM25 being linear in
    the weights, a scorer holding the query's first-pass scores adds only the expansion's."""
    out = {t: query_weight * c for t, c in Counter(query).items()}
    expansion = rm3_expansion(
        query, feedback, feedback_scores, terms=terms, query_weight=query_weight
    )
    for token, weight in expansion.items():
        out[token] = out.get(token, 0.0) + weight
    return out


def rm3_expansion(
    query: Sequence[str],
    feedback: Sequence[Mapping[str, int]],
    feedback_scores: Sequence[float],
    *,
    terms: int,
    query_weight: float,
) -> dict[str, float]:
    """The relevance model's part of `rm3_weights`: `(1 - query_weight) * P'(w | R)` times
    the query's length, for each of the `terms` words of `P'(w | R)` (nothing for an empty
    query, or feedback without a positive score or a token)."""
    if not query:
        return {}
    total = sum(max(s, 0.0) for s in feedback_scores)
    relevance: defaultdict[str, float] = defaultdict(float)
    for counts, score in zip(feedback, feedback_scores, strict=True):
        length = sum(counts.values())
        if length and total > 0 and score > 0:
            share = score / total / length
            for token, count in counts.items():
                relevance[token] += count * share
    ranked = sorted(relevance.items(), key=lambda item: (-item[1], item[0]))  # ties by token
    top = dict(ranked[:terms])
    mass = sum(top.values())
    return {t: (1 - query_weight) * p / mass * len(query) for t, p in top.items()}
