"""Clients that query a service while a test takes its nodes away: every answer counted by
status in the phase its request was sent in, and every wrong one kept
(tests/app/test_cluster_slow.py)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx


def ranking(answer: dict[str, Any]) -> list[tuple[str, float]]:
    return [(r["document_id"], r["score"]) for r in answer["results"]]


class QueryingClients:
    """`clients` threads that query `url` (`sdr`, `queries` in turn) until the block ends:
    each answer is counted by status in the phase its request was sent in (`phase`), and
    anything but the exact ranking or a 503 with `Retry-After` is kept in `wrong`."""

    def __init__(
        self,
        url: str,
        expected: dict[tuple[str, int], list[tuple[str, float]]],
        queries: list[dict[str, Any]],
        same: Callable[[list[tuple[str, float]], list[tuple[str, float]]], None],
        clients: int = 8,
    ) -> None:
        """`same(expected, got)` raises AssertionError when two rankings differ."""
        self.url, self.expected, self.queries, self.same = url, expected, queries, same
        self.phase = "before"
        self.phases: dict[str, Counter[str]] = {}
        self.wrong: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._query, args=(i,)) for i in range(clients)]

    def __enter__(self) -> QueryingClients:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(120)

    def _query(self, seed: int) -> None:
        with httpx.Client(base_url=self.url, timeout=120) as mine:
            turn = seed
            while not self._stop.is_set():
                key = ("sdr", turn % len(self.queries))
                body = {"top_k": 48, "method": key[0], **self.queries[key[1]]}
                asked_in = self.phase  # an answer counts in the phase its request began in
                response = mine.post("/similar", json=body)
                turn += 1
                status = str(response.status_code)
                self.phases.setdefault(asked_in, Counter())[status] += 1
                if response.status_code == 200:
                    try:
                        self.same(self.expected[key], ranking(response.json()))
                    except AssertionError:
                        self.wrong.append(response.text[:200])
                elif response.status_code != 503 or not response.headers.get("retry-after"):
                    self.wrong.append(f"{status}: {response.text[:200]}")

    def figures(self) -> dict[str, Any]:
        """The answers by phase and status; the wrong ones were checked to be none."""
        assert self.wrong == [], self.wrong[:5]
        # a request in flight when the node dies, or sent in the moment before the kill, may
        # land either way; one sent once `/ready` is green again is answered
        before, lost = self.phases.get("before", {}), self.phases.get("lost", {})
        assert before.get("200", 0) > 0 and lost.get("503", 0) > 0, self.phases
        assert set(self.phases["recovered"]) == {"200"}, self.phases
        return {
            "answers_by_phase": {name: dict(counts) for name, counts in self.phases.items()},
            "wrong_rankings": len(self.wrong),
        }
