"""Where rendering is needed, learned per host and page template, shared by
the fleet in one Redis hash per crawl, ``cp:{C}:render`` (its fields are
documented in crawlproject/frontier/keys.py):

* ``t|<host>|<template>``: ``js:<k>`` (rendering changed its last page; ``k``
  renders since that changed nothing) or ``static``;
* ``h|<host>``: ``js`` once any template of the host needs rendering, else
  ``static`` once one was learned;
* ``n|<host>|<template>``: pages of a static template seen, for sampling.

A page whose raw HTML has no script is never rendered and costs no Redis call.
Otherwise (``CRAWL_RENDER = "auto"``):

* a ``js`` template is rendered; ``JS_TO_STATIC`` renders in a row that change
  nothing make it ``static`` again;
* a ``static`` template is rendered once in ``CRAWL_RENDER_SAMPLE_EVERY`` pages
  (a re-check: a site that changes is noticed);
* an unknown template is rendered to learn when its host has nothing learned
  yet or its raw page is a shell (little text, next to no links); otherwise it
  is taken as static like the host's others, and sampled as they are.

Each render compares the DOM with the raw answer the browser was given and
writes what it learned before the page's download ends (so before its host's
next page is claimed, by any worker).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from redis.asyncio import Redis

from crawlproject.render.compare import Difference, PageContent

JS_TO_STATIC = 2
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
    NEVER = "never"  # CRAWL_RENDER = "never"
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
    def __init__(self, redis: Redis, key: str, sample_every: int) -> None:
        self.redis = redis
        self.key = key
        self.sample_every = sample_every

    async def decide(self, host: str, template: str, raw: PageContent) -> Verdict:
        t_field = f"t|{host}|{template}"
        state, host_state = await self.redis.hmget(self.key, [t_field, f"h|{host}"])
        prior = state.decode() if isinstance(state, bytes) else None
        if prior is not None and prior.startswith(JS):
            return Verdict(Why.JS, prior)
        if prior is None:
            if host_state is None or raw.is_shell:
                return Verdict(Why.LEARN, prior)
            # Taken as static, like the host's other pages; sampled as they are.
            await self.redis.hsetnx(self.key, t_field, STATIC)
        seen = await self.redis.hincrby(self.key, f"n|{host}|{template}", 1)
        if self.sample_every and seen % self.sample_every == 0:
            return Verdict(Why.SAMPLE, prior or STATIC)
        return Verdict(Why.STATIC, prior or STATIC)

    async def learn(self, host: str, template: str, prior: str | None, diff: Difference) -> str:
        """Writes what one render showed; returns the template's new state."""
        if diff.matters:
            state = f"{JS}:0"
            await self.redis.hset(
                self.key, mapping={f"t|{host}|{template}": state, f"h|{host}": JS}
            )
            return state
        state = STATIC
        if prior is not None and prior.startswith(JS):
            unchanged = int(prior.partition(":")[2] or 0) + 1
            state = STATIC if unchanged >= JS_TO_STATIC else f"{JS}:{unchanged}"
        await self.redis.hset(self.key, f"t|{host}|{template}", state)
        await self.redis.hsetnx(self.key, f"h|{host}", STATIC)
        return state
