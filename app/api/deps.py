"""Shared dependencies of the routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.core.config import ServiceSettings
from app.core.errors import IndexNotReadyError
from app.services.state import ServiceState


def get_settings(request: Request) -> ServiceSettings:
    return request.app.state.settings


def get_state(request: Request) -> ServiceState:
    state = getattr(request.app.state, "service", None)
    if state is None:
        raise IndexNotReadyError(
            "no index is loaded: run `docsim index` to build one, then restart"
        )
    return state


SettingsDep = Annotated[ServiceSettings, Depends(get_settings)]
StateDep = Annotated[ServiceState, Depends(get_state)]
