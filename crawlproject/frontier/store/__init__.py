"""The frontier's data in Redis: every key (``keys`` and its bases), the
Lua scripts (``lua/``) and the operations that run them (``redis_frontier``:
add, claim, ack, release, renew), the values they take and return
(``operation_values``, ``script_replies``), the request codec, the seen set,
the crawl's fixed layout, budgets, parked URLs, the outbox that writes a
worker's adds and acks in order, and the replay of recent adds after a
failover.

May use: ``basics`` and ``connection``.
"""
