"""Where rendering is needed, learned per host and page template, shared by
the fleet in one Redis hash per crawl, ``cp:{C}:render`` (its fields are
documented in crawlproject/frontier/store/keys.py):

* ``t|<host>|<template>``: ``js:<k>`` (rendering changed its last page; ``k``
  renders since that changed nothing) or ``static``;
* ``h|<host>``: ``js`` once any template of the host needs rendering, else
  ``static`` once one was learned;

A page whose raw HTML has no script is never rendered and costs no Redis call.
Otherwise (``CRAWL_RENDER = "auto"``):

* a ``js`` template is rendered; ``JS_TO_STATIC`` renders in a row that change
  nothing make it ``static`` again;
* a ``static`` template is rendered once in ``CRAWL_RENDER_SAMPLE_EVERY`` of
  a worker's pages (a re-check: a site that changes is noticed);
* an unknown template is rendered to learn when its host has nothing learned
  yet or its raw page is a shell (little text, next to no links); otherwise it
  is taken as static like the host's others, and sampled as they are.

Each render compares the DOM with the raw answer the browser was given and
writes what it learned before the page's download ends (so before its host's
next page is claimed, by any worker). Each worker trusts a state it read or
wrote for ``CACHE_SECONDS``: a static page costs no Redis call then.
"""

from __future__ import annotations

import enum
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from redis.asyncio import Redis

from crawlproject.render.compare import Difference, PageContent

JS_TO_STATIC = 2
CACHE_SECONDS = 10.0  # how long a worker trusts a state it read or wrote
CACHE_MAX = 10_000  # states (and sampling counters) a worker keeps
STATIC = "static"
JS = "js"


class Why(enum.Enum):
    """Why a page is rendered or not (the stat ``render/why/<value>``)."""

    FORCED = "forced"  # meta render / playwright, or CRAWL_RENDER = "always"
    JS = "js"  # its template needs rendering
    SAMPLE = "sample"  # a static template's re-check
    LEARN = "learn"  # an unknown template
    STATIC = "static"  # a static template
    NO_SCRIPT = "no_script"  # the raw document has no script
    ENCODING = "encoding"  # its Content-Encoding not decoded here (br, zstd), or too large
    NEVER = "never"  # CRAWL_RENDER = "never"
    REDIS_ERROR = "redis_error"  # the fleet's decisions could not be read
    NO_BROWSER = "no_browser"  # no browser on this worker


RENDERED = frozenset({Why.FORCED, Why.JS, Why.SAMPLE, Why.LEARN})


@dataclass(frozen=True, slots=True)
class Verdict:
    why: Why
    prior: str | None  # the template's state when decided

    @property
    def render(self) -> bool:
        return self.why in RENDERED


class RenderLearning:
    """The fleet's decisions, with a small per-worker cache in front: a page
    of a static template costs no Redis call while its state is fresh here
    (``CACHE_SECONDS``); sampling counts this worker's pages."""

    def __init__(self, redis: Redis, key: str, sample_every: int) -> None:
        self.redis = redis
        self.key = key
        self.sample_every = sample_every
        self._cache: OrderedDict[str, tuple[float, str | None]] = OrderedDict()
        self._seen: OrderedDict[str, int] = OrderedDict()

    async def _states(self, t_field: str, h_field: str) -> tuple[str | None, str | None]:
        now = time.monotonic()
        cached_t, cached_h = self._cache.get(t_field), self._cache.get(h_field)
        if cached_t and cached_h and cached_t[0] > now and cached_h[0] > now:
            return cached_t[1], cached_h[1]
        raw_t, raw_h = await self.redis.hmget(self.key, [t_field, h_field])
        t = raw_t.decode() if isinstance(raw_t, bytes) else None
        h = raw_h.decode() if isinstance(raw_h, bytes) else None
        self._remember(t_field, t)
        self._remember(h_field, h)
        return t, h

    def _remember(self, field: str, state: str | None) -> None:
        if state is None:  # unknown: asked again (another worker may learn it now)
            return
        self._cache[field] = (time.monotonic() + CACHE_SECONDS, state)
        self._cache.move_to_end(field)
        while len(self._cache) > CACHE_MAX:
            self._cache.popitem(last=False)

    async def decide(self, host: str, template: str, raw: Callable[[], PageContent]) -> Verdict:
        """``raw``: the raw page's content, computed only if needed."""
        t_field = f"t|{host}|{template}"
        prior, host_state = await self._states(t_field, f"h|{host}")
        if prior is not None and prior.startswith(JS):
            return Verdict(Why.JS, prior)
        if prior is None:
            if host_state is None or raw().is_shell:
                return Verdict(Why.LEARN, prior)
            # Taken as static, like the host's other pages; sampled as they are.
            await self.redis.hsetnx(self.key, t_field, STATIC)
            self._remember(t_field, STATIC)
        seen = self._seen.get(t_field, 0) + 1
        self._seen[t_field] = seen
        self._seen.move_to_end(t_field)
        while len(self._seen) > CACHE_MAX:
            self._seen.popitem(last=False)
        if self.sample_every and seen % self.sample_every == 0:
            return Verdict(Why.SAMPLE, prior or STATIC)
        return Verdict(Why.STATIC, prior or STATIC)

    async def must_render(self, host: str, template: str) -> bool:
        """Before a page is fetched (a worker without a browser asks): its
        template needs rendering, or is unknown on a host some of whose
        templates do (a worker with a browser would render it to learn)."""
        prior, host_state = await self._states(f"t|{host}|{template}", f"h|{host}")
        if prior is not None:
            return prior.startswith(JS)
        return host_state == JS

    async def learn(self, host: str, template: str, prior: str | None, diff: Difference) -> str:
        """Writes what one render showed; returns the template's new state."""
        t_field, h_field = f"t|{host}|{template}", f"h|{host}"
        if diff.matters:
            state = f"{JS}:0"
            await self.redis.hset(self.key, mapping={t_field: state, h_field: JS})
            self._remember(t_field, state)
            self._remember(h_field, JS)
            return state
        state = STATIC
        if prior is not None and prior.startswith(JS):
            unchanged = int(prior.partition(":")[2] or 0) + 1
            state = STATIC if unchanged >= JS_TO_STATIC else f"{JS}:{unchanged}"
        await self.redis.hset(self.key, t_field, state)
        await self.redis.hsetnx(self.key, h_field, STATIC)
        self._remember(t_field, state)
        self._cache.pop(h_field, None)  # read again: another template may have made it js
        return state
