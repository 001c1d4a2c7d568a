"""Budgets from reputation and the token guard, in add.lua on a real redis-server.

Pure-logic tests of ``is_token``/``token_shape`` and ``LinkVotes`` sit beside them.
"""

from __future__ import annotations

import random
import string
from dataclasses import replace

import pytest

from crawlproject.frontier.admission.link_votes import LinkVotes, vote_of
from crawlproject.frontier.admission.token_evidence import TokenEvidence
from crawlproject.frontier.store.redis_frontier import (
    NO_VOTE,
    SEED_VOTE,
    HostBudget,
    Lease,
    NewEntry,
    RedisFrontier,
)
from crawlproject.rules.traps import is_token, token_shape
from testkit.entries import CODEC
from testkit.entries import entry as make_entry
from tests.conftest import MakeFrontier


def tok(i: int) -> str:
    """A token as servers mint them: 16 hex digits, letters and digits mixed."""
    return f"{(i + 1) * 0x9E3779B97F4A7C15 % 2**64:016x}"


BUDGET = HostBudget(base=10, seed_votes=2, token_urls=20, token_repeat_permille=20)


def entry(url: str, vote: bytes = NO_VOTE) -> NewEntry:
    return make_entry(url, vote=vote, token=True)  # with its token shape


async def queued_urls(f: RedisFrontier) -> list[str]:
    urls: list[str] = []
    leases: list[Lease] = []
    for _ in range(200):
        batch = (await f.claim(0, 100, "w")).items
        if not batch:
            break
        for lease, data in batch:
            urls.append(CODEC.decode(data, None).url)
            leases.append(lease)
        await f.ack([lease for lease, _ in batch])
    return urls


@pytest.mark.parametrize(
    ("part", "token"),
    [
        ("8f3a91c2e07d4b5a", True),
        ("A1b2C3d4E5", True),
        ("x7Kq9LmN2pR4sT6vW8yZ0a", True),
        ("1732531200123", True),
        ("page123", False),
        ("20261125", False),
        ("index", False),
        ("x86", False),
        ("mp3player", False),
        ("abcdefghijklmnop", False),
    ],
)
def test_is_token(part: str, token: bool) -> None:
    assert is_token(part) is token


def test_minted_ids_are_tokens_all_but_always() -> None:
    rng = random.Random(7)
    alphabet = string.ascii_letters + string.digits
    hex16 = [f"{rng.getrandbits(64):016x}" for _ in range(20_000)]
    base62 = ["".join(rng.choices(alphabet, k=22)) for _ in range(20_000)]
    hex8 = [f"{rng.getrandbits(32):08x}" for _ in range(20_000)]
    assert sum(not is_token(t) for t in hex16) <= 2  # 0.01 %
    assert sum(not is_token(t) for t in base62) <= 2
    assert sum(not is_token(t) for t in hex8) <= 20_000 * 0.05  # all digits: (10/16)^8
    words = ["chapter12", "mp3player", "windows10", "html5rocks", "getElementById", "v20"]
    assert not any(is_token(w) for w in words)


def test_token_shape_blanks_tokens_and_digits() -> None:
    a = token_shape("http://h/s/8f3a91c2e07d4b5a/page/2")
    assert a is not None and a == token_shape("http://h/s/0b1c2d3e4f5a6b7c/page/31")
    assert a != token_shape("http://h/t/8f3a91c2e07d4b5a/page/2")
    q = token_shape("http://h/list?sid=8f3a91c2e07d&p=3")
    assert q is not None and q == token_shape("http://h/list?p=9&sid=77aa88bb99cc")
    assert token_shape("http://h/docs/intro-2.html?lang=en") is None  # no token: no shape


def test_link_votes_count_other_registered_domains_once() -> None:
    votes = LinkVotes(200_000)
    assert votes.vote("a.example.com", "http://b.example.com/x") == NO_VOTE  # same domain
    assert votes.vote("b.example.com", "http://b.example.com/x") == NO_VOTE  # same host
    assert votes.vote(None, "http://b.example.com/x") == NO_VOTE
    v = votes.vote("www.other.org", "http://b.example.com/x")
    assert v == vote_of("other.org") and v not in (NO_VOTE, SEED_VOTE)
    assert votes.first(v, "http://b.example.com")
    assert not votes.first(v, "http://b.example.com")  # sent once per worker
    assert votes.first(v, "http://c.example.com")


async def test_a_host_queues_its_budget_and_keeps_the_rest_in_order(
    make_frontier: MakeFrontier,
) -> None:
    f = await make_frontier(shards=1, delay_ms=0, conc=100, budget=BUDGET)
    result = await f.add([entry(f"http://nobody.test/{i}") for i in range(25)])
    # No vote but its own: 10 URLs; the other 15 wait in its overflow.
    assert (result.added, result.over_budget) == (10, 15)
    assert result.newly_over_budget == ["nobody.test"]
    assert await queued_urls(f) == [f"http://nobody.test/{i}" for i in range(10)]
    assert await f.trap_reasons() == {"nobody.test": {"budget": 15}}

    # Two other domains link to it: 10 more URLs each, released in order.
    link = entry("http://nobody.test/0", vote=vote_of("one.example"))
    again = await f.add([link, replace(link, vote=vote_of("two.example"))])
    assert (again.seen_hits, again.released, again.added) == (2, 15, 15)
    assert await queued_urls(f) == [f"http://nobody.test/{i}" for i in range(10, 25)]
    # A domain votes once: the same vote again releases nothing.
    later = [entry(f"http://nobody.test/{i}") for i in range(25, 31)]
    third = await f.add([*later, replace(link, vote=vote_of("one.example"))])
    assert (third.added, third.over_budget, third.released) == (5, 1, 0)  # 30 in all
    assert (await f.trap_reasons())["nobody.test"] == {"budget": 1}
    counters = await f.counters()
    assert counters["over_budget"] == 16 and counters["budget_released"] == 15


