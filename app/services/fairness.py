"""Search slots shared so that no caller can stall the others.

`max_concurrent_searches` slots bound the searches and explanations computed at once. Within
them, long work yields to short, as in a multilevel feedback queue: a request is *young*
until it has been working for `fair_share_seconds` (from its first batch of work: a posted
AILA judgment takes 0.05 s to encode alone), and *old* after. Before each batch of work
(`models.inference.pacing`: each encoder batch, each block of a sentence or paragraph pass, every
few thousand BM25 query tokens), an old request that sees young requests running or waiting, or
saw some within the last `IDLE_SECONDS`, gives its slot back and waits until the young have
left the slots idle that long, then takes a slot again. (Without the idle time, it would slip
a batch into every gap between the requests of clients that query in a loop.) So a caller
that posts the largest documents the limits allow, over and over, is served from the time
ordinary callers leave idle, not from theirs.

Every request also has a deadline (`search_deadline_seconds` from its start): a batch of work
that would start past it stops the request with `SearchDeadlineError` (503 and Retry-After),
and its slot goes to the next. An old request starved by a steady stream of young ones meets
its deadline that way: under that load, the server answers it 503 rather than slow everyone.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from docsim.app.core.errors import SearchDeadlineError

IDLE_SECONDS = 0.25  # how long no young request must have held or awaited a slot


@dataclass
class Ticket:
    """One request's place: when it began working and the rows it worked on, whether it
    holds a slot."""

    deadline: float  # time.monotonic()
    rows: int = 0
    encoding_since: float | None = None
    young: bool = True
    holding: bool = False
    fair_share: float | None = None  # seconds young: this request's own, else the slots'
    started: float = field(default_factory=time.monotonic)


class FairSlots:
    """`slots` search slots, young requests first (see the module)."""

    def __init__(self, slots: int, fair_share_seconds: float, deadline_seconds: float) -> None:
        self.slots = slots
        self.fair_share_seconds = fair_share_seconds
        self.deadline_seconds = deadline_seconds
        self._changed = threading.Condition()
        self._free = slots
        self._young = 0  # young requests holding or waiting for a slot
        self._young_left = time.monotonic()  # when the last young one left
        self._queue: deque[Ticket] = deque()  # young requests waiting, first come first

    @contextlib.contextmanager
    def slot(self) -> Iterator[Ticket]:
        """Hold a slot for the block (a young request waits only for a free slot)."""
        ticket = Ticket(deadline=time.monotonic() + self.deadline_seconds)
        with self._changed:
            self._young += 1
            self._queue.append(ticket)
            try:
                self._take(ticket, wait_for_young=False)
            except BaseException:
                self._young -= 1
                self._changed.notify_all()
                raise
            finally:
                self._queue.remove(ticket)
        try:
            yield ticket
        finally:
            with self._changed:
                if ticket.young:
                    self._young -= 1
                    self._young_left = time.monotonic()
                if ticket.holding:
                    ticket.holding = False
                    self._free += 1
                self._changed.notify_all()

    def pace(self, ticket: Ticket, rows: int) -> None:
        """Before a batch of work on `rows` rows of `ticket`'s request: stop it past its
        deadline; once old, let the young go first.

        Raises:
            SearchDeadlineError: the request is past its deadline (503).
        """
        self._check_deadline(ticket)
        ticket.rows += rows
        now = time.monotonic()
        if ticket.encoding_since is None:
            ticket.encoding_since = now
        share = self.fair_share_seconds if ticket.fair_share is None else ticket.fair_share
        with self._changed:
            if ticket.young and now - ticket.encoding_since > share:
                ticket.young = False
                self._young -= 1
                self._changed.notify_all()
            if ticket.young or self._idle():
                return
            ticket.holding = False  # give the slot to the young, then wait for one again
            self._free += 1
            self._changed.notify_all()
            self._take(ticket, wait_for_young=True)

    def yield_to_young(self, deadline: float, what: str, working_since: float) -> None:
        """Before a batch of work that holds no slot (a write's encoding), working since
        `working_since`: young for `fair_share_seconds` as a search is, it goes on; old, it
        waits until no young request has held or awaited a slot for `IDLE_SECONDS`.

        Raises:
            SearchDeadlineError: `deadline` (time.monotonic()) passed; `what` says whose.
        """
        with self._changed:
            while True:
                now = time.monotonic()
                left = deadline - now
                if left <= 0:
                    raise SearchDeadlineError(what)
                if now - working_since <= self.fair_share_seconds or self._idle():
                    return
                self._changed.wait(timeout=min(left, IDLE_SECONDS))

    def _take(self, ticket: Ticket, *, wait_for_young: bool) -> None:
        """Take a slot (the caller holds `_changed`), waiting for a free one: a young request
        in its turn (first come, first served), an old one until the young have left the
        slots idle (`wait_for_young`)."""
        while self._free == 0 or (
            not self._idle() if wait_for_young else self._queue[0] is not ticket
        ):
            left = ticket.deadline - time.monotonic()
            if left <= 0:
                self._check_deadline(ticket)
            self._changed.wait(timeout=min(left, IDLE_SECONDS))
        self._free -= 1
        ticket.holding = True
        if self._free > 0:
            self._changed.notify_all()  # the next in line may take one too

    def _idle(self) -> bool:
        """Whether no young request holds or awaits a slot, nor did for `IDLE_SECONDS`."""
        return self._young == 0 and time.monotonic() - self._young_left >= IDLE_SECONDS

    def _check_deadline(self, ticket: Ticket) -> None:
        if time.monotonic() >= ticket.deadline:
            raise SearchDeadlineError(
                f"the search ran past its deadline of {self.deadline_seconds:g} s "
                f"(DOCSIM_API__SEARCH_DEADLINE_SECONDS) after {ticket.rows:,} rows of work "
                "(sentences encoded, compared or scored); retry when the server is less busy, "
                "or send a shorter document"
            )
