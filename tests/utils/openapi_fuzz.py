"""What schemathesis's valid cases need beyond the OpenAPI description: what the service's
data decides, which no JSON schema can say.

- A metadata field's type is fixed by its first value in a collection (a later value of
  another type is a 422), so each generated field is named after its value's type, and
  every posted document also carries `KNOWN_METADATA`.
- A filter names fields that some document holds, with values of their types, so each
  generated condition is moved onto one of `KNOWN_METADATA`'s fields.
- Two documents of one request have two ids; a declared field type names a field of its own.
- An integer is written as one (`3`): JSON Schema counts `3.0` an integer too, and docsim's
  JSON bodies refuse a float where an integer is wanted, on purpose (docs/http-api.md).
- An uploaded file is one docsim can read (a PDF with a sentence: a file schemathesis names
  after its signature, `file.pdf`, for its id), one per request: all of a generated
  upload's files carry one name, and so one id.

`adapt_valid_case` (a `map_case` hook) touches only the cases generated as valid, so that a
refusal of one of them is a disagreement between the description and the answers.
schemathesis takes a case whose body a hook changed for an invalid one when it holds a file,
so an upload's file is swapped in its place, and an upload that would need more (several
files, a filter) is left out (`keeps_case`, a `filter_case` hook). So is an invalid upload
whose `file` is no file (null, a number, a text): a form sends it as a file part holding its
text, which is a text file docsim reads. The CLI loads them with
`SCHEMATHESIS_HOOKS=tests.utils.openapi_fuzz_hooks`; `register` puts them on one schema.
`seed_metadata` gives a collection the known fields.
"""

from __future__ import annotations

import io
from functools import cache
from typing import Any

from schemathesis import Case
from schemathesis.hooks import HookContext
from schemathesis.schemas import BaseSchema
from schemathesis.transport.serialization import Binary

from docsim.indexer.text.field_types import parse_date

# the fields every posted document carries, and filters name: a number, a keyword, a boolean
KNOWN_METADATA: dict[str, Any] = {"year": 2001, "court": "court-a", "open": True}
TEXT = b"Coffee is brewed from roasted beans. Tea is steeped in hot water.\n"


def seed_metadata(post: Any, collection: str = "", headers: dict[str, str] | None = None) -> None:
    """Post one document with `KNOWN_METADATA` to `collection` (the root's `default` when
    empty); `post` is an httpx/TestClient `post`."""
    document = {"id": "fuzz-seed", "text": TEXT.decode(), "metadata": KNOWN_METADATA}
    prefix = f"/collections/{collection}" if collection else ""
    answer = post(f"{prefix}/documents", json={"documents": [document]}, headers=headers)
    assert answer.status_code == 200, answer.text


@cache
def pdf() -> bytes:
    """A one-page PDF of `TEXT`."""
    from reportlab.pdfgen import canvas

    out = io.BytesIO()
    page = canvas.Canvas(out)
    page.drawString(72, 720, TEXT.decode().strip())
    page.save()
    return out.getvalue()


def register(schema: BaseSchema) -> None:
    """Put the hooks on `schema` alone."""
    schema.hook("filter_case")(keeps_case)
    schema.hook("map_case")(adapt_valid_case)


def _valid_body(case: Case) -> dict[str, Any] | None:
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or not isinstance(case.body, dict):
        return None
    return case.body


def keeps_case(_context: HookContext, case: Case) -> bool:
    """Whether `case` is not an upload left out (see the module): a valid one that
    `adapt_valid_case` cannot make valid for the data (several files, a filter), or an
    invalid one whose file is no file."""
    body = case.body
    if not isinstance(body, dict) or "file" not in body or case.meta is None:
        return True
    files = body["file"] if isinstance(body["file"], list) else [body["file"]]
    if case.meta.generation.mode.is_positive:
        return len(files) <= 1 and body.get("filter") is None
    return all(isinstance(f, Binary | bytes) for f in files)


