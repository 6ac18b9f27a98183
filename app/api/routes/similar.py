from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import SettingsDep, StateDep
from app.api.schemas import SimilarRequest, SimilarResponse
from app.services import similar as service

router = APIRouter(tags=["search"])


@router.post("/similar", response_model=SimilarResponse)
def similar(request: SimilarRequest, state: StateDep, settings: SettingsDep) -> SimilarResponse:
    """Rank the collection against a posted or an indexed document."""
    return service.similar(state, request, settings.api)
