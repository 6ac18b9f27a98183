"""Service settings: the search layer's settings (the indexer's and the search group) plus the
HTTP edge's own group (`DOCSIM_API__*`)."""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, Field, SecretStr

from docsim.search.api import QuerySettings


class ApiSettings(BaseModel):
    """The HTTP service: address, request limits, caches, keys and concurrency."""

    host: str = Field(default="127.0.0.1", description="Address `docsim serve` binds.")
    port: int = Field(default=8000, description="Port `docsim serve` binds.")
    max_body_bytes: int = Field(
        default=16 * 2**20,
        ge=1,
        json_schema_extra={"answer": 413},
        description="A JSON request body's bytes, refused (413) as soon as they pass it, before "
        "the body is read whole. An upload may have DOCSIM_FILES__MAX_BYTES plus 1 MiB of form "
        "fields.",
    )
    max_json_depth: int = Field(
        default=100,
        ge=8,
        json_schema_extra={"answer": 422},
        description="How deep arrays and objects may nest in a JSON body, and in the filter of "
        "an upload's form (422). A filter's own nesting is bounded lower: 32 levels of and / "
        "or / not.",
    )
    max_json_number_chars: int = Field(
        default=1_000,
        ge=32,
        le=4_300,
        json_schema_extra={"answer": 422},
        description="Characters of one number in a JSON body or an upload's filter (422); at "
        "most 4,300, the digits Python reads in an integer.",
    )
    max_document_bytes: int = Field(
        default=2_000_000,
        ge=1,
        json_schema_extra={"answer": 413},
        description="Characters of a posted document, its title and section titles included "
        "(413); the text of an uploaded file is held to it as the file is read.",
    )
    max_change_characters: int = Field(
        default=2_000_000,
        ge=1,
        json_schema_extra={"answer": 413},
        description="Characters of all the documents of one POST /documents together, counted "
        "before any is split (413): what one write may hold the collection's writer for.",
    )
    max_sentences: int = Field(
        default=20_000,
        ge=1,
        json_schema_extra={"answer": 413},
        description="Sentences of a posted document, once split (413).",
    )
    max_sentence_marks: int = Field(
        default=100_000,
        ge=1,
        json_schema_extra={"answer": 413},
        description="Sentence marks (`.`, `?` or `!` before a space) of a posted document, "
        "counted before it is split: what splitting costs grows with them (413).",
    )
    max_filter_clauses: int = Field(
        default=1_024,
        ge=1,
        json_schema_extra={"answer": 422},
        description="Conditions and and / or / not nodes of one filter, together (422).",
    )
    max_filter_values: int = Field(
        default=65_536,
        ge=1,
        json_schema_extra={"answer": 422},
        description="Values of one filter's `in` lists, together (422).",
    )
    max_top_k: int = Field(
        default=1_000,
        ge=1,
        json_schema_extra={"answer": 422},
        description="The largest `top_k` (422).",
    )
    max_offset: int = Field(
        default=9_000,
        ge=0,
        json_schema_extra={"answer": 422},
        description="The largest `offset` of a page of results (422).",
    )
    max_examples: int = Field(
        default=10,
        ge=1,
        json_schema_extra={"answer": 422},
        description="Documents in `like`, and in `unlike`, each (422).",
    )
    max_candidates: int = Field(
        default=100_000,
        ge=1,
        json_schema_extra={"answer": 422},
        description="Ids in a `candidates` pool (422).",
    )
    query_cache_bytes: int = Field(
        default=512 * 2**20,
        ge=0,
        description="Memory for the split and vectors of recent /similar queries (0: none).",
    )
    query_cache_ttl_seconds: float = Field(
        default=3600.0, gt=0, description="How long a query_id stays usable by /explain."
    )
    explain_max_cells: int = Field(
        default=1_000_000,
        ge=1,
        json_schema_extra={"answer": 413},
        description="The largest paragraph matrix (source x target paragraphs) /explain computes.",
    )
    explain_top_pairs: int = Field(
        default=10, ge=1, le=100, description="Most similar sentence pairs /explain lists."
    )
    explain_passages: int = Field(
        default=20, ge=0, le=200, description="Most shared passages /explain marks (0: none)."
    )
    image_max_cells_per_axis: int = Field(
        default=100, ge=2, description="Beyond this, PNG heatmaps show blocks (their max)."
    )
    api_key: SecretStr | None = Field(
        default=None,
        description="When set, jobs and document changes need it (X-API-Key or Bearer).",
    )
    swap_poll_seconds: float = Field(
        default=1.0, gt=0, description="How often the service looks for a newly published version."
    )
    change_wait_seconds: float = Field(
        default=30.0,
        ge=0,
        description="How long a document change waits for the changes before it (one writer "
        "at a time per data directory) before it is refused with 429 and Retry-After.",
    )
    max_concurrent_searches: int | None = Field(
        default=None,
        ge=1,
        description="Searches and explanations computed at once (each holds its paragraph "
        "matrices); more wait their turn. Default: the number of CPUs.",
    )
    search_deadline_seconds: float = Field(
        default=60.0,
        gt=0,
        json_schema_extra={"answer": 503},
        description="How long a search or explanation may run, waiting for a slot included: "
        "past it, it stops before its next batch of work (an encoder batch, a block of the "
        "sentence scan) and answers 503 with Retry-After.",
    )
    write_deadline_seconds: float = Field(
        default=300.0,
        gt=0,
        le=3_600,
        json_schema_extra={"answer": 503},
        description="How long one write (POST /documents) may read and encode its documents: "
        "past it, it stops before its next batch of work (an encoder batch, a page of a file) "
        "with 503 and Retry-After, and nothing changes. Writes hold no search slot; before "
        "each batch they wait while searches that have worked for less than "
        "DOCSIM_API__FAIR_SHARE_SECONDS hold or await slots.",
    )
    fair_share_seconds: float = Field(
        default=2.0,
        gt=0,
        description="How long a search may work (encode its query, scan the sentences) before "
        "it yields its slot, at each batch, to searches that have worked for less: the "
        "largest posted documents are served from the time ordinary searches leave idle.",
    )
    upload_fair_share_seconds: float = Field(
        default=0.25,
        gt=0,
        description="DOCSIM_API__FAIR_SHARE_SECONDS for a search whose query is an uploaded "
        "file: reading a file (inflating its parts, laying out its pages) is where a hostile "
        "upload spends its time, so such a search yields to others sooner.",
    )
    page_max_cells_per_axis: int = Field(
        default=250, ge=2, description="The same for the HTML page's clickable maps."
    )


class ServiceSettings(QuerySettings):
    api: ApiSettings = ApiSettings()


@lru_cache
def get_service_settings() -> ServiceSettings:
    return ServiceSettings()
