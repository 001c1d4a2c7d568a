"""The worker's seen probe (crawlproject/frontier/seen_probe.py) on a real
redis-server: a stale table shape only misses, never invents a URL, and an
add that probes leaves Redis exactly as one that does not (queues, counters,
votes, token repeats, AOPIC credit)."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
import redis

from crawlproject.frontier.client import NewEntry, RedisFrontier
from crawlproject.frontier.entries import SEED_VOTE, HostBudget
from crawlproject.frontier.keys import CrawlKeys
from crawlproject.frontier.replies import reply_text
from crawlproject.frontier.seen import SeenFilter
from crawlproject.frontier.seen_probe import SeenProbe, address, member
from testkit.redis_server import RedisServer
from testkit.seen_table import SEEN_DRIVER
from tests.conftest import MakeFrontier

KEYS = CrawlKeys("t", 1)
PREFIX = KEYS.shard_prefixes[0]


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_server.url)
    yield c
    c.close()


def probe(client: redis.Redis, fps: list[bytes], shape: tuple[int, int]) -> list[bool]:
    """SISMEMBER of each fingerprint's bucket under ``shape``, as the worker asks."""
    pipe = client.pipeline(transaction=False)
    for fp in fps:
        pipe.sismember(KEYS.seen_bucket(0, address(fp, *shape)), str(member(fp)))
    return [bool(x) for x in pipe.execute()]


def test_a_stale_shape_only_misses(client: redis.Redis) -> None:
    """The real _seen.lua fills a table through two levels of splits; the
    shapes it had on the way, probed later, find only fingerprints that were
    added (no invented URL), the current shape finds all of them, and a shape
    a few splits old still finds most."""
    script = client.register_script(SEEN_DRIVER)
    spec = SeenFilter().script_arg(1)
    rng = random.Random(11)
    added: list[bytes] = []
    shapes: list[tuple[int, int]] = []
    for _ in range(24):
        batch = [rng.randbytes(8) for _ in range(40_000)]
        script(keys=[PREFIX + "ready"], args=[PREFIX, spec, *batch])
        added += batch
        level, split = client.hmget(KEYS.seen_state(0), "L", "s")
        shapes.append((int(level or 0), int(split or 0)))  # type: ignore[arg-type]
    assert shapes[0][0] == 11 and shapes[-1][0] >= 12  # the level grew: buckets split
    sample = rng.sample(added, 20_000)
    fresh = [rng.randbytes(8) for _ in range(20_000)]
    # One bit away from added fingerprints: same bucket prefix, other members.
    near = [bytes([fp[0] ^ 1]) + fp[1:] for fp in sample[:5000]]
    near += [fp[:7] + bytes([fp[7] ^ 0x80]) for fp in sample[:5000]]
    assert all(probe(client, sample, shapes[-1]))
    for shape in shapes:
        assert not any(probe(client, fresh + near, shape)), shape
    found = sum(probe(client, sample, shapes[-4]))
    assert 0.5 * len(sample) < found < len(sample)  # misses, but not all


def test_probe_pays_only_while_links_are_found() -> None:
    p = SeenProbe()
    assert p.due()
    p.judge(300, 10)  # few found: probing costs more than it saves
    assert not p.paying
    due = [p.due() for _ in range(64)]
    assert sum(due) == 4  # one add in PROBE_SAMPLE_EVERY (16) still probes
    p.judge(50, 40)  # repeats came back
    assert p.paying and p.due()
    assert not SeenProbe(enabled=False).due()


def dump(client: redis.Redis, crawl: str) -> dict[str, object]:
    """Every key of a crawl, by its name without the crawl, and its value."""
    out: dict[str, object] = {}
    for raw in client.scan_iter(match=f"cp:{{{crawl}/*"):
        key = reply_text(raw)
        kind = reply_text(client.type(raw))
        value: object
        if kind == "string":
            value = client.get(raw)
        elif kind == "hash":
            value = client.hgetall(raw)
        elif kind == "list":
            value = client.lrange(raw, 0, -1)
        elif kind == "set":
            value = client.smembers(raw)
        elif kind == "zset":
            value = client.zrange(raw, 0, -1, withscores=True)
        else:
            raise AssertionError(kind)
        out[key.replace(f"{{{crawl}/", "{", 1)] = value
    return out


def links(rng: random.Random, fps: list[bytes], credit: bool) -> list[NewEntry]:
    """URLs over 30 hosts, some with a vote, a seed vote or a token shape."""
    out = []
    for i, fp in enumerate(fps):
        host = f"h{fp[0] % 30}.test"  # the URL (its fingerprint) names its host
        extra: dict[str, object] = {}
        if i % 7 == 0:
            extra["vote"] = rng.randbytes(4)
        elif i % 11 == 0:
            extra["vote"] = SEED_VOTE
        if i % 5 == 0:
            extra["token_shape"] = bytes([i % 3]) * 8
        score = rng.choice([0.0, 0.5, 2.0]) if credit else float(i % 3)
        data = b'{"url":"http://%s/%d"}' % (host.encode(), i)
        out.append(NewEntry(host, fp, False, data, score, **extra))  # type: ignore[arg-type]
    return out


@pytest.mark.parametrize("mode", ["score", "credit"])
async def test_an_add_that_probes_leaves_redis_as_one_that_does_not(
    make_frontier: MakeFrontier, client: redis.Redis, mode: str
) -> None:
    """The same adds on two crawls, one probing and one not (every link
    through add.lua's test): same results, same keys, same values. Half the
    links of the later adds were seen before, so the probe drops some and
    marks others seen (those with a vote, a token shape or AOPIC credit)."""
    options = {
        "shards": 2,
        "priority_mode": mode,
        "budget": HostBudget(base=50, seed_votes=2, token_urls=20, token_repeat_permille=300),
    }
    probing: RedisFrontier = await make_frontier(crawl="a", **options)
    plain: RedisFrontier = await make_frontier(crawl="b", **options)
    plain.probe = SeenProbe(enabled=False)
    rng = random.Random(5)
    fps = [rng.randbytes(8) for _ in range(6000)]
    batches = [fps[:2000]]
    for k in range(5):  # 800 seen before, 800 new
        batches.append(rng.sample(fps[: 2000 + 800 * k], 800) + fps[2000 + 800 * k :][:800])
    hits = 0
    for i, batch in enumerate(batches):
        entries = links(random.Random(i), batch, mode == "credit")
        a = await probing.add(entries)
        b = await plain.add(entries)
        assert a == b
        hits += a.seen_hits
    p = probing.probe
    assert hits == 5 * 800 and p.found_total > 0.9 * hits  # most found by the probe
    assert 0 < p.dropped_total < p.found_total  # some dropped, some sent as seen
    assert plain.probe.probed_total == 0
    assert dump(client, "a") == dump(client, "b")
