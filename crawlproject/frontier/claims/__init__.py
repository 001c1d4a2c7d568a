"""Claims and politeness: when a worker asks the frontier for URLs, the lease
book of what it holds (renewed, acknowledged, released), a host's slot and
the place at its IP address (politeness per server), and what an HTTP answer
says about when its host may be asked again.

May use: ``crawl``, ``store``, ``connection`` and ``basics``.
"""
