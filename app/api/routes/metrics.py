from __future__ import annotations

from collections.abc import Iterator

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import Metric

from docsim.app.api.deps import given_key, is_server_key

router = APIRouter(tags=["operations"])


class _Readable:
    """A registry's metrics without the samples of the collections in `hidden`."""

    def __init__(self, registry: CollectorRegistry, hidden: set[str]) -> None:
        self.registry, self.hidden = registry, hidden

    def collect(self) -> Iterator[Metric]:
        for metric in self.registry.collect():
            kept = [s for s in metric.samples if s.labels.get("collection") not in self.hidden]
            if len(kept) != len(metric.samples):
                metric.samples = kept
            yield metric


@router.get("/metrics", response_class=Response)
def metrics(request: Request) -> Response:
    """Prometheus metrics: request latency per route, index sizes, jobs and their durations.
    A collection with a read key shows only to a caller with that key, its write key or the
    server's key, as in `GET /collections`."""
    registry = request.app.state.metrics.registry
    key = given_key(request)
    collections = getattr(request.app.state, "collections", None)
    hidden = (
        set()
        if collections is None or is_server_key(request, key)
        else {
            row.name
            for row in collections.rows()
            if row.read_key_sha256 is not None and not row.opens(key, write=False)
        }
    )
    readable = _Readable(registry, hidden)
    return Response(generate_latest(readable), media_type=CONTENT_TYPE_LATEST)
