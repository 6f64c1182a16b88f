"""One claimed page's deletes in flight while the engine finalizes the one before."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

from retention.engine.claims import Claim
from retention.engine.disposal import Disposer
from retention.engine.events import ClaimOutcome
from retention.engine.finalize import finalize
from retention.engine.pacing import RateGate
from retention.engine.page import dispose
from retention.storage import KeyResult

Clock = Callable[[], datetime]
PageDone = Callable[[Claim, ClaimOutcome], None]


@dataclass
class InFlight:
    claim: Claim
    deleting: Future[dict[int, KeyResult]]
    max_attempts: int


class Overlap:
    """One claimed page's deletes in flight while the engine writes the last one.

    Deleting a page is network time and finalizing the one before is
    database time: on a thread-safe adapter with no rate to keep, the two
    overlap. Pages are still finalized one by one, in claim order, on the
    engine's thread and its connection; the delete thread never touches the
    database.
    """

    def __init__(self, clock: Clock, on_page: PageDone) -> None:
        self.clock = clock
        self.on_page = on_page
        self.in_flight: InFlight | None = None
        self.executor: ThreadPoolExecutor | None = None

    def submit(
        self, claim: Claim, disposer: Disposer, gate: RateGate, *, max_attempts: int
    ) -> None:
        # The inline claim was the re-check: its items go to storage as they are.
        assert claim.rechecked
        if self.executor is None:
            self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="retention-delete")
        deleting = self.executor.submit(dispose, claim.items, disposer, gate)
        self.settle()
        self.in_flight = InFlight(claim, deleting, max_attempts)

    def settle(self) -> None:
        """Finalize the page in flight, if any (re-raises its delete's error)."""
        if self.in_flight is None:
            return
        page, self.in_flight = self.in_flight, None
        results = page.deleting.result()
        outcome = finalize(
            page.claim, page.claim.items, results, max_attempts=page.max_attempts, now=self.clock()
        )
        self.on_page(page.claim, outcome)

    def close(self) -> None:
        # Only on failure is a page still in flight here: it keeps its lease
        # and its disposal mark, so the next claimer probes it. A delete not
        # started yet is dropped; one under way is waited for, so no request
        # outlives the run.
        if self.executor is not None:
            self.executor.shutdown(wait=True, cancel_futures=True)
