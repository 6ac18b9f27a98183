from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends, Request

from docsim.app.api.bodies import (
    form_body,
    invalid,
    is_form,
    json_body,
    request_body,
    validated,
)
from docsim.app.api.deps import SearchSlot, SettingsDep, StateDep, paced_by
from docsim.app.schemas.similar import (
    SimilarOptions,
    SimilarRequest,
    SimilarUpload,
    similar_response,
)
from docsim.app.services import similar as service
from docsim.app.services.uploads import UploadedFile
from docsim.protocol.answers import SimilarResponse

router = APIRouter(tags=["search"])


async def similar_body(
    http: Request, settings: SettingsDep
) -> tuple[SimilarOptions, UploadedFile | None]:
    """The JSON body, or the uploaded file and the options given as form fields."""
    if not is_form(http):
        return await json_body(http, SimilarRequest), None
    options = set(SimilarOptions.model_fields)
    form = await form_body(
        http,
        file_fields={"file"},
        scalar_fields=options - {"candidates"},
        list_fields={"candidates"},
        max_file_bytes=settings.files.max_bytes,
    )
    if len(form.files) != 1:
        raise invalid("file", f"give one query document file here ({len(form.files)} given)")
    return validated(SimilarOptions, form.fields), form.files[0]


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
