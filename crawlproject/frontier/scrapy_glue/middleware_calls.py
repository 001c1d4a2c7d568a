"""What the middlewares call on the frontier scheduler: links known here
(middlewares/known_links.py), AOPIC credit, recrawl fetch states, politeness
keys. Thin calls into admission and the outbox, kept apart from scheduler.py,
which wires the parts together and runs the loops."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy import Request

from crawlproject.recrawl.store import StateWrite

if TYPE_CHECKING:
    from crawlproject.frontier.admission.admission import Admission
    from crawlproject.frontier.store.outbox import Outbox


class MiddlewareCalls:
    """A base of :class:`crawlproject.frontier.scrapy_glue.scheduler.FrontierScheduler`."""

    admission: Admission
    outbox: Outbox
    _known_hits: int  # links known_link finished since the last write

    def known_link(self, request: Request, depth: int, source: str | None) -> bool:
        """Whether ``request``, a link a page of host ``source`` yielded at
        ``depth``, is one this worker took before under the same string
        (admission.py): then it is finished here, as ``enqueue_request`` would
        finish it (counted as a local seen hit; a vote or token shape it
        carries still goes out), and the caller drops it
        (middlewares/known_links.py)."""
        verdict = self.admission.known_link(request, depth, source)
        if verdict is None:
            return False
        self._known_hits += 1
        if verdict.votes is not None:
            self.outbox.add(verdict.votes, flush=False)
        return True

    def give_credit(self, request: Request, credit: float) -> None:
        """AOPIC: adds ``credit`` to ``request``'s URL if it is queued, else to
        the lambda cash (a page with no links gives its credit to all)."""
        located = self.admission.locate(request.url, request.method, request.body)
        if located is not None:
            self.outbox.credit(*located, credit)

    def track_fetch(self, url: str, state: str | None, due_s: int) -> None:
        """Records ``url``'s fetch state (text, crawlproject/recrawl/schedule.py)
        and next due time, or forgets it (``state`` None), with the next write:
        before the acks of the URLs whose outcome it records."""
        located = self.admission.locate(url)
        if located is not None:
            self.outbox.track(StateWrite(*located, state, due_s))

    def politeness_key(self, url: str) -> str:
        """The frontier's politeness key (host or registered domain) of ``url``."""
        return self.admission.politeness_key(url)
