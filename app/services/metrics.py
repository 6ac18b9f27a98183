"""Prometheus metrics (prometheus-client), one registry per application.

- `docsim_http_request_duration_seconds{method,route,status,collection}`: a histogram per
  route template (`/jobs/{job_id}`, not the raw path, so the label set stays small) and
  collection. Every label takes a bounded set of values whatever clients send: a method
  HTTP does not define is counted as `other`, a path no route serves as `unmatched`, an
  unknown collection as none (""), and a deleted collection's series go with it.
- Read at scrape time from what the service already holds, never double-booked, per
  collection: `docsim_index_version{collection}`, `docsim_index_documents{collection}`,
  `docsim_index_vectors{collection,level}`, `docsim_index_vector_bytes{collection,level}`,
  `docsim_query_cache_bytes{collection}` (the served version), and from
  the jobs table, so that jobs run by a separate worker process count too: `docsim_jobs{status}`
  and `docsim_job_duration_seconds{status}` (a summary over finished jobs).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import Engine
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match

from docsim.app.services.state import ServiceState
from docsim.indexer.api import job_figures

logger = logging.getLogger(__name__)

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
UNMATCHED = "unmatched"  # requests no route serves (404s): one label value, not one per path
# the methods of RFC 9110 and PATCH; any other a client sends is one label value
METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}
)
OTHER_METHOD = "other"
SHARD_PING_SECONDS = 2.0  # a scrape's wait for the shards' answers


class ServiceCollector(Collector):
    """Index and job figures, computed when Prometheus scrapes."""

    def __init__(
        self,
        states: Callable[[], dict[str, ServiceState | None]],
        engine: Callable[[], Engine | None],
    ) -> None:
        self._states = states
        self._engine = engine

    def collect(self) -> Iterator[Metric]:
        yield from self._index_metrics(self._states())
        engine = self._engine()
        if engine is not None:
            try:
                yield from self._job_metrics(engine)
            except Exception as error:  # noqa: BLE001 - a scrape must not fail on the database
                logger.warning("Job metrics unavailable: %s", error)

    @staticmethod
    def _index_metrics(states: dict[str, ServiceState | None]) -> Iterator[Metric]:
        by = ["collection"]
        version = GaugeMetricFamily(
            "docsim_index_version", "Served index version (0: none).", labels=by
        )
        documents = GaugeMetricFamily(
            "docsim_index_documents", "Documents in the served index.", labels=by
        )
        vectors = GaugeMetricFamily(
            "docsim_index_vectors",
            "Vectors per level in the served index.",
            labels=[*by, "level"],
        )
        nbytes = GaugeMetricFamily(
            "docsim_index_vector_bytes",
            "Bytes of vectors held in memory per level (a mapped level: its row map; the "
            "compressed sentence level: its compressed rows).",
            labels=[*by, "level"],
        )
        cache = GaugeMetricFamily(
            "docsim_query_cache_bytes", "Bytes held by the query cache.", labels=by
        )
        shards = GaugeMetricFamily(
            "docsim_shards",
            "A sharded service's shard actors that answer a ping within 2 s (`answering`) and "
            "that do not (`missing`: dead, restarting, or on a lost node; queries are 503).",
            labels=[*by, "state"],
        )
        for name, state in sorted(states.items()):
            if state is None:
                version.add_metric([name], 0)
                continue
            version.add_metric([name], state.version_id)
            documents.add_metric([name], state.searcher.index.n_documents)
            for level, (count, held_bytes) in state.searcher.vector_sizes().items():
                vectors.add_metric([name, level], count)
                nbytes.add_metric([name, level], held_bytes)
            cache.add_metric([name], state.queries.used_bytes)
            if state.shards is not None:
                health = state.shards.health(timeout=SHARD_PING_SECONDS)
                missing = len(health.missing)
                shards.add_metric([name, "answering"], len(health.nodes) - missing)
                shards.add_metric([name, "missing"], missing)
        yield from (version, documents, vectors, nbytes, cache, shards)

    @staticmethod
    def _job_metrics(engine: Engine) -> Iterator[Metric]:
        counts = GaugeMetricFamily("docsim_jobs", "Jobs per status.", labels=["status"])
        durations = SummaryMetricFamily(
            "docsim_job_duration_seconds",
            "Run time (start to finish) of finished jobs.",
            labels=["status"],
        )
        figures = job_figures(engine)
        for status, count in figures.counts.items():
            counts.add_metric([status], count)
        for status, (finished, total) in figures.run_seconds.items():
            durations.add_metric([status], count_value=finished, sum_value=total)
        yield from (counts, durations)


class Metrics:
    """The application's registry, its request histogram and the scrape-time collector."""

    def __init__(
        self,
        states: Callable[[], dict[str, ServiceState | None]],
        engine: Callable[[], Engine | None],
    ) -> None:
        self.registry = CollectorRegistry()
        self.latency = Histogram(
            "docsim_http_request_duration_seconds",
            "Time to answer an HTTP request, by route template and collection.",
            ["method", "route", "status", "collection"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(ServiceCollector(states, engine))

    async def middleware(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        started = time.perf_counter()
        status = 500
        try:
            response = await call_next(request)
            status = response.status_code
            return response
        finally:
            self.latency.labels(
                method_label(request),
                route_template(request),
                str(status),
                collection_label(request),
            ).observe(time.perf_counter() - started)

    def forget_collection(self, request: Request, name: str) -> None:
        """Drop the series of the collection `name`, which `request` has just deleted; the
        request itself is counted under no collection, as one for an unknown name is."""
        self.latency.remove_by_labels({"collection": name})
        request.state.collection = None


def method_label(request: Request) -> str:
    """The request's method when HTTP defines it, else `OTHER_METHOD`: a made-up method
    never becomes a label value of its own."""
    return request.method if request.method in METHODS else OTHER_METHOD


def collection_label(request: Request) -> str:
    """The collection the request was answered for (`app.api.deps.get_collection` found it),
    else "": an unknown or invalid name never becomes a label value, so the label set stays
    as small as the collections."""
    held = getattr(request.state, "collection", None)
    return held.name if held is not None else ""


SCOPED_PREFIX = "/collections/{collection}"  # app.api.routes.collections.PREFIX


def route_template(request: Request) -> str:
    """The path template of the route that serves `request` (e.g. `/jobs/{job_id}`, and
    `/collections/{collection}/similar` for a collection's route: FastAPI hands the route
    as it was declared, without the prefix it was included under)."""
    route = request.scope.get("route")
    if route is not None:
        path = template(route)
        scoped = "collection" in request.scope.get("path_params", {})
        if scoped and not path.startswith("/collections"):
            return SCOPED_PREFIX + path
        return path
    for candidate in request.app.router.routes:
        if candidate.matches(request.scope)[0] == Match.FULL:
            return template(candidate)
    return UNMATCHED


def template(route: Any) -> str:
    """A route's path without its parameters' convertors (`/jobs/{job_id}`, not
    `/jobs/{job_id:int}`)."""
    return str(getattr(route, "path_format", route.path))
