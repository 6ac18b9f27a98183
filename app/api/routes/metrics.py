from __future__ import annotations

from collections.abc import Iterator

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import Metric

from docsim.app.api.deps import given_key, is_server_key

router = APIRouter(tags=["operations"])


class _Readable:
    """A registry's metrics with the samples of a collection only for the collections in
    `shown` (all of them when it is None); samples of no collection (`""`, jobs) always."""

    def __init__(self, registry: CollectorRegistry, shown: set[str] | None) -> None:
        self.registry, self.shown = registry, shown

    def collect(self) -> Iterator[Metric]:
        for metric in self.registry.collect():
            if self.shown is not None:
                metric.samples = [s for s in metric.samples if self._shows(s.labels)]
            yield metric

    def _shows(self, labels: dict[str, str]) -> bool:
        name = labels.get("collection")
        return not name or self.shown is None or name in self.shown


@router.get("/metrics", response_class=Response)
def metrics(request: Request) -> Response:
    """Prometheus metrics: request latency per route, index sizes, jobs and their durations.
    A collection with a read key shows only to a caller with that key, its write key or the
    server's key, as in `GET /collections`; a collection that no longer exists shows to no
    one (a request that was still running when it was deleted may have counted it again)."""
    registry = request.app.state.metrics.registry
    key = given_key(request)
    collections = getattr(request.app.state, "collections", None)
    server = is_server_key(request, key)
    shown = (
        None
        if collections is None
        else {
            row.name
            for row in collections.rows()
            if server or row.read_key_sha256 is None or row.opens(key, write=False)
        }
    )
    readable = _Readable(registry, shown)
    return Response(generate_latest(readable), media_type=CONTENT_TYPE_LATEST)
