"""The ``dead`` lists (crawlproject/frontier/store/keys.py): stored requests a worker
could not turn back into a Request when it claimed them (claims.py acks them
``dead``; ack.lua pushes ``pkey \\t request``, the request in its stored form).
This module owns their reads and writes: ``crawlproject dead`` lists them,
says why each cannot be decoded, and puts them back in their host queues.

Why: the entry is decoded again, by the same codec as a worker's, against the
crawl's spider class (the spider named like the crawl, or ``--spider``; an
instance made without running its ``__init__``, which is enough to resolve
methods). An entry that decodes now (the spider has the method again, the
class is importable, a newer codec reads it) says so: requeue it.

Requeue: each entry goes back to its host queue through the add script as a
``dont_filter`` entry (its URL is in the seen set already: it is not tested
again), then leaves the dead list (LREM of that exact entry). A command
stopped between the two leaves the entry in both places: requeued again, it
is fetched twice; never lost.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from scrapy import Spider
from scrapy.settings import BaseSettings
from scrapy.spiderloader import get_spider_loader

from crawlproject.frontier.basics.urls import InvalidURL, UrlCanonicalizer
from crawlproject.frontier.crawl.config import FrontierConfig
from crawlproject.frontier.store.codec import RequestCodec, RequestDecodeError, url_of, whole_form
from crawlproject.frontier.store.keys import CrawlKeys
from crawlproject.frontier.store.redis_frontier import NewEntry, RedisFrontier
from crawlproject.frontier.store.script_replies import reply_bytes, reply_text

DEAD_BATCH = 500


def dead_key(keys: CrawlKeys, shard: int) -> str:
    """The shard's ``dead`` list (documented in keys.py)."""
    return keys.shard_prefixes[shard] + "dead"


@dataclass(frozen=True, slots=True)
class DeadEntry:
    shard: int
    raw: bytes  # the list entry, as stored (what LREM removes)
    pkey: str
    data: bytes  # the request in its whole form (codec.py)

    @property
    def url(self) -> str | None:
        return url_of(self.data)


def parse_entry(shard: int, raw: bytes) -> DeadEntry:
    pkey, _, stored = raw.partition(b"\t")
    key = pkey.decode("utf-8", "replace")
    return DeadEntry(shard, raw, key, whole_form(stored, key))


async def dead_entries(redis: Redis, keys: CrawlKeys) -> list[DeadEntry]:
    """Every entry of every shard's dead list, oldest first."""
    out: list[DeadEntry] = []
    for shard in range(keys.shards):
        start = 0
        while batch := await redis.lrange(dead_key(keys, shard), start, start + DEAD_BATCH - 1):
            out += [parse_entry(shard, reply_bytes(raw)) for raw in batch]
            start += len(batch)
    return out


def bare_spider(spidercls: type[Spider]) -> Spider:
    """An instance of ``spidercls`` whose ``__init__`` did not run: its methods
    resolve (bound), nothing of the spider's start-up runs."""
    return spidercls.__new__(spidercls)


def explain(entry: DeadEntry, codec: RequestCodec, spider: Spider | None) -> str:
    """Why ``entry`` cannot be decoded (the codec's own refusal), or that it can now."""
    try:
        codec.decode(entry.data, spider)
    except RequestDecodeError as exc:
        if spider is None and "callable" in str(exc):
            return f"{exc} (no spider to check its callback against: --spider NAME)"
        return str(exc)
    return "decodes now: requeue it (crawlproject dead --requeue)"


def stored_fields(data: bytes) -> dict[str, Any]:
    """The stored request's fields, read without resolving anything ({} if unreadable)."""
    try:
        if data[:1] == b"{":
            fields = json.loads(data)
        else:
            head, _, extra = data.partition(b"\n")
            fields = json.loads(extra) if extra else {}
            depth = "".join(chr(b) for b in head[1:12] if 48 <= b <= 57)
            if depth:
                fields.setdefault("meta", {})["depth"] = int(depth)
    except ValueError:
        return {}
    return fields if isinstance(fields, dict) else {}


