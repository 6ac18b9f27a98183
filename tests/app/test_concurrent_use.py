"""Many clients at once against a live server (issue 26): readers rank while writers add,
replace and delete their own documents, on a seeded random schedule.

Every answer is checked against the snapshot rules:
- no response is a 5xx, and every change is acknowledged (200; a 429 is retried after its
  `Retry-After`);
- the acknowledged changes carry the revisions 1..N, each once: they applied in one serial order;
- a ranking at revision r (`index_revision`) holds exactly the writers' documents live at r,
  with the titles and texts they had at r (hits' matched paragraphs, paragraph units);
- a read never answers from a revision older than a change acknowledged before it began;
- a document whose deletion was acknowledged before a read began, and not posted again until
  it ended, is a 404 for that read (and the other way round).
The default run is short; `-m slow` runs a long one.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from docsim.app.core.settings import ServiceSettings
from tests.utils.live import live_server

SENTENCES = [
    "The tide turns twice a day along the rocky coast.",
    "Bakers fold butter into the dough before it rests.",
    "A glacier carves its valley over thousands of years.",
    "The court dismissed the appeal for want of evidence.",
    "Runners train their lungs with long slow miles.",
    "The judge read the contract clause by clause.",
]
PROBE = "The tide turns along the coast.\n\nBakers fold the dough. The judge read it."
METHODS = ("sdr", "document", "bm25", "fused", "maxsim", "hybrid")
IDS_PER_WRITER = 3


@dataclass
class Op:
    doc_id: str
    kind: str  # "put" or "delete"
    sent: float
    acked: float
    revision: int
    title: str | None = None
    text: str | None = None


@dataclass
class Read:
    kind: str  # "rank", "by_id", "units", "show"
    started: float
    ended: float
    status: int
    body: Any
    doc_id: str | None = None


@dataclass
class Log:
    ops: list[Op] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    retried: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(self, message: str) -> None:
        with self.lock:
            self.failures.append(message)


def _writer(url: str, w: int, seed: int, until: float, log: Log) -> None:
    rng = random.Random(seed)
    ids = [f"w{w}-{j}" for j in range(IDS_PER_WRITER)]
    live: set[str] = set()
    generation = 0
    with httpx.Client(base_url=url, timeout=120) as http:
        while time.monotonic() < until:
            doc_id = rng.choice(ids)
            delete = doc_id in live and rng.random() < 0.6
            generation += 1
            title = f"{doc_id} g{generation}"
            text = " ".join(rng.sample(SENTENCES, 3)) + "\n\n" + " ".join(rng.sample(SENTENCES, 2))
            while True:
                sent = time.monotonic()
                if delete:
                    response = http.delete(f"/documents/{doc_id}")
                else:
                    body = {"documents": [{"id": doc_id, "title": title, "text": text}]}
                    response = http.post("/documents", json=body)
                if response.status_code == 429:
                    with log.lock:
                        log.retried += 1
                    time.sleep(float(response.headers.get("retry-after", "1")))
                    continue
                break
            acked = time.monotonic()
            if response.status_code != 200:
                log.fail(
                    f"{'DELETE' if delete else 'POST'} {doc_id}: {response.status_code} "
                    f"{response.text[:300]}"
                )
                return
            revision = response.json()["revision"]
            with log.lock:
                log.ops.append(
                    Op(
                        doc_id,
                        "delete" if delete else "put",
                        sent,
                        acked,
                        revision,
                        None if delete else title,
                        None if delete else text,
                    )
                )
            (live.discard if delete else live.add)(doc_id)


def _reader(url: str, seed: int, until: float, writer_ids: list[str], log: Log) -> None:
    rng = random.Random(seed)
    with httpx.Client(base_url=url, timeout=120) as http:
        while time.monotonic() < until:
            kind = rng.choice(["rank", "rank", "by_id", "units", "show"])
            doc_id = rng.choice(writer_ids) if kind in ("by_id", "show") else None
            started = time.monotonic()
            if kind == "rank":
                response = http.post(
                    "/similar",
                    json={
                        "document": {"text": PROBE},
                        "top_k": 1000,
                        "method": rng.choice(METHODS),
                    },
                )
            elif kind == "by_id":
                response = http.post(
                    "/similar",
                    json={"document_id": doc_id, "top_k": 1000, "method": rng.choice(METHODS)},
                )
            elif kind == "units":
                response = http.post(
                    "/similar",
                    json={"document": {"text": PROBE}, "top_k": 50, "granularity": "paragraph"},
                )
            else:
                response = http.get(f"/documents/{doc_id}")
            ended = time.monotonic()
            if response.status_code >= 500:
                log.fail(f"{kind} {doc_id or ''}: {response.status_code} {response.text[:300]}")
                continue
            body = (
                response.json()
                if response.headers.get("content-type", "").startswith("application/json")
                else response.text
            )
            with log.lock:
                log.reads.append(Read(kind, started, ended, response.status_code, body, doc_id))


def _states(ops: list[Op]) -> list[dict[str, Op]]:
    """The writers' live documents at each revision: `states[r]` maps id -> its last put."""
    states: list[dict[str, Op]] = [{}]
    for op in sorted(ops, key=lambda o: o.revision):
        state = dict(states[-1])
        if op.kind == "put":
            state[op.doc_id] = op
        else:
            state.pop(op.doc_id, None)
        states.append(state)
    return states


def _certain(ops: list[Op], doc_id: str, started: float, ended: float) -> str | None:
    """ "present" or "absent" when `doc_id` was so from before `started` until `ended` (its
    last change acknowledged before the read began, the next sent after it ended), else None."""
    mine = sorted((o for o in ops if o.doc_id == doc_id), key=lambda o: o.revision)
    before = [o for o in mine if o.acked < started]
    after = [o for o in mine if o.acked >= started]
    if after and after[0].sent <= ended:
        return None
    if not before:
        return "absent"
    return "present" if before[-1].kind == "put" else "absent"


