"""A frontier-only crawl of a synthetic link graph, one claim at a time, on
the frontier's real Lua scripts: what tests/test_frontier_priority.py asserts
on and bench/aopic_order.py prints (AOPIC against depth order)."""

from __future__ import annotations

from crawlproject.frontier.store.redis_frontier import Lease, NewEntry, RedisFrontier
from testkit.entries import CODEC
from testkit.entries import entry as make_entry


def entry(
    url: str, score: float = 0.0, dont_filter: bool = False, credit_only: bool = False
) -> NewEntry:
    """As the scheduler makes it, with its URL shape (the per-shape cap's)."""
    return make_entry(url, score, dont_filter=dont_filter, credit_only=credit_only, pattern=True)


async def claim_one(f: RedisFrontier) -> tuple[Lease, str, float | None] | None:
    batch = await f.claim(0, 1, "w")
    if not batch.items:
        return None
    lease, data = batch.items[0]
    return lease, CODEC.decode(data, None).url, batch.shares[0] if batch.shares else None


class SyntheticWeb:
    """A link graph for a frontier-only crawl: 30 hosts of 20 pages (page k
    links to k+1 and k+2; each home also links to one page of host pop.test
    that nothing else links to), and a bot trap whose every page links to 5
    freshly minted URLs."""

    HOSTS = 30
    PAGES = 20
    POPULAR = "http://pop.test/deep/popular"

    def __init__(self) -> None:
        self.minted = 0

    def seeds(self) -> list[str]:
        hosts = [f"http://h{i}.test" for i in range(self.HOSTS)] + ["http://pop.test"]
        return [f"{h}/0" for h in hosts] + ["http://trap.test/"]

    def links(self, url: str) -> list[str]:
        if url.startswith("http://trap.test/"):
            self.minted += 5
            return [f"http://trap.test/m/{self.minted - i}" for i in range(5)]
        if url == self.POPULAR:
            return []
        base, _, page = url.rpartition("/")
        k = int(page)
        out = [f"{base}/{j}" for j in (k + 1, k + 2) if j < self.PAGES]
        if k == 0 and not base.endswith("pop.test"):
            out.append(self.POPULAR)
        return out

    def pages(self) -> int:
        return (self.HOSTS + 1) * self.PAGES + 1  # + the popular page


async def simulated_crawl(f: RedisFrontier, claims: int) -> list[str]:
    """Claims one URL at a time, 'fetches' it from the graph, adds its links
    (each with the page's share / n in credit mode; depth score otherwise)."""
    web = SyntheticWeb()
    depth = {u: 0 for u in web.seeds()}
    await f.add([entry(u, 1.0 if f.priority_mode == "credit" else 0) for u in web.seeds()])
    order: list[str] = []
    empty = 0
    while len(order) < claims:
        got = await claim_one(f)
        if got is None:
            # A claim can come back empty when its first candidates held only
            # stale entries (they leave `due`); the worker simply claims again.
            empty += 1
            if empty > 10:
                break
            continue
        empty = 0
        lease, url, share = got
        order.append(url)
        links = web.links(url)
        for link in links:
            depth.setdefault(link, depth[url] + 1)
        entries = [
            entry(link, share / len(links) if share is not None else depth[link]) for link in links
        ]
        if entries:
            await f.add(entries)
        await f.ack([lease])
    return order
