"""The one table of the methods that give each document a score of its own: each method's row
names its scorer class, and the class a sharded service runs instead where there is one. A
method is added with its class and one row here (`docs/adding-a-method.md`); nothing is filed
by importing a module. The methods built on SDR's paragraph matrix (`sdr`, `sdr-window`,
`hybrid`, `fused`) rank in `search.sdr_ranker` instead (`SDR_RANKED`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from docsim.protocol.choices import Method
from docsim.search.evidence import ProportionalEvidence
from docsim.search.scorers import (
    Bm25,
    DocumentCosine,
    ParagraphBm25,
    Scorer,
    ScorerClass,
    ScoringContext,
    ShingleBm25,
)
from docsim.search.sentence_sets import SentenceSets, ShardedSentenceSets


@dataclass(frozen=True)
class ScorerRow:
    """A method's scorer class, and the one a sharded service runs instead (None: the same)."""

    local: ScorerClass
    sharded: ScorerClass | None = None


SCORERS: Mapping[Method, ScorerRow] = {
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
    """One scorer of each method of `table` over `context`: the sharded class where the
    service is sharded and the row names one."""
    out = {}
    for method, row in table.items():
        cls = row.sharded if context.shards is not None and row.sharded is not None else row.local
        out[method] = cls(context, method)
    return out
