"""The Redis connection: the frontier's client from ``REDIS_URL`` (one server
or a Redis Cluster, ``redis_client``), riding through a Redis that is briefly
away (``outage``), the embedded Redis of crawls run without ``REDIS_URL``
(``embedded``), and what a cluster lacks for a crawl that survives a master's
death (``cluster_check``).

May use: redis-py and crawlproject's bottom layers (settings values,
security); no other room of the frontier.
"""
