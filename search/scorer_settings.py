"""The search settings of each scorer and stage, one group each (`DOCSIM_SEARCH__<GROUP>__*`),
and the flat names they had before (`DOCSIM_SEARCH__RM3_TERMS`), still read for one release
with a warning (`regrouped`)."""

from __future__ import annotations

import logging
import math
import warnings
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from docsim.protocol.choices import Method

logger = logging.getLogger(__name__)


class CandidateSettings(BaseModel):
    """Candidate mode's first pass: how it finds the documents it scores (`search.candidates`;
    `DOCSIM_SEARCH__CANDIDATES__*`)."""

    model_config = ConfigDict(frozen=True)

    generator: Literal["auto", "centroids", "compressed", "neighbours"] = Field(
        default="auto",
        description="How candidate mode finds the documents it scores: `centroids`, by "
        "centroid interaction over cells of the sentence level, then residual codes "
        "(PLAID-style, fitted on the version's first candidate query); `compressed`, by the "
        "compressed sentence level's approximate `maxsim` over every document (where that "
        "level is served); `neighbours`, by the nearest sentences, paragraphs and documents "
        "of the query's in the levels' indices; `auto`: `compressed` up to "
        "`scan_max_sentences` sentences where it is served, else `centroids`.",
    )
    scan_max_sentences: int = Field(
        default=4_000_000,
        ge=0,
        le=1_000_000_000,
        description="`auto`: the largest collection whose candidates come from the compressed "
        "level's pass over every document. Its cost grows with the collection faster than "
        "the cells'; on 2 cores it is still the cheaper and the more faithful at 3.4 million "
        "sentences (ten times AILA, `benchmarks/growth.py`), the largest measured.",
    )
    probe: int = Field(
        default=32,
        ge=1,
        le=65_536,
        description="`centroids`: the cells each query sentence probes.",
    )
    probe_cells: int = Field(
        default=1024,
        ge=1,
        le=1_048_576,
        description="`centroids`: the cells a query probes in all, its sentences times each "
        "one's probes: a long query's sentences probe fewer cells each (`probe` at "
        "most, one at least), so that the postings centroid interaction reads follow this "
        "budget, not the query's length (a judgment by id: about 120 sentences, 8 probes "
        "each). On 40 AILA judgments by id it kept the first pass's recall (0.9975) at 0.81 "
        "of its time (`benchmarks/candidate_recall.py`).",
    )
    refine: int = Field(
        default=2000,
        ge=1,
        le=100_000,
        description="`centroids`: the documents centroid interaction passes on to be ranked "
        "by their sentences' residual codes, which keep `max_documents` of them.",
    )
    refine_products: int = Field(
        default=20_000_000,
        ge=0,
        le=2_000_000_000,
        description="`centroids`: the second stage's budget, the query's sentences times the "
        "refined documents' (at the collection's mean length): a longer query refines fewer "
        "documents, none beyond `max_documents` for a long one.",
    )
    refine_probe: int = Field(
        default=256,
        ge=1,
        le=65_536,
        description="`centroids`: the residual codes decoded are those of the sentences in "
        "the cells each query sentence probes this deep; any other sentence counts as the "
        "query sentence's product with its cell this deep.",
    )
    sentence_k: int = Field(
        default=20, ge=1, le=10_000, description="`neighbours`: neighbours of each query sentence."
    )
    paragraph_k: int = Field(
        default=200,
        ge=1,
        le=10_000,
        description="`neighbours`: neighbours of each query paragraph.",
    )
    document_k: int = Field(
        default=200, ge=1, le=10_000, description="`neighbours`: neighbours of the query document."
    )
    max_documents: int = Field(
        default=500, ge=1, le=100_000, description="Candidate mode: documents scored at most."
    )


class Bm25Settings(BaseModel):
    """The lexical methods' BM25: `bm25`, `bm25-reduced`, `bm25-rm3`, `bm25-paragraph` and
    `bm25-shingles` (`DOCSIM_SEARCH__BM25__*`)."""

    model_config = ConfigDict(frozen=True)

    stemmer: str | None = Field(
        default="english",
        description="A Snowball language to stem BM25 tokens; `none`: no stemming.",
    )
    query_terms: int = Field(
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
    reduced_keep: float = Field(
        default=0.5, gt=0, le=1, description="`bm25-reduced`: share of query terms kept."
    )
    paragraph_top: int = Field(
        default=1,
        ge=1,
        le=1000,
        description="`bm25-paragraph`: mean of a document's best k paragraphs.",
    )

    @field_validator("stemmer")
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


class Rm3Settings(BaseModel):
    """`bm25-rm3`'s relevance feedback (`DOCSIM_SEARCH__RM3__*`)."""

    model_config = ConfigDict(frozen=True)

    documents: int = Field(default=10, ge=1, le=1000, description="`bm25-rm3`: feedback documents.")
    terms: int = Field(default=20, ge=1, le=1000, description="`bm25-rm3`: expansion terms.")
    query_weight: float = Field(
        default=0.5, ge=0, le=1, description="`bm25-rm3`: the original query's share of weight."
    )


class PrfSettings(BaseModel):
    """`document-prf`'s Rocchio feedback (`DOCSIM_SEARCH__PRF__*`)."""

    model_config = ConfigDict(frozen=True)

    documents: int = Field(
        default=10, ge=1, le=1000, description="`document-prf`: feedback documents."
    )
    query_weight: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="`document-prf`: the query vector's share against the feedback documents' "
        "mean.",
    )


