from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from docsim.app.render.policy import content_security_policy

router = APIRouter(tags=["pages"])


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def search_page() -> HTMLResponse:
    """The search page: paste or upload a document, see ranked results, open explanations."""
    return HTMLResponse(
        files("docsim.app").joinpath("web/index.html").read_text(encoding="utf-8"),
        headers={"Content-Security-Policy": content_security_policy()},
    )
