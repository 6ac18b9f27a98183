from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from docsim.app.api.deps import SearchSlot, SettingsDep, StateDep, paced_by
from docsim.app.api.openapi import errors
from docsim.app.render.explain_page import render_html
from docsim.app.render.policy import content_security_policy
from docsim.app.schemas.explain import ExplainFormat, explain_response
from docsim.app.services import explain as service
from docsim.protocol.explanations import ExplainResponse

router = APIRouter(tags=["explain"])


@router.get(
    "/explain",
    response_model=ExplainResponse,
    responses={200: {"content": {"image/png": {}, "text/html": {}}}, **errors(413)},
)
def explain(
    http: Request,
    state: StateDep,
    settings: SettingsDep,
    slot: SearchSlot,
    source: Annotated[
        str,
        Query(
            min_length=1, max_length=512, description="A query_id from /similar or a document id."
        ),
    ],
    target: Annotated[str, Query(min_length=1, max_length=512, description="A document id.")],
    format: ExplainFormat = ExplainFormat.json,  # noqa: A002 - the public parameter's name
) -> ExplainResponse | Response:
    """Why `target` is similar to `source`: document score, section, chunk and paragraph
    maps, sentence alignments and top pairs; as data, a PNG of heatmaps, or an HTML page."""
    started = time.perf_counter()
    with paced_by(http, slot):
        explanation = service.explain(state, source, target, settings.api)
    if format is ExplainFormat.png:
        # matplotlib is imported by the first PNG asked for, not by every process that
        # imports the app (a third of a second: CLI commands, workers, tests)
        from docsim.app.render.heatmaps import render_png

        return Response(
            render_png(explanation, settings.api.image_max_cells_per_axis),
            media_type="image/png",
        )
    if format is ExplainFormat.html:
        return HTMLResponse(
            render_html(explanation, settings.api.page_max_cells_per_axis),
            headers={"Content-Security-Policy": content_security_policy()},
        )
    response = explain_response(
        explanation, index_version=state.version_id, encoder=state.encoder_name, started=started
    )
    if response.chunk_attention is None:  # absent, never faked, for encoders without it
        return JSONResponse(response.model_dump(mode="json", exclude={"chunk_attention"}))
    return response
