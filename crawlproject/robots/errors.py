"""How the robots.txt middleware (middlewares/robotstxt.py) says a claimed URL
is not fetched now: IgnoreRequests carrying what the frontier's lease path does
with the URL (:class:`~crawlproject.frontier.basics.outcomes.NotFetched`: requeue it,
or free its slot unfetched), counted by class name by the spider's errback
(``web/error/<name>``; the status page does not count the first two as errors)."""

from __future__ import annotations

from crawlproject.frontier.basics.outcomes import NotFetched


class RobotsForbidden(NotFetched):
    """robots.txt disallows the URL."""


class RobotsDeferred(NotFetched):
    """The URL went back to the frontier (its slot fetched robots.txt, or the
    host's robots.txt is unreachable for now); it is fetched later."""


class RobotsUnreachable(NotFetched):
    """The host's robots.txt failed too often: the URL is not fetched."""