class RprsSettings(BaseModel):
    """`rprs`: proportional sentence evidence (`DOCSIM_SEARCH__RPRS__*`)."""

    model_config = ConfigDict(frozen=True)

    sentences: int = Field(
        default=10,
        ge=1,
        le=1000,
        description="`rprs`: the nearest sentences of the collection each query sentence finds.",
    )
    k1: float = Field(
        default=1.2, ge=0, le=10, description="`rprs`: saturation of a document's found sentences."
    )
    b: float = Field(
        default=0.75, ge=0, le=1, description="`rprs`: length correction of the found sentences."
    )


class OtSettings(BaseModel):
    """`ot`: optimal transport between the two documents' sentences (`DOCSIM_SEARCH__OT__*`)."""

    model_config = ConfigDict(frozen=True)

    reg: float = Field(default=0.05, gt=0, le=10, description="`ot`: entropic regularisation.")
    iterations: int = Field(default=50, ge=1, le=5000, description="`ot`: Sinkhorn iterations.")


class ExhaustiveSettings(BaseModel):
    """`auto` mode: up to where every document is scored (`DOCSIM_SEARCH__EXHAUSTIVE__*`)."""

    model_config = ConfigDict(frozen=True)

    max_sentences: int = Field(
        default=4_000_000,
        ge=0,
        le=1_000_000_000,
        description="`auto` mode retrieves candidates in a collection of more indexed "
        "sentences than this (and SDR normalises over a fixed sample of it), whatever the "
        "query. At ten times AILA (3.4 million sentences) the compressed level's pass over "
        "every document is still faster than the cells and more faithful "
        "(`benchmarks/growth.py`).",
    )
    max_products: int = Field(
        default=40_000_000,
        ge=0,
        le=10_000_000_000,
        description="`auto` mode, for the methods that compute SDR exactly (`sdr`, "
        "`sdr-window`, `hybrid`, a fusion weighing `sdr`): every document is scored while the "
        "query's sentences times the collection's (the products of the exact pass) are at most "
        "this many, and candidates are retrieved above it: a long query on a large collection.",
    )


class ScanSettings(BaseModel):
    """The compressed sentence level (`sentence_store`) (`DOCSIM_SEARCH__SCAN__*`)."""

    model_config = ConfigDict(frozen=True)

    dimensions: int = Field(
        default=64,
        ge=1,
        le=4096,
        description="`compressed`: dimensions kept in memory per sentence.",
    )
    group: int = Field(
        default=0,
        ge=0,
        le=1024,
        description="`compressed`: each document padded to a multiple of this many rows; 0: "
        "the largest of 16, 8, 4, 2 and 1 that adds at most a tenth of the rows.",
    )
    rescore: int = Field(
        default=100,
        ge=1,
        le=100_000,
        description="`compressed`: documents scored exactly after the approximate pass, at least.",
    )
    rescore_share: float = Field(
        default=0.01,
        ge=0,
        le=1,
        description="`compressed`: the share of the ranked documents scored exactly after the "
        "approximate pass, where it exceeds `rescore`. The documents whose approximate "
        "score is within its error of the tenth grow with the collection; a fixed depth "
        "misses more of the exact top 10 as it grows.",
    )

    def depth(self, ranked: int) -> int:
        """Documents scored exactly after the compressed level's approximate pass over
        `ranked` documents: `rescore`, or `rescore_share` of them where more."""
        return max(self.rescore, math.ceil(self.rescore_share * ranked))


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


# The flat names of the grouped settings, before issue 70: `rm3_terms` is `rm3.terms`.
_GROUPS: dict[str, tuple[str, type[BaseModel]]] = {
    "candidates": ("candidate_", CandidateSettings),
    "bm25": ("bm25_", Bm25Settings),
    "rm3": ("rm3_", Rm3Settings),
    "prf": ("prf_", PrfSettings),
    "rprs": ("rprs_", RprsSettings),
    "ot": ("ot_", OtSettings),
    "exhaustive": ("exhaustive_", ExhaustiveSettings),
    "scan": ("scan_", ScanSettings),
}
FLAT_NAMES: dict[str, tuple[str, str]] = {
    f"{prefix}{name}": (group, name)
    for group, (prefix, model) in _GROUPS.items()
    for name in model.model_fields
}


def regrouped(values: dict[str, Any]) -> dict[str, Any]:
    """`values` (a search group's fields, as given) with each flat name of `FLAT_NAMES` moved
    into its group, with a warning that names the new one: a value given both ways keeps the
    flat one, the later spelling. Other keys are left as they are."""
    flat = [key for key in values if key in FLAT_NAMES]
    if not flat:
        return values
    moved = {key: value for key, value in values.items() if key not in FLAT_NAMES}
    for key in flat:
        group, name = FLAT_NAMES[key]
        current = moved.get(group) or {}
        if isinstance(current, BaseModel):
            current = current.model_dump()
        moved[group] = {**current, name: values[key]}
    renamed = ", ".join(f"{key} -> {FLAT_NAMES[key][0]}.{FLAT_NAMES[key][1]}" for key in flat)
    message = (
        f"search settings by their old flat names ({renamed}; in the environment "
        "DOCSIM_SEARCH__RM3__TERMS for DOCSIM_SEARCH__RM3_TERMS): read this release, refused "
        "in the next"
    )
    warnings.warn(message, DeprecationWarning, stacklevel=2)
    logger.warning(message)
    return moved
