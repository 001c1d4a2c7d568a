"""robots.txt for the fleet: RFC 9309 rules, one fetch per host shared through Redis.

The downloader middleware that applies it is ``middlewares/robotstxt.py``.
"""
