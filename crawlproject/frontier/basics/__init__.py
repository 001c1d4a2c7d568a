"""What every room of the frontier speaks: canonical URLs, their fingerprints
and politeness keys (``urls``), the request.meta keys the frontier reads and
writes (``request_meta``), and the outcomes a component reports back
(``outcomes``).

May use: Scrapy and w3lib only; nothing else of crawlproject.frontier (every
other room, the spiders and the middlewares import these).
"""
