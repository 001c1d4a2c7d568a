"""``from crawlproject.frontier.outcomes import ItemNotSaved`` (docs/extending.md):
the documented path of what a pipeline raises, kept working; the module is
:mod:`crawlproject.frontier.basics.outcomes`."""

from crawlproject.frontier.basics.outcomes import ItemNotSaved, NotFetched, Requeue

__all__ = ["ItemNotSaved", "NotFetched", "Requeue"]
