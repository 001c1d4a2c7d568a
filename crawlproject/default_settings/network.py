"""DNS, the private-address guard and politeness per server (IP address)."""

# DNS (crawlproject/dns/resolver.py as TWISTED_DNS_RESOLVER, middlewares/dns.py).
# Scrapy's resolver keeps 10,000 names per process for ever and forgets failures,
# so each URL of a dead host costs a system lookup (a thread of the reactor's
# pool, up to DNS_TIMEOUT). Resolved names kept per worker, and for how long
# (the system call gives no TTL); about 240 bytes each (~24 MB at the default).
# DNSCACHE_ENABLED = False turns both caches off; Scrapy's DNSCACHE_SIZE, when
# set, is used instead of this (both set and different: refused at start).
CRAWL_DNS_CACHE_SIZE = 100_000
CRAWL_DNS_CACHE_TTL_SECONDS = 3600.0
# Failed names kept per worker (about 240 bytes each), and for how long:
# meanwhile a lookup of one fails at once, without asking the system resolver.
# 0: failures not cached.
CRAWL_DNS_NEGATIVE_CACHE_SIZE = 50_000
CRAWL_DNS_NEGATIVE_TTL_SECONDS = 300.0
# A host (politeness key) whose last this many fetches in a row failed for good
# because its name does not exist (after Scrapy's retries; robots.txt fetches
# count) gets its queued URLs set aside in the frontier ("parked", like a trap
# host: see `crawlproject parked [--requeue]`); a response resets the count.
# Lookups that got no answer (SERVFAIL, timeouts) never park. 0: never.
CRAWL_DNS_PARK_AFTER = 3
# The same for a host whose connections are refused or time out (after Scrapy's
# retries), parked with the reason connection_refused or timeout; with
# robots.txt obeyed such a host is usually set aside on its robots.txt failures
# first (CRAWL_ROBOTS_DEFER_RETRIES). 0: never.
CRAWL_CONNECT_PARK_AFTER = 3

# Private-address guard against SSRF (crawlproject/guard/, middlewares/guard.py):
# requests (every redirect hop and robots.txt fetch too) to loopback, private,
# link-local, multicast, reserved and other non-public addresses are refused,
# IP literals before the download, host names on the address they resolve to
# (stat guard/blocked). CRAWL_GUARD_ALLOW lets some through: networks in CIDR
# form ("10.1.0.0/16", "127.0.0.1") and host names, exact ("intranet.example")
# or by suffix ("*.corp.example"); an invalid entry stops the worker at start.
# Crawling a web on loopback (tests, ./run demo) needs "127.0.0.0/8".
CRAWL_GUARD_ENABLED = True
CRAWL_GUARD_ALLOW: list[str] = []

# Politeness per server (crawlproject/frontier/crawl/address_settings.py, docs/frontier.md):
# every name of one machine counts against it. A claimed URL needs its host
# slot and a place at the IP address its host resolves to: at most this many
# requests in flight per address, fleet-wide (0: no address cap). Hosts that
# find their address full wait their turn, first come first served. With
# CRAWL_POLITENESS_KEY = "address" the address is the politeness slot itself
# (CRAWL_HOST_CONCURRENCY places, CRAWL_HOST_DELAY apart): leave this unset.
CRAWL_ADDRESS_CONCURRENCY = 4
# Networks with their own cap (CIDR -> places, or None / "none" for no cap):
# a CDN or a large hoster answers for much of the web from a few addresses, so
# one cap for all of it would crawl every site behind it through a few
# sockets. {"104.16.0.0/13": None, "192.0.2.0/24": 16}; the most specific
# network wins.
CRAWL_ADDRESS_OVERRIDES: dict[str, int | None] = {}
# Host names resolved by this map instead of DNS (name -> IP address), by the
# resolver (crawlproject/dns/resolver.py) and so by the address cap: pins a
# host to one address ("www.example.com": "192.0.2.7"); the tests put many
# names on one loopback address with it. The address guard still applies.
CRAWL_HOST_ADDRESSES: dict[str, str] = {}