def adapt_valid_case(_context: HookContext, case: Case) -> Case:
    """`case` as the data needs it (see the module), when it was generated as valid."""
    body = _valid_body(case)
    if body is None:
        return case
    if "file" in body:  # in place: the body stays the one generated (see the module)
        if isinstance(body["file"], list):
            body["file"][:] = [Binary(pdf())] * len(body["file"])
        else:
            body["file"] = Binary(pdf())
        return case
    body = _whole_numbers_as_integers(body)
    if isinstance(body.get("documents"), list):
        body["documents"] = _distinct_ids([_with_typed_metadata(d) for d in body["documents"]])
    if isinstance(body.get("document"), dict):
        body["document"] = _with_typed_metadata(body["document"])
    for examples in ("like", "unlike"):
        if isinstance(body.get(examples), list):
            body[examples] = [_example(e) for e in body[examples]]
    if isinstance(body.get("filter"), dict):
        body["filter"] = _on_known_fields(body["filter"])
    if isinstance(body.get("field_types"), dict):
        body["field_types"] = {f"declared-{k}": v for k, v in body["field_types"].items()}
    case.body = body
    return case


def _whole_numbers_as_integers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    if isinstance(value, dict):
        return {k: _whole_numbers_as_integers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_numbers_as_integers(v) for v in value]
    return value


def _example(example: Any) -> Any:
    if isinstance(example, dict) and isinstance(example.get("document"), dict):
        return {**example, "document": _with_typed_metadata(example["document"])}
    return example


def _distinct_ids(documents: list[Any]) -> list[Any]:
    seen: set[str] = set()
    out = []
    for i, document in enumerate(documents):
        if isinstance(document, dict) and isinstance(document.get("id"), str):
            if document["id"] in seen:
                document = {**document, "id": f"{i}-{document['id']}"[:512]}
            seen.add(document["id"])
        out.append(document)
    return out


def _with_typed_metadata(document: Any) -> Any:
    if not isinstance(document, dict):
        return document
    metadata = document.get("metadata")
    typed = _typed(metadata) if isinstance(metadata, dict) else {}
    return {**document, "metadata": {**typed, **KNOWN_METADATA}}


def _kind(value: Any) -> str | None:
    """The metadata type `value` fixes (`indexer.text.field_types.value_type`), if a scalar."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "date" if parse_date(value) is not None else "keyword"
    return None


def _typed(metadata: dict[str, Any]) -> dict[str, Any]:
    """`metadata` with each field named after the type of its values: a list's scalars are
    split by type, a nested object keeps its own names so."""
    out: dict[str, Any] = {}
    for key, value in metadata.items():
        if isinstance(value, dict):
            out[f"object-{key}"] = _typed(value)
        elif isinstance(value, list):
            for item in value:
                kind = _kind(item) or "other"
                out.setdefault(f"{kind}-list-{key}", []).append(item)
        else:
            out[f"{_kind(value) or 'other'}-{key}"] = value
    return out


def _on_known_fields(node: dict[str, Any]) -> dict[str, Any]:
    """A filter node with each condition on a field of `KNOWN_METADATA` that takes its
    values (a range on numbers or keywords, values made strings for the keyword)."""
    node = dict(node)
    for combinator in ("and", "or"):
        if isinstance(node.get(combinator), list):
            node[combinator] = [_on_known_fields(c) for c in node[combinator]]
    if isinstance(node.get("not"), dict):
        node["not"] = _on_known_fields(node["not"])
    if node.get("field") is None:
        return node
    values = [node[op] for op in ("eq", "gt", "gte", "lt", "lte") if node.get(op) is not None]
    values += node["in"] if isinstance(node.get("in"), list) else []
    kinds = {_kind(v) for v in values}
    ranged = any(node.get(op) is not None for op in ("gt", "gte", "lt", "lte"))
    if kinds == {"boolean"} and not ranged:
        node["field"] = "open"
    elif kinds == {"number"}:
        node["field"] = "year"
    else:
        node["field"] = "court"
        for op in ("eq", "gt", "gte", "lt", "lte"):
            if node.get(op) is not None:
                node[op] = str(node[op])
        if isinstance(node.get("in"), list):
            node["in"] = [str(v) for v in node["in"]]
    return node