def check(log: Log) -> dict[str, int]:
    """Every snapshot rule of the module docstring; returns the counts of what was checked."""
    failures = list(log.failures)
    revisions = sorted(o.revision for o in log.ops)
    if revisions != list(range(1, len(revisions) + 1)):
        failures.append(f"changes did not apply in one serial order: revisions {revisions}")
    states = _states(log.ops)
    checked = {"rankings": 0, "hit_texts": 0, "units": 0, "by_id": 0, "shown": 0}
    for read in log.reads:
        if read.status != 200:
            if read.kind in ("by_id", "show") and read.status == 404:
                if _certain(log.ops, read.doc_id, read.started, read.ended) == "present":
                    failures.append(f"{read.kind} {read.doc_id}: 404 although it was indexed")
                checked[read.kind if read.kind == "by_id" else "shown"] += 1
                continue
            failures.append(f"{read.kind} {read.doc_id}: {read.status} {str(read.body)[:200]}")
            continue
        if read.kind == "show":
            checked["shown"] += 1
            if _certain(log.ops, read.doc_id, read.started, read.ended) == "absent":
                failures.append(f"GET {read.doc_id}: 200 although it was deleted")
            continue
        revision = read.body["index_revision"]
        acked_before = [o.revision for o in log.ops if o.acked < read.started]
        if acked_before and revision < max(acked_before):
            failures.append(
                f"{read.kind}: answered from revision {revision} although revision "
                f"{max(acked_before)} was acknowledged before it began"
            )
        if revision >= len(states):
            failures.append(f"{read.kind}: revision {revision} that no writer acknowledged")
            continue
        live = states[revision]
        if read.kind == "units":
            checked["units"] += 1
            for unit in read.body["results"]:
                if "-" in unit["document_id"] and unit["document_id"][0] == "w":
                    put = live.get(unit["document_id"])
                    if put is None or unit["text"] not in put.text or unit["title"] != put.title:
                        failures.append(f"unit of {unit['document_id']} not as at rev {revision}")
            continue
        checked["rankings" if read.kind == "rank" else "by_id"] += 1
        if read.kind == "by_id" and read.doc_id not in live:
            failures.append(f"by_id {read.doc_id}: 200 at revision {revision}, where it is absent")
        ranked = {
            h["document_id"]: h
            for h in read.body["results"]
            if h["document_id"][0] == "w" and "-" in h["document_id"]
        }
        expected = set(live) - {read.doc_id}
        if set(ranked) != expected:
            failures.append(
                f"{read.kind} at revision {revision} ranked writers' documents {sorted(ranked)}, "
                f"live then: {sorted(expected)}"
            )
            continue
        for doc_id, hit in ranked.items():
            put = live[doc_id]
            if hit["title"] != put.title:
                failures.append(
                    f"{doc_id}: title {hit['title']!r} at revision {revision}, "
                    f"{put.title!r} expected"
                )
            for match in hit["matches"]:
                checked["hit_texts"] += 1
                if match["target_text"] not in put.text:
                    failures.append(
                        f"{doc_id}: a matched paragraph not in its text at rev "
                        f"{revision}: {match['target_text']!r}"
                    )
    assert not failures, f"{len(failures)} failures, e.g.:\n" + "\n".join(failures[:15])
    return checked


def run_schedule(
    url: str, *, readers: int, writers: int, seconds: float, seed: int
) -> tuple[Log, dict[str, int]]:
    log = Log()
    until = time.monotonic() + seconds
    writer_ids = [f"w{w}-{j}" for w in range(writers) for j in range(IDS_PER_WRITER)]
    threads: list[threading.Thread] = []
    targets: list[tuple[Callable[..., None], tuple[Any, ...]]] = [
        (_writer, (url, w, seed * 1000 + w, until, log)) for w in range(writers)
    ] + [(_reader, (url, seed * 1000 + 500 + r, until, writer_ids, log)) for r in range(readers)]
    for target, args in targets:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join(seconds + 300)
    checked = check(log)
    print(  # the counts the note reports
        f"concurrent use: {len(log.reads)} reads, {len(log.ops)} acknowledged changes, "
        f"{log.retried} retried after 429, checked {checked}"
    )
    return log, checked


def _settings(fresh_settings: Callable[..., ServiceSettings]) -> ServiceSettings:
    return fresh_settings(embedded_worker=False)


@pytest.mark.long
@pytest.mark.parametrize(
    "weighting",
    # rarity changes the ranking, not the SQL: its PostgreSQL run is in `make test-slow`
    ["uniform", pytest.param("rarity", marks=pytest.mark.heavy_sql)],
)
def test_concurrent_readers_and_writers_see_one_snapshot_each(
    fresh_settings: Callable[..., ServiceSettings], weighting: str
) -> None:
    """Also with query-sentence weights (`sdr` and `maxsim` then search the sentence level of
    each live version for them, and keep them per query)."""
    settings = _settings(fresh_settings)
    search = settings.search.model_copy(update={"query_weighting": weighting})
    with live_server(settings.model_copy(update={"search": search})) as url:
        log, checked = run_schedule(url, readers=6, writers=3, seconds=12, seed=26)
    assert len(log.ops) >= 10 and checked["rankings"] >= 10 and checked["hit_texts"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_concurrent_readers_and_writers_long(
    fresh_settings: Callable[..., ServiceSettings], seed: int
) -> None:
    with live_server(_settings(fresh_settings)) as url:
        log, _ = run_schedule(url, readers=8, writers=4, seconds=60, seed=seed)
    assert len(log.ops) >= 50
