"""Document files posted to the API: read by the format their content shows, as a folder's
files are when indexing (`indexer.text.corpus.read_document`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import PurePosixPath

from docsim.app.core.errors import DocumentTooLargeError, UnreadableFileError
from docsim.app.core.settings import ServiceSettings
from docsim.indexer.api import FileLimits, SourceDocument, read_document
from docsim.protocol.bodies import DOT_SEGMENTS, has_control_characters

MAX_ID_CHARACTERS = 512  # as for ids posted in JSON


@dataclass(frozen=True)
class UploadedFile:
    name: str  # as the client named it; "" when the part had no file name
    data: bytes


def upload_limits(settings: ServiceSettings) -> FileLimits:
    """What an uploaded file may be: the files' limits (`DOCSIM_FILES__*`), its text held to
    a posted document's characters too (`DOCSIM_API__MAX_DOCUMENT_BYTES`) as it is read: a
    reader stops there rather than read on what would be refused once read."""
    files = settings.files.model_dump()
    if settings.api.max_document_bytes < settings.files.max_characters:
        files["max_characters"] = settings.api.max_document_bytes
        files["characters_setting"] = "DOCSIM_API__MAX_DOCUMENT_BYTES"
    return FileLimits(**files)


def read_upload(
    upload: UploadedFile, limits: FileLimits, doc_id: str | None = None
) -> SourceDocument:
    """The uploaded file as a document whose id is `doc_id`, else the file's name without
    its (last) extension.

    Raises:
        DocumentTooLargeError: larger or longer than `limits` allow, or inflating to more
            (413), refused as soon as reading it passes them.
        UnreadableFileError: a file docsim cannot read, with the reason (422): encrypted, a
            scan without text, corrupt, a zip bomb, no document format, no file name to take
            the id from.
    """
    if "\x00" in upload.name or (doc_id is not None and "\x00" in doc_id):
        raise UnreadableFileError("a file name or id must not contain NUL characters")
    name = PurePosixPath(upload.name.replace("\\", "/")).name  # never a client's folders
    stem = name.rsplit(".", 1)[0] if "." in name else name  # ".pdf" has no name
    doc_id = doc_id if doc_id is not None else stem.strip()
    if not doc_id:
        raise UnreadableFileError(
            "the uploaded file has no name to take the document id from: name the file, "
            "or give the id in the form field `id`"
        )
    if has_control_characters(doc_id):
        raise UnreadableFileError(
            f"the document id {doc_id!r} taken from the file name holds control characters "
            "(newline, tab, ESC, ...): rename the file or give an `id`"
        )
    if doc_id in DOT_SEGMENTS:
        raise UnreadableFileError(
            f"{doc_id!r} cannot be a document id (a URL's path cannot name it): rename the "
            "file or give an `id`"
        )
    if len(doc_id) > MAX_ID_CHARACTERS:
        raise UnreadableFileError(
            f"the document id {doc_id[:40]!r}... taken from the file name has {len(doc_id)} "
            f"characters; ids may have {MAX_ID_CHARACTERS}: rename the file or give an `id`"
        )
    what = f"file {name!r}" if name else "the uploaded file"
    read = read_document(name or "upload", upload.data, {"filename": name}, limits)
    if not isinstance(read, SourceDocument):
        error = DocumentTooLargeError if read.over_limit else UnreadableFileError
        raise error(f"{what} cannot be read: {read.reason}")
    return replace(read, doc_id=doc_id)
