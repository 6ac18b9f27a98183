"""The choices a request names, as the service and the client both spell them: ranking
methods, result granularities, SDR's scoring modes and statistics populations. The search
layer keys its method table on `Method` (`search.ranking.table`)."""

from __future__ import annotations

from enum import Enum


class Method(str, Enum):
    """How documents are ranked (`search.searcher` describes each)."""

    sdr = "sdr"
    sdr_window = "sdr-window"
    document = "document"
    document_prf = "document-prf"
    maxsim = "maxsim"
    best_sentence = "best-sentence"
    ot = "ot"
    bm25 = "bm25"
    bm25_reduced = "bm25-reduced"
    bm25_rm3 = "bm25-rm3"
    bm25_paragraph = "bm25-paragraph"
    bm25_shingles = "bm25-shingles"
    rprs = "rprs"
    hybrid = "hybrid"
    fused = "fused"


FUSIONS = frozenset({Method.hybrid, Method.fused})  # methods that combine others
# what ranks only whole documents: all but the unit vectors' cosine (`sdr`, `document`)
WHOLE_DOCUMENT_ONLY = frozenset(Method) - {Method.sdr, Method.document}


class Granularity(str, Enum):
    document = "document"
    section = "section"
    paragraph = "paragraph"
    sentence = "sentence"


class ScoringMode(str, Enum):
    """Which documents SDR scores: every allowed one (`exhaustive`), the candidates retrieved
    through the FAISS indices (`candidate`), or one of the two by collection size (`auto`)."""

    auto = "auto"
    exhaustive = "exhaustive"
    candidate = "candidate"


class Population(str, Enum):
    """The documents SDR's z-score statistics come from: every other document of the
    collection, the posted candidates (`pool`), or candidate mode's fixed random `sample`."""

    collection = "collection"
    pool = "pool"
    sample = "sample"