async def test_a_seed_host_gets_the_operators_votes(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(shards=1, delay_ms=0, conc=100, budget=BUDGET)
    seed = entry("http://seeded.test/", vote=SEED_VOTE)
    result = await f.add([seed, *(entry(f"http://seeded.test/{i}") for i in range(40))])
    assert (result.added, result.over_budget) == (30, 11)  # 10 x (1 + 2 seed votes)


async def test_budgets_off_queue_everything(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(shards=1, delay_ms=0, budget=replace(BUDGET, base=0))
    result = await f.add([entry(f"http://nobody.test/{i}") for i in range(25)])
    assert (result.added, result.over_budget) == (25, 0)


async def test_minted_tokens_are_contained_and_stable_ids_are_not(
    make_frontier: MakeFrontier,
) -> None:
    f = await make_frontier(shards=1, delay_ms=0, conc=100, budget=replace(BUDGET, base=0))
    evidence = TokenEvidence(f.redis, f.keys)
    # A session carried from page to page: the pages of the shape link its new URLs.
    minted = [entry(f"http://trap.test/s/{tok(i)}/page") for i in range(30)]
    await evidence.record("trap.test", minted[0].token_shape, True, 30)
    result = await f.add(minted)
    # The 20th new URL of the shape, none repeated: contained from there on.
    assert (result.added, result.token_parked) == (19, 11)
    assert len(result.newly_contained) == 1 and result.newly_contained[0][0] == "trap.test"
    assert await f.trap_reasons() == {"trap.test": {"token": 11}}
    # The same shape keeps being parked, on any worker; other shapes are not.
    more = await f.add([entry(f"http://trap.test/s/{tok(99)}/page")])
    assert more.token_parked == 1
    other = await f.add([entry("http://trap.test/about.html")])
    assert other.added == 1

    # Cache busters linked from ordinary pages: their pages copy the host's pages.
    busted = [entry(f"http://copy.test/news?v={tok(i)}") for i in range(30)]
    for content in (True, False, False):
        await evidence.record("copy.test", busted[0].token_shape, content, 0)
    assert (await f.add(busted)).token_parked == 11

    # Stable ids (commits, articles) linked again and again: never contained.
    ids = [entry(f"http://ok.test/commit/{tok(i)}") for i in range(30)]
    for i in range(0, 30, 3):
        await f.add(ids[i : i + 3])
        await f.add(ids[: i + 3])  # listing pages link the ids seen before
    reasons = await f.trap_reasons()
    assert "ok.test" not in reasons


async def test_stable_ids_linked_once_from_listings_are_never_contained(
    make_frontier: MakeFrontier,
) -> None:
    """The case that matters: thousands of ids, each linked once, from listing
    pages (no token), each page new content; past 100 x CRAWL_TRAP_TOKEN_URLS
    only a shape with no page judged at all is contained."""
    f = await make_frontier(shards=1, delay_ms=0, conc=100, budget=replace(BUDGET, base=0))
    evidence = TokenEvidence(f.redis, f.keys)
    unjudged_bound = BUDGET.token_urls * 100
    for host in ("hex.test", "b62.test"):
        ids = [entry(f"http://{host}/post/{_stable(host, i)}") for i in range(unjudged_bound + 20)]
        shape = ids[0].token_shape
        assert shape != bytes(8) and all(e.token_shape == shape for e in ids)
        added = 0
        for i in range(0, len(ids), 20):  # one listing page: 20 ids never linked before
            added += (await f.add(ids[i : i + 20])).added
            for _ in range(20):  # their pages, fetched: each one new content, no link of its shape
                await evidence.record(host, shape, True, 0)
        assert added == len(ids)
    assert await f.trap_reasons() == {}
    # A shape whose pages no one judged (a spider without dedupe): a hard bound.
    blind = [entry(f"http://blind.test/post/{_stable('hex.test', i)}") for i in range(2010)]
    result = await f.add(blind)
    assert (result.added, result.token_parked) == (unjudged_bound - 1, 11)


def _stable(host: str, i: int) -> str:
    """A stable id: 32 hex digits, or 22 base62 characters."""
    rng = random.Random(f"{host}/{i}")
    if host.startswith("hex"):
        return f"{rng.getrandbits(128):032x}"
    return "".join(rng.choice(string.digits + string.ascii_letters) for _ in range(22))


async def test_locally_seen_links_still_vote_and_repeat(make_frontier: MakeFrontier) -> None:
    f = await make_frontier(shards=1, delay_ms=0, conc=100, budget=replace(BUDGET, token_urls=3))
    ids = [entry(f"http://ok.test/commit/{tok(i)}") for i in range(3)]
    await f.add(ids[:2])
    # A worker that sent these before sends vote-only entries: counted as repeats.
    repeats = [replace(e, data=b"", vote_only=True) for e in ids[:2]]
    await f.add(repeats)
    assert (await f.add([ids[2]])).added == 1  # 3 new, 2 repeats: not contained
    result = await f.add(
        [replace(entry("http://ok.test/"), data=b"", vote=vote_of("x.example"), vote_only=True)]
    )
    assert result.added == 0 and result.seen_hits == 0  # a vote only: nothing queued
