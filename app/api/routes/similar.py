from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from docsim.app.api.bodies import (
    form_body,
    invalid,
    is_form,
    json_body,
    list_fields,
    request_body,
    validated,
)
from docsim.app.api.deps import SearchSlot, SettingsDep, StateDep, paced_by
from docsim.app.api.json_reader import JsonBounds, JsonError, read_json
from docsim.app.core.settings import ApiSettings
from docsim.app.schemas.similar import SimilarUpload, similar_response
from docsim.app.services import similar as service
from docsim.app.services.limits import check_filter_size
from docsim.app.services.uploads import UploadedFile
from docsim.protocol.answers import SimilarResponse
from docsim.protocol.requests import SimilarOptions, SimilarRequest

router = APIRouter(tags=["search"])


async def similar_body(
    http: Request, settings: SettingsDep
) -> tuple[SimilarOptions, UploadedFile | None]:
    """The JSON body, or the uploaded file and the options given as form fields. The filter
    is counted against its limits as read, before the models validate it."""
    limits = settings.api
    if not is_form(http):

        def check(data: Any) -> None:
            check_filter_size(data.get("filter") if isinstance(data, dict) else None, limits)

        return await json_body(http, SimilarRequest, check), None
    options = set(SimilarOptions.model_fields)
    lists = list_fields(SimilarOptions)  # `candidates`, `exclude`: given once or repeated
    form = await form_body(
        http,
        file_fields={"file"},
        scalar_fields=options - lists,
        list_fields=lists,
        max_file_bytes=settings.files.max_bytes,
    )
    if len(form.files) != 1:
        raise invalid("file", f"give one query document file here ({len(form.files)} given)")
    return validated(SimilarOptions, form_filter(form.fields, limits)), form.files[0]


def form_filter(fields: dict[str, Any], limits: ApiSettings) -> dict[str, Any]:
    """The form's fields with the filter's JSON text read (`app.api.json_reader`) and
    counted against its limits.

    Raises:
        RequestValidationError: the filter is not JSON within the JSON limits (422).
        LimitExceededError: more clauses or values than the limits allow (422).
    """
    if not isinstance(text := fields.get("filter"), str):
        return fields
    try:
        data = read_json(text, JsonBounds.of(limits))
    except JsonError as error:
        raise invalid("filter", f"the filter is not JSON: {error}") from None
    check_filter_size(data, limits)
    return {**fields, "filter": data}


@router.post(
    "/similar",
    response_model=SimilarResponse,
    openapi_extra=request_body(SimilarRequest, SimilarUpload),
)
def similar(
    http: Request,
    body: Annotated[tuple[SimilarOptions, UploadedFile | None], Depends(similar_body)],
    state: StateDep,
    settings: SettingsDep,
    slot: SearchSlot,
) -> SimilarResponse:
    """Rank the collection against a posted or an indexed document: JSON, or a document file
    (PDF, Word, HTML, text, Markdown) uploaded as `multipart/form-data` in `file` with the
    options as form fields."""
    started = time.perf_counter()
    request, upload = body
    if upload is not None:
        slot.fair_share = settings.api.upload_fair_share_seconds
    with paced_by(http, slot):
        result, query_id = service.similar(state, request, settings, upload)
    return similar_response(
        result,
        request,
        query_id=query_id,
        index_version=state.version_id,
        index_revision=state.revision,
        encoder=state.encoder_name,
        started=started,
    )
