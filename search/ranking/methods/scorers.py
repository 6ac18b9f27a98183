"""The methods that give each document a score of its own.

A `Scorer` (`search.ranking.scorer`) turns a query and the document positions it may score
into one score per document of the collection `(D,)`. `search.ranking.table.SCORERS`, one
explicit table, names each method's class (and its sharded class, which a sharded service uses
instead, as FAISS's `IndexShards` is an `Index`: callers never know where a method ran).
`Searcher.similar` ranks by a row, `fused` sums rows, and `docsim evaluate` runs through
`Searcher.similar`, so a scorer in the table works everywhere (`docs/adding-a-method.md`).

- `document`: cosine of the document vectors; `document-prf`: the same after dense
  pseudo-relevance feedback (Rocchio): the query vector moved toward the mean of its top
  `prf.documents` documents' vectors.
- `maxsim`, `best-sentence`, `ot`: sentence-set matching without paragraphs
  (`sentence_sets`); `rprs`: proportional sentence evidence (`evidence`).
- `bm25`: Okapi BM25 over the document texts (`search.lexical.bm25`); `bm25-reduced`: the
  query cut to its highest-IDF terms; `bm25-rm3`: with RM3 pseudo-relevance feedback;
  `bm25-paragraph`: the mean of a document's best paragraphs' BM25; `bm25-shingles`: BM25
  over runs of `shingle_words` consecutive words (`search.lexical.shingles`), which finds
  the passages one document quotes from another.

The methods built on SDR's paragraph matrix (`sdr`, `sdr-window`, `hybrid`, `fused`) are
rankings of their own (`search.ranking.methods.sdr_rankings`).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import torch
import torch.nn.functional as F

from docsim.protocol.choices import Method
from docsim.search.arrays import Positions, Scores
from docsim.search.lexical.bm25 import Bm25Index
from docsim.search.lexical.query_terms import reduced_query, rm3_expansion, strongest_terms
from docsim.search.ranking.scorer import QueryScratch, Scorer
from docsim.search.types import Query


class DocumentCosine(Scorer):
    """Cosine of the document vectors; for `document-prf`, of the query's vector after
    Rocchio feedback from its top `prf.documents` among `docs`, as RM3 does for BM25:
    `w q + (1 - w) mean(top)`, renormalised, with `w` = `prf.query_weight`."""

    def scores(self, query: Query, docs: Positions, scratch: QueryScratch) -> Scores:
        document = self.context.level_vectors(query, "document")[0]  # (d,)
        vectors = self.context.index.vectors["document"]  # (D, d)
        if not isinstance(vectors, torch.Tensor):  # one row a document: never mapped
            raise ValueError("the document level's vectors are mapped, not in memory")
        first = (vectors @ document).numpy().astype(np.float64)  # (D,)
        settings = self.context.settings
        if self.method is Method.document:
            return first
        top = self.context.top(first, docs, settings.prf.documents)
        if len(top) == 0:
            return first
        feedback = vectors[torch.from_numpy(top)].mean(dim=0)  # (d,)
        weight = settings.prf.query_weight
        moved = F.normalize(weight * document + (1 - weight) * feedback, dim=0)  # (d,)
        return (vectors @ moved).numpy().astype(np.float64)


class Bm25(Scorer):
    """BM25 of the query's text, of its highest-IDF terms, or with RM3 feedback from its top
    `rm3.documents` among `docs`. Each document's score is computed, whatever `docs`: the
    scores are computed once a query (`scratch`), RM3's feedback taken from the `docs` of the
    first call (a fusion's first call gives every allowed document, to widen its pool)."""

    widens_pool = True

    def scores(self, query: Query, docs: Positions, scratch: QueryScratch) -> Scores:
        found = scratch.lexical.get(self.method)
        if found is None:
            found = scratch.lexical[self.method] = self._scores(query, docs)
        return found

    def _scores(self, query: Query, docs: Positions) -> Scores:
        bm25, settings = self.context.postings.documents(), self.context.settings
        tokens, idf = kept_terms(bm25, query.bm25_text, settings.bm25.query_terms)
        if self.method is Method.bm25_reduced:
            return bm25.weighted_scores(reduced_query(tokens, idf, settings.bm25.reduced_keep))
        first = kept_scores(bm25, tokens, idf)
        if self.method is Method.bm25:
            return first
        top = self.context.top(first, docs, settings.rm3.documents)
        doc_ids = self.context.index.doc_ids
        feedback = [bm25.term_counts(int(doc_ids[d])) for d in top]
        expansion = rm3_expansion(
            tokens,
            feedback,
            first[top].tolist(),
            terms=settings.rm3.terms,
            query_weight=settings.rm3.query_weight,
        )
        # `rm3_weights`' scores, reading again only the expansion's postings
        expanded: Scores = settings.rm3.query_weight * first + bm25.weighted_scores(expansion)
        return expanded


class ParagraphBm25(Scorer):
    """The mean of each document's `bm25.paragraph_top` best paragraphs' BM25."""

    widens_pool = True

    def scores(self, query: Query, docs: Positions, scratch: QueryScratch) -> Scores:
        found = scratch.lexical.get(self.method)
        if found is None:
            paragraphs, doc_of = self.context.postings.paragraphs()
            most = self.context.settings.bm25.query_terms
            found = scratch.lexical[self.method] = top_mean_per_group(
                kept_scores(paragraphs, *kept_terms(paragraphs, query.bm25_text, most)),
                doc_of,
                self.context.index.n_documents,
                self.context.settings.bm25.paragraph_top,
            )
        return found


class ShingleBm25(Scorer):
    """BM25 of the query's shingles over the documents' (every shingle of the query: most
    occur in few documents, and those carry the match)."""

    widens_pool = True

    def scores(self, query: Query, docs: Positions, scratch: QueryScratch) -> Scores:
        found = scratch.lexical.get(self.method)
        if found is None:
            shingles = self.context.postings.shingles()
            found = scratch.lexical[self.method] = shingles.scores(query.bm25_text)
        return found


def kept_terms(bm25: Bm25Index, text: str, most: int) -> tuple[list[str], dict[str, float]]:
    """The tokens of `text`, cut to the occurrences of its `most` strongest distinct terms
    (`strongest_terms`), and the idf of each of its distinct tokens in `bm25`."""
    tokens = bm25.tokens(text)
    idf = {t: bm25.idf(t) for t in set(tokens)}
    return strongest_terms(tokens, idf, most), idf


def kept_scores(bm25: Bm25Index, kept: list[str], idf: dict[str, float]) -> Scores:
    """`(N,)` BM25 of the query `kept` (`kept_terms`): bm25s' arithmetic (each occurrence
    summed in float32) for a query kept whole, one pass a distinct term for a cut one, whose
    repeated terms would each read their postings again."""
    if len(set(kept)) < len(idf):
        return bm25.weighted_scores(Counter(kept))
    return bm25.token_scores(kept)


def top_mean_per_group(scores: Scores, group: Positions, n_groups: int, k: int) -> Scores:
    """`(n_groups,)` the mean of each group's `k` best `scores` `(n,)` (fewer when the group
    has fewer; 0 for an empty group); `group` `(n,)` gives each score's group."""
    order = np.lexsort((-scores, group))  # by group, best first
    ranked_group = group[order]
    starts = np.searchsorted(ranked_group, np.arange(n_groups))  # (G,)
    place = np.arange(len(order)) - starts[ranked_group]  # rank within its group
    keep = place < k
    sums = np.bincount(ranked_group[keep], scores[order][keep], minlength=n_groups)
    counts = np.bincount(ranked_group[keep], minlength=n_groups)
    return np.divide(sums, counts, out=np.zeros(n_groups), where=counts > 0)
