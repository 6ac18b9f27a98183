"""The named choices of the command line, the settings and the API: where a build's encode
stage runs, what runs the encoder, how a corpus is read, the `current` documents as a
reindex source, and what a collection may be named. A leaf module, so that the
command line can list them without importing what implements them (`docsim --help`)."""

from __future__ import annotations

from enum import Enum

CURRENT = "current"  # a reindex job's source: the active version's stored documents

DEFAULT_COLLECTION = "default"  # the collection of a data directory made before collections
# lower case, digits, `_` and `-`, starting with a letter or digit: safe in a URL path, a
# folder name and a metrics label as it is
COLLECTION_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"


class EngineName(str, Enum):
    """Where a build's encode stage runs (`indexer.builder.engines`)."""

    local = "local"
    ray = "ray"


class BackendChoice(str, Enum):
    """What runs the encoder (`indexer.builder.backend`; the values are
    `models.inference.backends`'s backend names)."""

    auto = "auto"
    torch = "torch"
    openvino_int8 = "openvino-int8"
    openvino_fp32 = "openvino-fp32"


class CorpusFormat(str, Enum):
    """How a corpus path is read (`indexer.text.corpus`)."""

    auto = "auto"
    text = "text"
    jsonl = "jsonl"
    aila = "aila"
