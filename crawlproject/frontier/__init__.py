"""The Redis frontier, one room per stage of a URL's way through it
(docs/architecture.md walks it), each room a subpackage, lowest first:

* ``basics``: canonical URLs and politeness keys, request.meta keys, outcomes;
* ``connection``: the Redis client, riding through an outage, the embedded Redis;
* ``store``: the keys, the Lua scripts and their operations, codec, seen set, outbox;
* ``crawl``: one crawl as a whole: its name, its Redis, its settings, start over, end;
* ``admission`` | ``claims``: what goes in; leases, claims and politeness;
* ``scrapy_glue``: the scheduler Scrapy runs, add-ons, engine hooks, start and end.

``scheduler``, ``scrapy_politeness`` and ``outcomes`` here are the documented
paths users' settings and pipelines name (``SCHEDULER``, ``ADDONS``,
``ItemNotSaved``), kept working.
"""
