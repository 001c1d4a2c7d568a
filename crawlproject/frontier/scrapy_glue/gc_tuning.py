"""The cyclic garbage collector of a worker process, tuned for a long crawl.

Python collects its youngest generation every 700 allocations of container
objects and, every hundred such collections, the whole heap. A crawl
allocates a great many short-lived containers per page (requests, responses,
parse trees, futures), and a worker's heap is large and long-lived (Scrapy,
lxml, numpy, the modules, and the bounded caches of links, fingerprints,
robots.txt rules and DNS answers), so each full collection walks it all:
measured on the CPU-bound benchmark, 0.7-0.8 ms of a worker's ~5 ms per page
went to the collector (bench/crawl_rate.py; BENCHMARKS.md).

When the frontier opens (``CRAWL_GC_THRESHOLD`` > 0), :func:`tune_gc`

* collects once, then freezes what the worker built at start-up
  (``gc.freeze``): those objects stay (they are not garbage) but no later
  collection walks them again;
* collects the youngest generation every ``CRAWL_GC_THRESHOLD`` allocations
  instead of 700: the same garbage is found, in fewer, larger passes, and the
  whole heap is walked a fraction as often.

Nothing is leaked: objects are still freed by reference counting as soon as
they are unreachable, and garbage cycles are still collected, a little later.
``CRAWL_GC_THRESHOLD = 0`` leaves Python's defaults.
"""

from __future__ import annotations

import gc
import logging

logger = logging.getLogger(__name__)

PYTHON_DEFAULT_THRESHOLD = 700
_tuned = False  # once per process: a second crawl in it (tests) changes nothing


def tune_gc(threshold: int) -> bool:
    """Freezes the start-up heap and sets the youngest generation's threshold;
    False (nothing changed) when ``threshold`` is 0 or it was done already."""
    global _tuned
    if threshold <= 0 or _tuned:
        return False
    _tuned = True
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(threshold, older, oldest)
    logger.debug(
        "GC: %d start-up objects frozen; young generation collected every %d allocations",
        gc.get_freeze_count(),
        threshold,
    )
    return True
