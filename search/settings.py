"""How `/similar` and `docsim evaluate` rank: the default method and every method's knobs,
defined once (`DOCSIM_SEARCH__*`). The searcher receives this group itself; `QuerySettings`
is the indexer's settings object with the group added, what opening a searcher reads."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from docsim.indexer.settings import Settings
from docsim.protocol.choices import Method
from docsim.search.fusion import parse_weights
from docsim.search.types import FUSIONS


class CandidateSettings(BaseModel):
    """Candidate mode's knobs: how its first pass finds the documents it scores
    (`search.candidates`). `SearchSettings` holds them with the rest."""

    model_config = ConfigDict(frozen=True)

    candidate_generator: Literal["auto", "centroids", "compressed", "neighbours"] = Field(
        default="auto",
        description="How candidate mode finds the documents it scores: `centroids`, by "
        "centroid interaction over cells of the sentence level, then residual codes "
        "(PLAID-style, fitted on the version's first candidate query); `compressed`, by the "
        "compressed sentence level's approximate `maxsim` over every document (where that "
        "level is served); `neighbours`, by the nearest sentences, paragraphs and documents "
        "of the query's in the levels' indices; `auto`: `compressed` up to "
        "`candidate_scan_max_sentences` sentences where it is served, else `centroids`.",
    )
    candidate_scan_max_sentences: int = Field(
        default=4_000_000,
        ge=0,
        le=1_000_000_000,
        description="`auto`: the largest collection whose candidates come from the compressed "
        "level's pass over every document. Its cost grows with the collection faster than "
        "the cells'; on 2 cores it is still the cheaper and the more faithful at 3.4 million "
        "sentences (ten times AILA, `benchmarks/growth.py`), the largest measured.",
    )
    candidate_probe: int = Field(
        default=32,
        ge=1,
        le=65_536,
        description="`centroids`: the cells each query sentence probes.",
    )
    candidate_probe_cells: int = Field(
        default=1024,
        ge=1,
        le=1_048_576,
        description="`centroids`: the cells a query probes in all, its sentences times each "
        "one's probes: a long query's sentences probe fewer cells each (`candidate_probe` at "
        "most, one at least), so that the postings centroid interaction reads follow this "
        "budget, not the query's length (a judgment by id: about 120 sentences, 8 probes "
        "each). On 40 AILA judgments by id it kept the first pass's recall (0.9975) at 0.81 "
        "of its time (`benchmarks/candidate_recall.py`).",
    )
    candidate_refine: int = Field(
        default=2000,
        ge=1,
        le=100_000,
        description="`centroids`: the documents centroid interaction passes on to be ranked "
        "by their sentences' residual codes, which keep `candidate_max_documents` of them.",
    )
    candidate_refine_products: int = Field(
        default=20_000_000,
        ge=0,
        le=2_000_000_000,
        description="`centroids`: the second stage's budget, the query's sentences times the "
        "refined documents' (at the collection's mean length): a longer query refines fewer "
        "documents, none beyond `candidate_max_documents` for a long one.",
    )
    candidate_refine_probe: int = Field(
        default=256,
        ge=1,
        le=65_536,
        description="`centroids`: the residual codes decoded are those of the sentences in "
        "the cells each query sentence probes this deep; any other sentence counts as the "
        "query sentence's product with its cell this deep.",
    )
    candidate_sentence_k: int = Field(
        default=20, ge=1, le=10_000, description="`neighbours`: neighbours of each query sentence."
    )
    candidate_paragraph_k: int = Field(
        default=200,
        ge=1,
        le=10_000,
        description="`neighbours`: neighbours of each query paragraph.",
    )
    candidate_document_k: int = Field(
        default=200, ge=1, le=10_000, description="`neighbours`: neighbours of the query document."
    )
    candidate_max_documents: int = Field(
        default=500, ge=1, le=100_000, description="Candidate mode: documents scored at most."
    )


class VerbatimSettings(BaseModel):
    """What two documents share word for word (`DOCSIM_SEARCH__VERBATIM__*`)."""

    model_config = ConfigDict(frozen=True)

    shingle_words: int = Field(
        default=2,
        ge=1,
        le=8,
        description="`bm25-shingles`: the words of a shingle (runs of consecutive words, "
        "after stop words, tokenised as BM25 tokenises).",
    )
    fusion_outliers_only: bool = Field(
        default=True,
        description="`fused`: `bm25-shingles` counts only the documents whose score is more "
        "than `fusion_outlier_z` standard deviations above the query's mean (those that quote "
        "it), scaled to [0, 1]; a query or collection without verbatim reuse keeps the other "
        "methods' ranking. False: normalised as the other methods.",
    )
    fusion_outlier_z: float = Field(
        default=4.0, ge=0, le=100, description="`fused`: the outliers' threshold, in z-scores."
    )
    passage_words: int = Field(
        default=8,
        ge=3,
        le=100,
        description="The fewest words of a passage two documents share word for word "
        "(`shared_passages` of /similar's results and of /explain).",
    )

    @property
    def fusion_gates(self) -> dict[Method, float]:
        """The methods `fused` counts by their outliers only, with their thresholds."""
        return {Method.bm25_shingles: self.fusion_outlier_z} if self.fusion_outliers_only else {}


class SearchSettings(CandidateSettings):
    """How `/similar` and `docsim evaluate` rank by default, and the knobs of each method
    (`search.scorers` describes the methods)."""

    model_config = ConfigDict(frozen=True)

    default_method: Method = Field(
        default=Method.fused, description="The method of a request naming none."
    )
    fusion: str = Field(
        default="bm25-rm3:1,document:1,maxsim:1,bm25-shingles:2",
        description="`fused`: the methods summed and their weights, `method:weight,...`.",
    )
    fusion_normaliser: Literal["zscore", "minmax"] = Field(
        default="minmax",
        description="`fused`: how each method's scores are put on one scale per query before "
        "they are weighed: min-max to [0, 1], or z-scores.",
    )
    query_window: int = Field(
        default=3, ge=1, le=1000, description="`sdr-window`: sentences per window."
    )
    bm25_stemmer: str | None = Field(
        default="english",
        description="A Snowball language to stem BM25 tokens; `none`: no stemming.",
    )
    bm25_query_terms: int = Field(
        default=128,
        ge=1,
        le=100_000,
        description="The lexical methods score a query of more distinct terms than this with "
        "only this many, those of the highest count times idf (Lucene's MoreLikeThis keeps "
        "25), so that a long document as a query reads a bounded number of postings (AILA's "
        "judgments hold 600 distinct terms at the median: 0.09 of the postings read, "
        "`benchmarks/bm25_query_terms.py`). Cutting AILA's development queries (85 to 270 "
        "terms) to 128 lost nothing (`docs/serving.md`).",
    )
    bm25_reduced_keep: float = Field(
        default=0.5, gt=0, le=1, description="`bm25-reduced`: share of query terms kept."
    )
    verbatim: VerbatimSettings = Field(
        default_factory=lambda: VerbatimSettings(),
        description="Verbatim reuse: `bm25-shingles` and the passages shared word for word.",
    )
    bm25_paragraph_top: int = Field(
        default=1,
        ge=1,
        le=1000,
        description="`bm25-paragraph`: mean of a document's best k paragraphs.",
    )
    rprs_sentences: int = Field(
        default=10,
        ge=1,
        le=1000,
        description="`rprs`: the nearest sentences of the collection each query sentence finds.",
    )
    rprs_k1: float = Field(
        default=1.2, ge=0, le=10, description="`rprs`: saturation of a document's found sentences."
    )
    rprs_b: float = Field(
        default=0.75, ge=0, le=1, description="`rprs`: length correction of the found sentences."
    )
    query_weighting: Literal["uniform", "rarity"] = Field(
        default="uniform",
        description="`sdr`, `maxsim` and `rprs`: how much each query sentence counts; `rarity`: "
        "one minus the mean cosine of its `rprs_sentences` nearest sentences in the collection "
        "(`rprs`: among the documents it ranks), as IDF weights a rare term. Costs `sdr` and "
        "`maxsim` one search of the sentence level per query.",
    )
    rm3_documents: int = Field(
        default=10, ge=1, le=1000, description="`bm25-rm3`: feedback documents."
    )
    rm3_terms: int = Field(default=20, ge=1, le=1000, description="`bm25-rm3`: expansion terms.")
    rm3_query_weight: float = Field(
        default=0.5, ge=0, le=1, description="`bm25-rm3`: the original query's share of weight."
    )
    prf_documents: int = Field(
        default=10, ge=1, le=1000, description="`document-prf`: feedback documents."
    )
    prf_query_weight: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="`document-prf`: the query vector's share against the feedback documents' "
        "mean.",
    )
    ot_reg: float = Field(default=0.05, gt=0, le=10, description="`ot`: entropic regularisation.")
    ot_iterations: int = Field(default=50, ge=1, le=5000, description="`ot`: Sinkhorn iterations.")
    exhaustive_max_sentences: int = Field(
        default=4_000_000,
        ge=0,
        le=1_000_000_000,
        description="`auto` mode retrieves candidates in a collection of more indexed "
        "sentences than this (and SDR normalises over a fixed sample of it), whatever the "
        "query. At ten times AILA (3.4 million sentences) the compressed level's pass over "
        "every document is still faster than the cells and more faithful "
        "(`benchmarks/growth.py`).",
    )
    exhaustive_max_products: int = Field(
        default=40_000_000,
        ge=0,
        le=10_000_000_000,
        description="`auto` mode, for the methods that compute SDR exactly (`sdr`, "
        "`sdr-window`, `hybrid`, a fusion weighing `sdr`): every document is scored while the "
        "query's sentences times the collection's (the products of the exact pass) are at most "
        "this many, and candidates are retrieved above it: a long query on a large collection.",
    )
    filter_population: Literal["collection", "filtered"] = Field(
        default="collection",
        description="What SDR's z-scores are computed over when a query has a `filter`: "
        "every other document of the collection (a document scores as it would unfiltered), "
        "or only the documents the filter keeps (cheaper: the rest are never scored).",
    )
    stats_sample_documents: int = Field(
        default=256,
        ge=1,
        le=100_000,
        description="Candidate mode: documents the z-score statistics use.",
    )
    seed: int = Field(
        default=0, ge=0, le=2**32 - 1, description="Seeds the tie-break order and the sample."
    )
    sentence_store: Literal["auto", "float32", "compressed"] = Field(
        default="auto",
        description="How the served sentence level is held: `float32` in memory; "
        "`compressed`, a bfloat16 projection in memory (`scan_dimensions`) for a first pass "
        "and the float16 file, memory-mapped, for exact scores; `auto`: compressed on a CPU "
        "service. On a sharded service the shard actors compress their own sentences "
        "(`compressed`, or `auto` with no GPU per shard) or score the float16 file exactly; "
        "the coordinator holds none.",
    )
    scan_dimensions: int = Field(
        default=64,
        ge=1,
        le=4096,
        description="`compressed`: dimensions kept in memory per sentence.",
    )
    scan_group: int = Field(
        default=0,
        ge=0,
        le=1024,
        description="`compressed`: each document padded to a multiple of this many rows; 0: "
        "the largest of 16, 8, 4, 2 and 1 that adds at most a tenth of the rows.",
    )
    scan_rescore: int = Field(
        default=100,
        ge=1,
        le=100_000,
        description="`compressed`: documents scored exactly after the approximate pass, at least.",
    )
    scan_rescore_share: float = Field(
        default=0.01,
        ge=0,
        le=1,
        description="`compressed`: the share of the ranked documents scored exactly after the "
        "approximate pass, where it exceeds `scan_rescore`. The documents whose approximate "
        "score is within its error of the tenth grow with the collection; a fixed depth "
        "misses more of the exact top 10 as it grows.",
    )

    def rescore_depth(self, ranked: int) -> int:
        """Documents scored exactly after the compressed level's approximate pass over
        `ranked` documents: `scan_rescore`, or `scan_rescore_share` of them where more."""
        return max(self.scan_rescore, math.ceil(self.scan_rescore_share * ranked))

    @field_validator("bm25_stemmer")
    @classmethod
    def _stemmer(cls, value: str | None) -> str | None:
        if value is None or value.strip().lower() in ("", "none"):
            return None
        import Stemmer

        if value not in Stemmer.algorithms():
            raise ValueError(
                f"no Snowball stemmer for {value!r}; choose one of "
                f"{', '.join(Stemmer.algorithms())} or none"
            )
        return value

    @field_validator("fusion")
    @classmethod
    def _fusion(cls, value: str) -> str:
        fusion_weights(value)  # raises ValueError naming what is wrong
        return value

    @property
    def fusion_weights(self) -> tuple[tuple[Method, float], ...]:
        """`fusion` parsed: each fused method and its weight."""
        return fusion_weights(self.fusion)

    def default_methods(self) -> set[Method]:
        """The methods a request naming none is scored with: the default, or what it fuses."""
        if self.default_method is Method.fused:
            return {method for method, _ in self.fusion_weights}
        if self.default_method is Method.hybrid:  # reciprocal-rank fusion of BM25 and SDR
            return {Method.bm25, Method.sdr}
        return {self.default_method}


def fusion_weights(text: str) -> tuple[tuple[Method, float], ...]:
    """`"bm25:1,maxsim:0.5"` as methods and weights.

    Raises:
        ValueError: a part is not `method:number`, a name is not a method, or a weighed
            method is itself a fusion.
    """
    weights = []
    for name, weight in parse_weights(text).items():
        try:
            method = Method(name.strip())
        except ValueError:
            valid = ", ".join(m.value for m in Method)
            raise ValueError(f"unknown method {name!r}; valid: {valid}") from None
        if method in FUSIONS:
            raise ValueError(f"fusion cannot weigh the fusion {method.value!r}")
        weights.append((method, weight))
    return tuple(weights)


class QuerySettings(Settings):
    """The indexer's settings and the search group: the one settings object as the search
    layer sees it (the app extends it with its own group)."""

    search: SearchSettings = SearchSettings()


@lru_cache
def get_query_settings() -> QuerySettings:
    return QuerySettings()
