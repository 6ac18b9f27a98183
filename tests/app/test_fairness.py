"""Fair search slots (`app.services.fairness`): young searches first come first served, old
ones yielding to them at each encoder batch, and deadlines that free the slot. The live
server's figures are in benchmarks/abuse.py and tests/app/test_abuse_slow.py."""

from __future__ import annotations

import threading
import time

import pytest

from docsim.app.core.errors import SearchDeadlineError
from docsim.app.services import fairness
from docsim.app.services.fairness import FairSlots

pytestmark = pytest.mark.no_sql


def test_young_searches_take_free_slots_first_come_first_served() -> None:
    slots = FairSlots(1, fair_share_seconds=60, deadline_seconds=60)
    order: list[int] = []

    def search(n: int) -> None:
        with slots.slot():
            order.append(n)

    with slots.slot():  # holds the one slot while the others queue, in a known order
        threads = []
        for n in range(5):
            threads.append(threading.Thread(target=search, args=(n,)))
            threads[-1].start()
            while len(slots._queue) < n + 1:  # queued before the next one starts
                time.sleep(0.001)
    for thread in threads:
        thread.join(timeout=10)
    assert order == [0, 1, 2, 3, 4]


def test_an_old_search_gives_its_slot_to_a_young_one_and_waits_for_idle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fairness, "IDLE_SECONDS", 0.0)
    slots = FairSlots(1, fair_share_seconds=1e-6, deadline_seconds=60)
    events: list[str] = []
    young_waiting = threading.Event()

    def young() -> None:
        young_waiting.set()
        with slots.slot():
            events.append("young ran")

    with slots.slot() as ticket:
        slots.pace(ticket, 8)  # its first batch: young still
        time.sleep(0.001)
        thread = threading.Thread(target=young)
        thread.start()
        young_waiting.wait(10)
        while slots._young < 2:
            time.sleep(0.001)
        slots.pace(ticket, 8)  # old now: the young one runs before this batch starts
        events.append("old batch")
        assert ticket.holding and not ticket.young
    thread.join(timeout=10)
    assert events == ["young ran", "old batch"]
    assert slots._free == 1 and slots._young == 0


def test_a_search_past_its_deadline_stops_at_its_next_batch_and_frees_its_slot() -> None:
    slots = FairSlots(1, fair_share_seconds=60, deadline_seconds=0.05)
    with pytest.raises(SearchDeadlineError, match="DOCSIM_API__SEARCH_DEADLINE_SECONDS"):
        with slots.slot() as ticket:
            slots.pace(ticket, 8)
            time.sleep(0.06)
            slots.pace(ticket, 8)
    assert slots._free == 1 and slots._young == 0
    with slots.slot() as ticket:  # the slot is free again at once
        assert ticket.holding


def test_a_search_waiting_past_its_deadline_for_a_slot_is_refused() -> None:
    slots = FairSlots(1, fair_share_seconds=60, deadline_seconds=0.05)
    refused: list[BaseException] = []

    def late() -> None:
        try:
            with slots.slot():
                pass
        except SearchDeadlineError as error:
            refused.append(error)

    with slots.slot():
        thread = threading.Thread(target=late)
        thread.start()
        thread.join(timeout=10)
    assert len(refused) == 1 and slots._free == 1 and slots._young == 0 and not slots._queue


def test_a_write_waits_for_young_searches_once_old_and_stops_at_its_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A write holds no slot: young, it goes on; old, before each batch it waits while a young
    search holds or awaits a slot, goes on once they leave, and raises past its deadline."""
    monkeypatch.setattr(fairness, "IDLE_SECONDS", 0.0)
    slots = FairSlots(1, fair_share_seconds=30, deadline_seconds=60)
    old = time.monotonic() - 60  # working for longer than its fair share
    slots.yield_to_young(time.monotonic() + 10, "write", old)  # nothing young: no wait
    events: list[str] = []
    with slots.slot():  # a young search
        slots.yield_to_young(time.monotonic() + 10, "write", time.monotonic())  # young: no wait
        writer = threading.Thread(
            target=lambda: (
                slots.yield_to_young(time.monotonic() + 10, "w", old),
                events.append("w"),
            )
        )
        writer.start()
        time.sleep(0.2)
        assert events == []  # waiting for the young search
        with pytest.raises(SearchDeadlineError, match="the write ran past"):
            slots.yield_to_young(time.monotonic() + 0.05, "the write ran past", old)
        events.append("search done")
    writer.join(10)
    assert events == ["search done", "w"]


def test_a_request_may_have_a_shorter_fair_share_of_its_own() -> None:
    """An upload's search (`upload_fair_share_seconds`) grows old sooner than the slots'."""
    slots = FairSlots(1, fair_share_seconds=60, deadline_seconds=60)
    for share in (None, 1e-6):
        with slots.slot() as ticket:
            ticket.fair_share = share
            slots.pace(ticket, 1)
            time.sleep(0.01)
            slots.pace(ticket, 1)  # nothing young waits: it goes on, old or young
            assert ticket.young == (share is None)
