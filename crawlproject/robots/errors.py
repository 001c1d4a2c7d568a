"""How the robots.txt middleware (middlewares/robotstxt.py) says a claimed URL
is not fetched now: IgnoreRequests, counted by class name by the spider's
errback (``web/error/<name>``; the status page does not count the first two as
errors)."""

from __future__ import annotations

from scrapy.exceptions import IgnoreRequest


class RobotsForbidden(IgnoreRequest):
    """robots.txt disallows the URL."""


class RobotsDeferred(IgnoreRequest):
    """The URL went back to the frontier (its slot fetched robots.txt, or the
    host's robots.txt is unreachable for now); it is fetched later."""


class RobotsUnreachable(IgnoreRequest):
    """The host's robots.txt failed too often: the URL is not fetched."""
