"""The one table of the ranking methods: each method's row names its class, and the class a
sharded service runs instead where there is one. A `Scorer` gives every document a score of
its own; an `SdrRanking` (`sdr`, `sdr-window` and the fusions) ranks a pool of its own and
calls the other rows. A method is added with its class and one row here
(`docs/adding-a-method.md`); nothing is filed by importing a module."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from docsim.protocol.choices import Method
from docsim.search.ranking.methods.evidence import ProportionalEvidence
from docsim.search.ranking.methods.scorers import Bm25, DocumentCosine, ParagraphBm25, ShingleBm25
from docsim.search.ranking.methods.sdr_rankings import Fused, Hybrid, SdrRanking
from docsim.search.ranking.methods.sentence_sets import SentenceSets, ShardedSentenceSets
from docsim.search.ranking.scorer import Scorer, ScorerClass, ScoringContext


@dataclass(frozen=True)
class ScorerRow:
    """A method's class, and the one a sharded service runs instead (None: the same)."""

    local: ScorerClass
    sharded: ScorerClass | None = None


SCORERS: Mapping[Method, ScorerRow] = {
    Method.sdr: ScorerRow(SdrRanking),
    Method.sdr_window: ScorerRow(SdrRanking),
    Method.hybrid: ScorerRow(Hybrid),
    Method.fused: ScorerRow(Fused),
    Method.document: ScorerRow(DocumentCosine),
    Method.document_prf: ScorerRow(DocumentCosine),
    Method.bm25: ScorerRow(Bm25),
    Method.bm25_reduced: ScorerRow(Bm25),
    Method.bm25_rm3: ScorerRow(Bm25),
    Method.bm25_paragraph: ScorerRow(ParagraphBm25),
    Method.bm25_shingles: ScorerRow(ShingleBm25),
    Method.rprs: ScorerRow(ProportionalEvidence),
    Method.maxsim: ScorerRow(SentenceSets, sharded=ShardedSentenceSets),
    Method.best_sentence: ScorerRow(SentenceSets, sharded=ShardedSentenceSets),
    Method.ot: ScorerRow(SentenceSets, sharded=ShardedSentenceSets),
}


def scorers_for(
    context: ScoringContext, table: Mapping[Method, ScorerRow] = SCORERS
) -> dict[Method, Scorer]:
    """One object of each row of `table` over `context`: the sharded class where the service
    is sharded and the row names one. An `SdrRanking` reads the other rows from the mapping
    returned, so a row changed in it later is the one the fusions call."""
    out: dict[Method, Scorer] = {}
    for method, row in table.items():
        cls = row.sharded if context.shards is not None and row.sharded is not None else row.local
        if issubclass(cls, SdrRanking):
            out[method] = cls(context, method, out)
        else:
            out[method] = cls(context, method)
    return out
