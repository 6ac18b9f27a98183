"""The one settings object (pydantic-settings): environment variables `DOCSIM_*`; each group is
defined once, in the layer it configures. This module holds the indexer's groups; the search
layer extends `Settings` with its group (`search.settings.QuerySettings`, `DOCSIM_SEARCH__*`)
and the app with its own (`app.core.settings.ServiceSettings`, `DOCSIM_API__*`).

Nested groups use `__`, e.g. `DOCSIM_ENCODER__PRECISION=fp32`, `DOCSIM_DB__URL=postgresql+psycopg://...`.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, Field, computed_field
from pydantic_settings import BaseSettings, SettingsConfigDict

from docsim.indexer.choices import COLLECTION_NAME_PATTERN, DEFAULT_COLLECTION
from docsim.indexer.store.stored_rows import RowFormat

if TYPE_CHECKING:  # the encoders are imported when one is loaded
    from docsim.indexer.store.collections import CollectionRow
    from docsim.models.encoders.encoder import Encoder


class DatabaseSettings(BaseModel):
    """The SQL database of document, version and job metadata."""

    url: str | None = Field(
        default=None,
        description="Any SQLAlchemy URL; default: a SQLite file in the data directory.",
    )
    auto_migrate: bool = Field(
        default=True, description="Run `alembic upgrade head` before the CLI touches the database."
    )


class EncoderSettings(BaseModel):
    """The encoder of new indexes and how it runs; a served index uses the encoder, backend
    and chunk mode its manifest records."""

    name: str = Field(default="minilm", description="Built-in encoder name or a model directory.")
    device: str = Field(default="auto", description="`auto`, `cpu`, `cuda` or `cuda:N`.")
    precision: Literal["auto", "fp32", "bf16"] = Field(
        default="auto",
        description="Torch precision: `auto` is bf16 where the device computes it natively "
        "(recent GPUs, CPUs with AVX-512 BF16 or AMX), else fp32.",
    )
    batch_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Padded tokens per forward batch; default: 2,048 on the CPU, 32,768 on a "
        "GPU (where each forward pass has a fixed cost).",
    )
    max_batch_size: int | None = Field(
        default=None,
        ge=1,
        description="Inputs per forward batch at most, however short; default: 256 on the "
        "CPU, 4,096 on a GPU.",
    )
    backend: Literal["auto", "torch", "openvino-int8", "openvino-fp32"] = Field(
        default="auto",
        description="What runs the forward pass of new indexes: `openvino-int8` (exported and "
        "quantised on the corpus's text), `openvino-fp32` (exported unquantised), `torch`, or "
        "`auto`: for a transformer or CoLDE encoder on the CPU when OpenVINO is installed, "
        "openvino-int8 where the CPU multiplies int8 natively (VNNI or AMX) and openvino-fp32 "
        "where it does not (AVX2 alone), else torch. A served index always uses the backend "
        "recorded in its manifest.",
    )
    streams: int = Field(
        default=1, ge=1, description="OpenVINO inference streams (two requests stay in flight)."
    )
    chunk_vectors: Literal["auto", "encode", "sentences", "late"] = Field(
        default="auto",
        description="How new indexes encode the sentence and chunk levels: `encode` each "
        "sentence and each chunk on its own (two passes over the text); `sentences` (one pass "
        "over the sentences, chunk vectors pooled from their token states); or `late` (one "
        "pass over the chunks, each sentence's vector pooled from its tokens' states in its "
        "chunk: late chunking, sentences read in context). `auto`: `late` for encoders with "
        "mean pooling, else `encode`. A served index uses what its manifest records.",
    )
    calibration_sentences: int = Field(
        default=512, ge=8, description="Corpus sentences that calibrate an int8 export."
    )
    calibration_chunks: int = Field(
        default=64, ge=0, description="Corpus token chunks that calibrate an int8 export."
    )
    cache_dir: Path | None = Field(
        default=None, description="Exported encoders; default: `<data_dir>/encoders`."
    )


class IndexSettings(BaseModel):
    """How a build lays out a version: chunking, blocks and the FAISS index of each level."""

    flat_max_vectors: int = Field(
        default=1_000_000,
        ge=0,
        description="Levels with at most this many vectors use exact Flat search.",
    )
    large_factory: str = Field(
        default="IVF{nlist},Flat",
        description="FAISS factory for larger levels; `{nlist}` becomes about 4*sqrt(n).",
    )
    nprobe: int = Field(default=32, ge=1, description="IVF lists visited per query.")
    chunk_tokens: int | None = Field(
        default=None, ge=8, description="Tokens per chunk; default: the encoder's input limit."
    )
    block_documents: int = Field(default=64, ge=1, description="Documents encoded per block.")
    reuse_vectors: bool = Field(
        default=True,
        description="A build stores again the vectors of the documents the active version "
        "holds unchanged (same id, text and split; same encoder, backend and chunk size) "
        "instead of encoding them; false: encode every document.",
    )
    split_workers: int = Field(
        default=0,
        ge=0,
        description="Processes that split a build's documents into sentences once splitting "
        "has taken 2 s; 0: one per CPU core, at most 8; 1: none (the build's own process).",
    )
    stored_rows: RowFormat = Field(
        default="int8",
        description="How each level's vectors are stored (their one copy on disk): `float16` "
        "(768 bytes a MiniLM row); `int8`, codes and a scale per row (388 bytes, each component "
        "within half a step of its value; AILA's rankings unchanged). Read back as float16.",
    )
    scanned_level_lists: Literal["auto", "write", "defer"] = Field(
        default="auto",
        description="The IVF lists of the paragraph, sentence and chunk levels (above "
        "`flat_max_vectors`): `write` them at build; `defer` them to a reader that searches "
        "those levels through FAISS (a GPU or `sentence_store=float32` service), which trains "
        "and fills the same index at load. A CPU service scans these levels and never reads "
        "their lists, which cost most of a large build (an hour and a half of 100x AILA's "
        "34 million sentences here); `auto`: write on a build that sees a GPU, else defer.",
    )
    use_gpu: Literal["auto", "never"] = Field(
        default="auto", description="FAISS on the GPU when faiss-gpu sees one; `never`: CPU."
    )


class JobSettings(BaseModel):
    """Reindex jobs: who runs them, where they may read, and how versions are retired."""

    allowed_roots: list[Path] = Field(
        default_factory=list,
        description="Folders a reindex job may read corpora from (besides the sample corpus).",
    )
    embedded_worker: bool = Field(
        default=True, description="Run a job worker inside the service process."
    )
    poll_seconds: float = Field(default=1.0, gt=0, description="How often idle workers look.")
    heartbeat_seconds: float = Field(
        default=2.0, gt=0, description="How often a running job's worker says it is alive."
    )
    stale_after_seconds: float = Field(
        default=30.0, gt=0, description="A running job without heartbeats this long has failed."
    )
    keep_versions: int = Field(
        default=2, ge=1, description="Published versions kept (the active one included)."
    )
    retire_grace_seconds: float = Field(
        default=300.0,
        ge=0,
        description="How long a superseded version stays, for requests still using it.",
    )


class RaySettings(BaseModel):
    """The Ray cluster of `--engine ray` builds and of sharded serving."""

    address: str | None = Field(
        default=None,
        description="A Ray cluster to join: `ray://head:10001` (Ray Client) from a process that "
        "is not a Ray node, `auto` or `head:6379` where `ray start` ran on this machine; "
        "default: a local Ray started for the build.",
    )
    local_cpus: int = Field(default=2, ge=1, description="CPUs of the local Ray.")
    actors: int | None = Field(
        default=None, ge=1, description="Encoder actors; default: one per GPU, or 1."
    )
    cpus_per_actor: float = Field(default=1.0, gt=0, description="CPUs each encoder actor holds.")


class ShardSettings(BaseModel):
    """Serving on Ray shard actors (`docsim serve --shards N`), on the Ray of `RaySettings`."""

    count: int = Field(
        default=0,
        ge=0,
        description="Shard actors that score exhaustive SDR and the sentence-set methods; "
        "0: everything in the service's process.",
    )
    cpus: float = Field(default=1.0, gt=0, description="CPUs (and torch threads) per shard.")
    gpus: float = Field(default=0.0, ge=0, description="GPUs per shard (a GPU cluster: 1).")
    call_timeout_seconds: float = Field(
        default=120.0, gt=0, description="A shard slower than this is a 503, never left out."
    )
    load_timeout_seconds: float = Field(
        default=300.0,
        gt=0,
        description="How long new shard actors may take to start and load their ranges "
        "(a process each, its range read from disk) before they are closed and the load "
        "fails.",
    )
    node_resource: str | None = Field(
        default=None,
        min_length=1,
        description="A custom Ray resource each shard actor holds one unit of: the nodes "
        "started with it (`ray start --resources '{\"docsim_shard\": 2}'`) hold the shards, "
        "as many each as their units, and the others (the head) none. Default: any node "
        "with the CPUs.",
    )
    spread: bool = Field(
        default=True,
        description="Spread the shard actors over the cluster's nodes (Ray's SPREAD "
        "strategy), rather than fill one node first.",
    )


class FileSettings(BaseModel):
    """Limits on a document file, when indexing a folder and when uploaded to the API."""

    max_bytes: int = Field(
        default=100 * 2**20,
        ge=1,
        json_schema_extra={"answer": 413},
        description="Larger files are skipped (413 when uploaded).",
    )
    max_pdf_pages: int = Field(
        default=5000,
        ge=1,
        json_schema_extra={"answer": 413},
        description="Longer PDFs are skipped (413 when uploaded), told by the page tree before "
        "any page is laid out.",
    )
    max_inflated_bytes: int = Field(
        default=256 * 2**20,
        ge=1,
        json_schema_extra={"answer": 413},
        description="Bytes one file's compressed parts (PDF streams, the members of a Word "
        "archive) may inflate to, together. Counted as they inflate: a file that passes it is "
        "skipped there, never inflated whole (413 when uploaded).",
    )
    max_characters: int = Field(
        default=20_000_000,
        ge=1,
        json_schema_extra={"answer": 413},
        description="Characters of text read from one file, counted as they are read: a file "
        "with more is skipped there (413 when uploaded; an upload is also held to "
        "DOCSIM_API__MAX_DOCUMENT_BYTES as it is read). A Word file's document.xml may have 64 "
        "bytes per character.",
    )


class LogSettings(BaseModel):
    """Logging of the CLI and the service (uvicorn's lines included)."""

    format: Literal["text", "json"] = Field(
        default="text", description="`json`: one JSON object per line, for log collectors."
    )
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", description="The lowest level logged; `docsim -v` forces DEBUG."
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="DOCSIM_", env_nested_delimiter="__", env_ignore_empty=True, extra="ignore"
    )

    data_dir: Path = Field(default=Path("docsim-data"), description="Indexes and the SQLite file.")
    collection: str = Field(
        default=DEFAULT_COLLECTION,
        pattern=COLLECTION_NAME_PATTERN,
        description="The collection the CLI works on (`--collection`); each collection of a "
        "data directory has its own versions, documents and jobs.",
    )
    punkt_params: Path | None = Field(
        default=None, description="Punkt parameter file; default: the shipped parameters."
    )
    db: DatabaseSettings = DatabaseSettings()
    encoder: EncoderSettings = EncoderSettings()
    files: FileSettings = FileSettings()
    index: IndexSettings = IndexSettings()
    jobs: JobSettings = JobSettings()
    log: LogSettings = LogSettings()
    ray: RaySettings = RaySettings()
    shards: ShardSettings = ShardSettings()

    @computed_field  # type: ignore[prop-decorator]
    @property
    def database_url(self) -> str:
        if self.db.url:
            return self.db.url
        return f"sqlite:///{(self.data_dir / 'docsim.sqlite3').resolve()}"

    @property
    def indexes_dir(self) -> Path:
        """Where the collection's versions live: `<data_dir>/indexes` for `default` (as before
        collections existed), `<data_dir>/collections/<name>` for the others."""
        if self.collection == DEFAULT_COLLECTION:
            return self.data_dir / "indexes"
        return self.data_dir / "collections" / self.collection


