"""How `/similar` and `docsim evaluate` rank: the default method and every method's knobs,
defined once (`DOCSIM_SEARCH__*`). The searcher receives this group itself; `QuerySettings`
is the indexer's settings object with the group added, what opening a searcher reads."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from docsim.indexer.settings import Settings, merged
from docsim.protocol.choices import FUSIONS, Method
from docsim.search.scorer_settings import (
    Bm25Settings,
    CandidateSettings,
    ExhaustiveSettings,
    OtSettings,
    PrfSettings,
    Rm3Settings,
    RprsSettings,
    ScanSettings,
    VerbatimSettings,
    regrouped,
)


class SearchSettings(BaseModel):
    """How `/similar` and `docsim evaluate` rank by default, and the knobs of each method
    (`search.ranking.methods.scorers` describes the methods)."""

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
    bm25: Bm25Settings = Field(default_factory=Bm25Settings, description="BM25.")
    rm3: Rm3Settings = Field(default_factory=Rm3Settings, description="`bm25-rm3`.")
    prf: PrfSettings = Field(default_factory=PrfSettings, description="`document-prf`.")
    rprs: RprsSettings = Field(default_factory=RprsSettings, description="`rprs`.")
    ot: OtSettings = Field(default_factory=OtSettings, description="`ot`.")
    verbatim: VerbatimSettings = Field(
        default_factory=VerbatimSettings,
        description="Verbatim reuse: `bm25-shingles` and the passages shared word for word.",
    )
    exhaustive: ExhaustiveSettings = Field(
        default_factory=ExhaustiveSettings,
        description="`auto` mode: up to where every document is scored.",
    )
    candidates: CandidateSettings = Field(
        default_factory=CandidateSettings,
        description="Candidate mode's first pass.",
    )
    scan: ScanSettings = Field(
        default_factory=ScanSettings,
        description="The compressed sentence level.",
    )
    query_weighting: Literal["uniform", "rarity"] = Field(
        default="uniform",
        description="`sdr`, `maxsim` and `rprs`: how much each query sentence counts; `rarity`: "
        "one minus the mean cosine of its `rprs.sentences` nearest sentences in the collection "
        "(`rprs`: among the documents it ranks), as IDF weights a rare term. Costs `sdr` and "
        "`maxsim` one search of the sentence level per query.",
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
        "`compressed`, a bfloat16 projection in memory (`scan.dimensions`) for a first pass "
        "and the float16 file, memory-mapped, for exact scores; `auto`: compressed on a CPU "
        "service. On a sharded service the shard actors compress their own sentences "
        "(`compressed`, or `auto` with no GPU per shard) or score the float16 file exactly; "
        "the coordinator holds none.",
    )

    @model_validator(mode="before")
    @classmethod
    def _flat_names(cls, values: Any) -> Any:
        """The settings' flat names of before issue 70 (`rm3_terms`), moved into their groups
        with a warning (`scorer_settings.regrouped`)."""
        return regrouped(values) if isinstance(values, dict) else values

    def replaced(self, **changes: Any) -> SearchSettings:
        """These settings with `changes` over them, validated: a group's change is a dict of
        some of its fields (`replaced(rm3={"terms": 5})`), merged over the group's own."""
        return SearchSettings.model_validate(merged(self.model_dump(), changes))

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


def parse_weights(text: str) -> dict[str, float]:
    """`"bm25:1,sdr:0.5"` -> `{"bm25": 1.0, "sdr": 0.5}`.

    Raises:
        ValueError: a part is not `name:number`, or a name repeats.
    """
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition(":")
        try:
            weight = float(value)
        except ValueError:
            weight = None
        if not sep or weight is None or not math.isfinite(weight):
            raise ValueError(f"fusion weight {part!r} is not 'method:number'")
        if name.strip() in out:
            raise ValueError(f"method {name.strip()!r} is weighted twice")
        out[name.strip()] = weight
    if not out:
        raise ValueError("fusion weights name no method")
    return out


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
