"""`create_app()`: the FastAPI application, with a lifespan that loads the active index."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from importlib.metadata import version as package_version

from fastapi import Depends, FastAPI, Request, Response

from docsim.app.api.bodies import add_body_schemas
from docsim.app.api.body_limit import BodyLimit
from docsim.app.api.deps import ReadKey, reject_nul_in_url
from docsim.app.api.openapi import document_errors
from docsim.app.api.routes import (
    collections,
    documents,
    explain,
    health,
    jobs,
    metrics,
    pages,
    similar,
)
from docsim.app.api.routes.collections import include_scoped
from docsim.app.core.errors import register_error_handlers
from docsim.app.core.settings import ServiceSettings, get_service_settings
from docsim.app.services.collections import Collections
from docsim.app.services.fairness import FairSlots
from docsim.app.services.metrics import Metrics
from docsim.app.services.runtime import Runtime
from docsim.app.services.state import ServiceState
from docsim.indexer.api import DEFAULT_COLLECTION, make_engine, upgrade

logger = logging.getLogger(__name__)


SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",  # a JSON answer is never sniffed into a page
    "X-Frame-Options": "DENY",  # no page of docsim's inside another site's frame
    "Referrer-Policy": "no-referrer",
}


async def security_headers(
    request: Request, call_next: Callable[[Request], Awaitable[Response]]
) -> Response:
    response = await call_next(request)
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response


def served_runtime(app: FastAPI, collection: str = DEFAULT_COLLECTION) -> Runtime:
    """What a started `app` runs for `collection` (loading it on first use): its settings, its
    engine, the state it serves now; for tools that drive an app in this process
    (benchmarks, tests)."""
    runtime: Runtime = app.state.collections.runtime(collection)
    return runtime


def served_state(app: FastAPI, collection: str = DEFAULT_COLLECTION) -> ServiceState | None:
    """The state a started `app` serves for `collection` now (its searcher, shards and
    version; None: nothing is served)."""
    return served_runtime(app, collection).state


def create_app(settings: ServiceSettings | None = None) -> FastAPI:
    settings = settings or get_service_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.db.auto_migrate:
            upgrade(settings.database_url)
        engine = make_engine(settings.database_url)
        app.state.engine = engine
        served = Collections(settings, engine)
        served.start()
        app.state.collections = served
        yield
        served.stop()
        app.state.collections = None
        app.state.engine = None
        engine.dispose()

    app = FastAPI(
        title="docsim",
        description="Which documents in my collection are most like this one, and why?",
        version=package_version("docsim"),
        lifespan=lifespan,
        dependencies=[Depends(reject_nul_in_url)],
    )
    app.state.settings = settings
    app.state.search_slots = FairSlots(
        settings.api.max_concurrent_searches or os.cpu_count() or 1,
        fair_share_seconds=settings.api.fair_share_seconds,
        deadline_seconds=settings.api.search_deadline_seconds,
    )
    app.state.engine = None
    app.state.metrics = Metrics(
        lambda: app.state.collections.states() if app.state.collections else {},
        lambda: app.state.engine,
    )
    app.state.collections = None
    app.middleware("http")(app.state.metrics.middleware)
    app.middleware("http")(security_headers)
    app.add_middleware(BodyLimit, settings=settings)  # outermost: before anything reads
    register_error_handlers(app)
    # every collection's routes: at the root for `default`, and under /collections/{name}
    per_collection = [health.router, similar.router, explain.router, jobs.router, documents.router]
    app.include_router(health.router)  # liveness reads no SQL; /ready reads the state anyway
    for router in per_collection[1:]:
        app.include_router(router, dependencies=[ReadKey])
    app.include_router(collections.router)
    include_scoped(app, per_collection, ReadKey)
    app.include_router(pages.router)
    app.include_router(metrics.router)
    add_body_schemas(app)  # the bodies the routes declared
    document_errors(app)  # what each route refuses, in one shape
    return app
