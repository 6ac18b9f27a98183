from __future__ import annotations

import time

from fastapi import APIRouter

from app.api.deps import SettingsDep, StateDep
from app.schemas.similar import SimilarRequest, SimilarResponse
from app.services import similar as service

router = APIRouter(tags=["search"])


@router.post("/similar", response_model=SimilarResponse)
def similar(request: SimilarRequest, state: StateDep, settings: SettingsDep) -> SimilarResponse:
    """Rank the collection against a posted or an indexed document."""
    started = time.perf_counter()
    result, query_id = service.similar(state, request, settings.api)
    return SimilarResponse.from_result(
        result,
        request,
        query_id=query_id,
        index_version=state.version_id,
        encoder=state.encoder_name,
        started=started,
    )