def requeue_entry(
    entry: DeadEntry, canonicalizer: UrlCanonicalizer, mode: str, seed_credit: float
) -> NewEntry | None:
    """The add script's entry that puts ``entry`` back (None: no URL to queue)."""
    url = entry.url
    if url is None:
        return None
    fields = stored_fields(entry.data)
    try:
        canonical = canonicalizer.canonicalize(url)
        body = base64.b64decode(fields.get("body") or "")
    except (InvalidURL, ValueError):
        return None
    method = str(fields.get("method") or "GET")
    if mode == "credit":
        score = seed_credit
    else:  # DepthPriority's number: depth less the request's priority
        meta = fields.get("meta")
        if not isinstance(meta, dict):
            meta = {}
        depth, priority = meta.get("depth", 0), fields.get("priority", 0)
        numbers = all(isinstance(v, (int, float)) for v in (depth, priority))
        score = float(depth) - float(priority) if numbers else 0.0
    fingerprint = canonicalizer.fingerprint(canonical, method, body)
    return NewEntry(entry.pkey, fingerprint, True, entry.data, score=score)


async def requeue_dead(
    frontier: RedisFrontier, canonicalizer: UrlCanonicalizer, seed_credit: float
) -> tuple[int, int]:
    """Puts every dead entry back in its host queue; returns (requeued,
    dropped: entries with no URL that could be queued, left in place)."""
    redis, keys = frontier.redis, frontier.keys
    requeued = unusable = 0
    mode = reply_text(await redis.get(keys.priority_mode(0)) or b"score")
    entries = await dead_entries(redis, keys)
    for start in range(0, len(entries), DEAD_BATCH):
        batch = entries[start : start + DEAD_BATCH]
        adds = [(e, requeue_entry(e, canonicalizer, mode, seed_credit)) for e in batch]
        unusable += sum(1 for _, new in adds if new is None)
        going = [(e, new) for e, new in adds if new is not None]
        if not going:
            continue
        await frontier.add(new for _, new in going)
        for e, _ in going:  # after the add: a stop in between requeues it twice, loses nothing
            removed = await redis.lrem(dead_key(keys, e.shard), 1, e.raw)  # type: ignore[arg-type]
            requeued += int(removed)
    return requeued, unusable


async def drop_dead(redis: Redis, keys: CrawlKeys) -> int:
    """Deletes every shard's dead list; returns how many entries went."""
    total = 0
    for shard in range(keys.shards):
        total += int(await redis.llen(dead_key(keys, shard)))
        await redis.delete(dead_key(keys, shard))
    return total


def dead_report(
    entries: list[DeadEntry], codec: RequestCodec | None, spider: Spider | None
) -> list[dict[str, Any]]:
    """One JSON object per entry: host, URL and (with a codec) why."""
    out: list[dict[str, Any]] = []
    for e in entries:
        row: dict[str, Any] = {"host": e.pkey, "url": e.url}
        if codec is not None:
            row["why"] = explain(e, codec, spider)
        out.append(row)
    return out


def crawl_spider(settings: BaseSettings, name: str) -> Spider | None:
    """A bare instance of the project's spider ``name`` (None: no such spider)."""
    try:
        spidercls = get_spider_loader(settings).load(name)
    except KeyError:
        return None
    return bare_spider(spidercls)


async def dead_command(
    config: FrontierConfig,
    settings: BaseSettings,
    spider_name: str,
    how: str,
    redis: Redis,
    keys: CrawlKeys,
) -> None:
    """``crawlproject dead [--explain | --requeue | --drop]``: ``how`` is
    list, explain, requeue or drop."""
    if how == "requeue":
        frontier = RedisFrontier(
            redis, keys, config.host_delay_ms, config.host_concurrency, config.lease_ms,
            seen=config.seen,
        )  # fmt: skip
        canonicalizer = UrlCanonicalizer(config.session_params)
        n, unusable = await requeue_dead(frontier, canonicalizer, config.aopic_seed_credit)
        left = f"; {unusable} with no URL to queue left in the list" if unusable else ""
        print(f"requeued {n} dead request(s){left}")
    elif how == "drop":
        print(f"dropped {await drop_dead(redis, keys)} dead request(s)")
    else:
        codec = RequestCodec(config.request_classes) if how == "explain" else None
        spider = crawl_spider(settings, spider_name) if codec is not None else None
        entries = await dead_entries(redis, keys)
        print(json.dumps(dead_report(entries, codec, spider), ensure_ascii=False))
