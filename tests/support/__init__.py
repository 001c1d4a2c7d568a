"""Test infrastructure: a synthetic loopback web, a real Redis server, crawl subprocesses."""
