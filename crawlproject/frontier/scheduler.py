"""``SCHEDULER = "crawlproject.frontier.scheduler.FrontierScheduler"``: the
documented path of the frontier scheduler (users' settings, Scrapyd-deployed
projects), kept working; the module is
:mod:`crawlproject.frontier.scrapy_glue.scheduler`."""

from crawlproject.frontier.scrapy_glue.scheduler import FrontierScheduler

__all__ = ["FrontierScheduler"]
