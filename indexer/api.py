"""The indexer's one surface for the app: everything `app` may use of `indexer`, by purpose.
`tests/test_layers.py` refuses an `app` import of any other indexer module (errors come from
`indexer.errors`); what is named here is public, and changes to it are changes of interface.
The query engine has its own surface, `search.api`.

- **Configuration**: `Settings`, the one settings object's indexer groups (the search layer
  and the app extend it).
- **Database**: `make_engine`, `upgrade` (Alembic migrations).
- **The served version's lifecycle**: `active_version`, `purge_retired` (drop rows no reader
  can see), `prepare_data_dir`; opening it for search is the search layer's (`search.api`).
- **Documents and their changes**: reading and splitting posted documents, `DocumentChange`,
  `apply_change` under `hold_data_dir` (the one-writer lock), `stored_document_by_id`.
- **Collections**: create, read, list and delete them (`create_collection`, ...), and the
  settings a collection sees (`collection_settings`).
- **Jobs**: create, list, cancel and retry reindex jobs, the in-process `Worker`, and
  `job_figures` for monitoring.
- **Command line**: `cli`, the indexer's commands, to which the app adds `serve`.

Plain imports, each from the module that defines the name (`tests/test_layers.py` checks
it): importing this surface loads the indexer. The command line (`app.cli`) takes the
indexer's commands from `indexer.cli` itself, so that `docsim --help` loads neither torch,
FAISS nor the pipeline.
"""

from __future__ import annotations

from docsim.indexer.builder.pipeline import prepare_data_dir
from docsim.indexer.choices import (
    COLLECTION_NAME_PATTERN,
    CURRENT,
    DEFAULT_COLLECTION,
    CorpusFormat,
    EngineName,
)
from docsim.indexer.cli.common import DataDir, existing_data_dir
from docsim.indexer.cli.main import command_line
from docsim.indexer.jobs.figures import JobFigures, job_figures
from docsim.indexer.jobs.first_version import publish_first_version
from docsim.indexer.jobs.queue import (
    JobRow,
    create_job,
    get_job,
    list_jobs,
    request_cancel,
    retry_job,
)
from docsim.indexer.jobs.reindex_job import ReindexParameters
from docsim.indexer.jobs.updates import DocumentChange, apply_change
from docsim.indexer.jobs.worker import Worker
from docsim.indexer.settings import Settings, collection_settings, with_groups
from docsim.indexer.store.collections import (
    SETTING_GROUPS,
    CollectionRow,
    check_collection_name,
    create_collection,
    delete_collection,
    get_collection,
    list_collections,
)
from docsim.indexer.store.data_lock import hold_data_dir
from docsim.indexer.store.db import make_engine, upgrade
from docsim.indexer.store.generations import purge_retired
from docsim.indexer.store.reader import stored_document_by_id
from docsim.indexer.store.versions import active_slots, active_version
from docsim.indexer.text.corpus import (
    SAMPLE_CORPUS,
    has_nul,
    json_document,
    read_document,
)
from docsim.indexer.text.documents import Document, SourceDocument
from docsim.indexer.text.field_types import FieldType
from docsim.indexer.text.readers.registry import FileLimits
from docsim.indexer.text.sentences import SentenceSplitter, load_splitter
from docsim.indexer.text.split import split_document

__all__ = [
    "COLLECTION_NAME_PATTERN",
    "CURRENT",
    "DEFAULT_COLLECTION",
    "SETTING_GROUPS",
    "CollectionRow",
    "CorpusFormat",
    "DataDir",
    "Document",
    "DocumentChange",
    "EngineName",
    "FieldType",
    "FileLimits",
    "JobFigures",
    "JobRow",
    "ReindexParameters",
    "SAMPLE_CORPUS",
    "SentenceSplitter",
    "Settings",
    "SourceDocument",
    "Worker",
    "active_slots",
    "active_version",
    "apply_change",
    "check_collection_name",
    "collection_settings",
    "create_collection",
    "delete_collection",
    "get_collection",
    "list_collections",
    "command_line",
    "existing_data_dir",
    "create_job",
    "get_job",
    "has_nul",
    "hold_data_dir",
    "job_figures",
    "json_document",
    "list_jobs",
    "make_engine",
    "load_splitter",
    "publish_first_version",
    "prepare_data_dir",
    "purge_retired",
    "read_document",
    "request_cancel",
    "retry_job",
    "split_document",
    "stored_document_by_id",
    "upgrade",
    "with_groups",
]
