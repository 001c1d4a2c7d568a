"""The private-address guard: no fetch reaches a loopback, private, link-local,
multicast or reserved address unless ``CRAWL_GUARD_ALLOW`` names it (see
:mod:`crawlproject.guard.policy`)."""
