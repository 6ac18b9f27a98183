"""What a search asks, defined once for the service, the search layer and the clients:
`SimilarOptions` (how to rank, with its metadata `FilterIn`), and `SimilarRequest` (the JSON
body of `POST /similar`: the options and the query document, or the `like` and `unlike`
examples). The service validates bodies into these models, the search layer ranks by them
(`search.searcher.Searcher.similar`), and both clients check a call's options with them
before sending it. Each model's JSON schema (the OpenAPI description's) says what its
validators check, where JSON Schema can."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

from docsim.protocol.bodies import (
    DocumentIdText,
    DocumentIn,
    RequestModel,
    given,
    left_out,
    one_of,
)
from docsim.protocol.choices import WHOLE_DOCUMENT_ONLY, Granularity, Method, ScoringMode
from docsim.protocol.filters import Filter, parse_filter

FilterValue = StrictBool | StrictInt | StrictFloat | StrictStr
FilterBound = StrictInt | StrictFloat | StrictStr
_NODES = ("and", "or", "not")
_CONDITIONS = ("eq", "in", "exists")
_BOUNDS = ("gt", "gte", "lt", "lte")
_KEYS = ("field", *_CONDITIONS, *_BOUNDS, *_NODES)


def _only(*fields: str) -> dict[str, Any]:
    """A filter node with `fields` and nothing else (but nulls)."""
    return {"allOf": [given(*fields), left_out(*(k for k in _KEYS if k not in fields))]}


# `parse_filter`'s rules of form: an and / or / not node, or a condition on one field
FILTER_FORMS: list[Any] = [
    *(_only(node) for node in _NODES),
    *(_only("field", condition) for condition in _CONDITIONS),
    {
        "allOf": [
            given("field"),
            {"anyOf": [given(bound) for bound in _BOUNDS]},
            left_out(*_CONDITIONS, *_NODES),
            {"anyOf": [left_out("gt"), left_out("gte")]},
            {"anyOf": [left_out("lt"), left_out("lte")]},
        ]
    },
]


class FilterIn(RequestModel):
    """A filter over document metadata: a condition on one `field` (`eq` a value, `in` a list,
    range bounds `gt` / `gte` / `lt` / `lte` on a number or date field, or `exists`), or
    `and` / `or` over a list of filters, or `not` one. Nested metadata objects are named by
    dotted paths (`header.court`); a field holding a list matches when any of its values
    does. Dates are ISO 8601 strings (`1990-01-31`)."""

    model_config = ConfigDict(json_schema_extra={"oneOf": FILTER_FORMS})

    field: str | None = Field(default=None, min_length=1, max_length=512)
    eq: FilterValue | None = None
    in_: list[FilterValue] | None = Field(
        default=None, alias="in", json_schema_extra={"minItems": 1}
    )
    gt: FilterBound | None = None
    gte: FilterBound | None = None
    lt: FilterBound | None = None
    lte: FilterBound | None = None
    exists: StrictBool | None = None
    and_: list[FilterIn] | None = Field(
        default=None, alias="and", json_schema_extra={"minItems": 1}
    )
    or_: list[FilterIn] | None = Field(default=None, alias="or", json_schema_extra={"minItems": 1})
    not_: FilterIn | None = Field(default=None, alias="not")

    def data(self) -> dict[str, Any]:
        """The JSON form `parse_filter` reads."""
        return self.model_dump(by_alias=True, exclude_none=True)

    def tree(self) -> Filter:
        """The tree this filter parses into.

        Raises:
            FilterSyntaxError: it is not a filter (a model validated as a request's `filter`
                has been parsed once already, and is one).
        """
        return parse_filter(self.data())


UNITS = [g.value for g in Granularity if g is not Granularity.document]
ANY_GRANULARITY = sorted({m.value for m in Method} - {m.value for m in WHOLE_DOCUMENT_ONLY})
# What the search refuses of these options together, as JSON Schema says it (without `not`
# or `if`, which schemathesis cannot judge beside an uploaded file): no offset into grouped
# units, groups of units only, methods that rank whole documents and shared passages on
# documents only
OPTION_RULES: list[Any] = [
    {"anyOf": [left_out("group_by"), {"properties": {"offset": {"maximum": 0}}}]},
    {
        "anyOf": [
            left_out("group_by"),
            {"required": ["granularity"], "properties": {"granularity": {"enum": UNITS}}},
        ]
    },
    {
        "anyOf": [
            {"properties": {"granularity": {"const": Granularity.document.value}}},
            {"properties": {"method": {"enum": [*ANY_GRANULARITY, None]}}},
        ]
    },
    {
        "anyOf": [
            {"properties": {"granularity": {"const": Granularity.document.value}}},
            {"properties": {"shared_passages": {"maximum": 0}}},
        ]
    },
]


class SimilarOptions(RequestModel):
    """How to rank, whatever the query document came as."""

    model_config = ConfigDict(json_schema_extra={"allOf": OPTION_RULES})

    top_k: int = Field(
        default=10, ge=1, description="Results to return (at most DOCSIM_API__MAX_TOP_K)."
    )
    granularity: Granularity = Granularity.document
    method: Method | None = Field(
        default=None,
        description="How to rank; default: the service's (DOCSIM_SEARCH__DEFAULT_METHOD).",
    )
    normalize: bool = True
    mode: ScoringMode = ScoringMode.auto
    candidates: list[DocumentIdText] | None = Field(
        default=None,
        description="Rank only these indexed documents (a pool; at most "
        "DOCSIM_API__MAX_CANDIDATES ids).",
    )
    exclude: list[DocumentIdText] | None = Field(
        default=None,
        description="Leave these indexed documents out of the ranking and of its population "
        "(ids this version does not hold are ignored; at most DOCSIM_API__MAX_CANDIDATES).",
    )
    filter: FilterIn | None = Field(
        default=None,
        description="Rank only the documents whose metadata it matches; applied before "
        "scoring. In an upload's form, the filter's JSON text.",
    )
    group_by: Literal["document"] | None = Field(
        default=None,
        description="Units only: `top_k` counts documents, each with its best `group_size` "
        "units, so that one long document cannot fill the list.",
    )
    group_size: int = Field(default=1, ge=1, le=100, description="Units per group.")
    matches_per_result: int = Field(
        default=3,
        ge=0,
        le=10,
        description="Whole documents ranked by `sdr`, `sdr-window`, `hybrid` or `fused`: the "
        "paragraph pairs that matched best, given with each result (0: none).",
    )
    shared_passages: int = Field(
        default=0,
        ge=0,
        le=10,
        description="Whole documents only: give each result its longest passages shared with "
        "the query word for word (a quotation), at most this many; at least "
        "DOCSIM_SEARCH__VERBATIM__PASSAGE_WORDS words each.",
    )
    offset: int = Field(
        default=0,
        ge=0,
        description="Results to skip (at most DOCSIM_API__MAX_OFFSET): the page after one "
        "of `top_k` results starts at the "
        "answer's `next_offset`. Pages agree while `index_version` and `index_revision` stay "
        "the same (ties are broken by a fixed order).",
    )

    @model_validator(mode="after")
    def _pages_of_units_or_documents(self) -> SimilarOptions:
        if self.offset and self.group_by is not None:
            raise ValueError("grouped units come in one page: raise top_k instead of an offset")
        if self.shared_passages and self.granularity is not Granularity.document:
            raise ValueError("shared_passages are for whole documents (granularity 'document')")
        return self

    @field_validator("filter", mode="after")
    @classmethod
    def _well_formed(cls, value: FilterIn | None) -> FilterIn | None:
        """The whole filter parsed once (a FilterSyntaxError is a ValueError: a 422 naming
        it)."""
        if value is not None:
            parse_filter(value.data())
        return value

    def filter_tree(self) -> Filter | None:
        """`filter` as the tree it parses into (validation parsed it once already)."""
        return self.filter.tree() if self.filter is not None else None

    def depth(self) -> int:
        """How many results the ranking must hold for this page: `offset + top_k`."""
        return self.offset + self.top_k


class Example(RequestModel):
    """A document given as an example: posted (`document`) or indexed (`document_id`)."""

    model_config = ConfigDict(json_schema_extra=one_of("document", "document_id"))

    document: DocumentIn | None = None
    document_id: DocumentIdText | None = None

    @model_validator(mode="after")
    def _one_source(self) -> Example:
        if (self.document is None) == (self.document_id is None):
            raise ValueError("an example is one of 'document' or 'document_id'")
        return self


class SimilarRequest(SimilarOptions):
    """The JSON body: the query document posted as text or sections, or an indexed one; or
    several documents to rank like (`like`), and optionally some to rank unlike (whole
    documents only)."""

    model_config = ConfigDict(
        json_schema_extra={
            "allOf": [
                *OPTION_RULES,
                one_of("document", "document_id", "like"),
                {
                    "anyOf": [
                        left_out("unlike"),
                        {"properties": {"granularity": {"const": Granularity.document.value}}},
                    ]
                },
            ]
        }
    )

    document: DocumentIn | None = None
    document_id: DocumentIdText | None = Field(
        default=None, description="An indexed document to use as the query."
    )
    like: list[Example] | None = Field(
        default=None,
        min_length=1,
        description="Several documents to rank like (at most DOCSIM_API__MAX_EXAMPLES), "
        "instead of `document` / `document_id`: "
        "a document scores the mean of its scores against each (the method's own scores).",
    )
    unlike: list[Example] | None = Field(
        default=None,
        min_length=1,
        description="Documents to rank unlike (at most DOCSIM_API__MAX_EXAMPLES): the mean "
        "of a document's scores against them "
        "is subtracted from its score. Whole documents only.",
    )

    @model_validator(mode="after")
    def _one_source(self) -> SimilarRequest:
        given = [self.document is not None, self.document_id is not None, self.like is not None]
        if sum(given) != 1:
            raise ValueError("give exactly one of 'document', 'document_id' or 'like'")
        return self

    def likes(self) -> list[Example]:
        """The documents to rank like: `like`, or the one `document` / `document_id`."""
        if self.like is not None:
            return self.like
        # built as validated already: the body held exactly one of the two
        return [Example.model_construct(document=self.document, document_id=self.document_id)]