@lru_cache
def get_settings() -> Settings:
    return Settings()


def load_configured_encoder(
    settings: Settings,
    name_or_path: str | Path | None = None,
    backend_dir: Path | None = None,
    chunk_vectors: str | None = None,
    *,
    shared: bool = False,
) -> Encoder:
    """The encoder `name_or_path` (default: the configured one) with the configured device,
    precision and batching; on the OpenVINO export in `backend_dir` when given (on the CPU,
    whatever the device setting: a version's vectors came from that model); with
    `chunk_vectors` (default: the configured one) when not `encode`. `shared`: one loaded
    copy per process for every caller that asks for the same (`load_shared_encoder`), for
    serving, which never changes its encoder."""
    from docsim.models.encoders.loading import load_encoder, load_shared_encoder
    from docsim.models.inference.precision import resolve_device

    options: dict[str, Any] = {}
    if backend_dir is not None:
        options.update(backend_dir=backend_dir, streams=settings.encoder.streams)
    chunk_vectors = chunk_vectors or settings.encoder.chunk_vectors
    if chunk_vectors != "encode":  # an option of transformer encoders only
        options["chunk_vectors"] = chunk_vectors
    device = "cpu" if backend_dir is not None else settings.encoder.device
    load = load_shared_encoder if shared else load_encoder
    return load(
        name_or_path or settings.encoder.name,
        device=resolve_device(device),
        precision=settings.encoder.precision,
        batch_tokens=settings.encoder.batch_tokens,
        max_batch_size=settings.encoder.max_batch_size,
        **options,
    )


AnySettings = TypeVar("AnySettings", bound=Settings)  # the layers above extend the indexer's


def collection_settings(base: AnySettings, row: CollectionRow) -> AnySettings:
    """`base` as the collection `row` sees it: its name, and each group it sets apart
    merged over the server's (validated again as a whole group).

    Raises:
        pydantic.ValidationError: a stored field is no longer valid.
    """
    return with_groups(base, row.name, row.settings)


def merged(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """`base` with `changes` over it, a nested group's fields merged over the group's own."""
    out = dict(base)
    for key, value in changes.items():
        nested = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = merged(out[key], value) if nested else value
    return out


def with_groups(base: AnySettings, name: str, groups: dict[str, dict[str, Any]]) -> AnySettings:
    """`base` for the collection `name`, with the fields of `groups` over its own. A group
    `base` does not hold (the search group, for the indexer's own commands) is left to the
    layer whose settings hold it."""
    update_: dict[str, Any] = {"collection": name}
    for group, fields in groups.items():
        if group not in type(base).model_fields:
            continue
        current = getattr(base, group)
        update_[group] = type(current).model_validate(merged(current.model_dump(), fields))
    return base.model_copy(update=update_)
