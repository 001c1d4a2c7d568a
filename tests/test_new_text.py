"""What a near copy shows that its host never showed (crawlproject/dedupe/new_text.py):
a listing's page under a long template shows its entries, a calendar's month
shows a title, however many pages came before."""

from __future__ import annotations

from crawlproject.dedupe.fingerprint import visible_text
from crawlproject.dedupe.new_text import FILTER_CELLS, NEW_TEXT_SHINGLES, HostText
from testkit.blog import BlogWeb
from testkit.quotes_site import QuotesSite
from testkit.testweb import TestWeb, month_name


def test_each_listing_page_shows_new_text_and_a_calendar_month_does_not() -> None:
    site = QuotesSite(listings=40)
    memory = HostText()
    replies = [site.route(path) for path in site.listing_paths()]
    pages = [visible_text(r.payload.decode()) for r in replies if r is not None]
    assert memory.new_shingles("q", pages[0], watch=False) is None  # not watched: kept nowhere
    assert not memory.watching("q")
    first = memory.new_shingles("q", pages[0], watch=True)
    assert first is not None and first > 1000  # all of it: nothing seen before
    assert memory.new_shingles("q", pages[1], watch=True) == 0  # `/page/1/` is `/`
    # Pages 2..40: the template many times longer than the quotes, each new.
    later = [memory.new_shingles("q", text, watch=True) for text in pages[2:]]
    assert all(n is not None and n >= NEW_TEXT_SHINGLES for n in later), later

    blog = BlogWeb(hosts=1, archives=[1])
    trap = TestWeb(hosts=1, pages=2, traps={1: "calendar"})
    for host, render in (
        ("blog", lambda m: blog._archive_page(1, f"/calendar/{month_name(m)}")),
        ("trap", lambda m: trap.render_trap(1, "/calendar", f"month={month_name(m)}")),
    ):
        months = [visible_text(render(m).decode()) for m in range(24290, 24350)]
        memory.new_shingles(host, months[0], watch=True)
        counts = [memory.new_shingles(host, text, watch=True) for text in months[1:]]
        assert all(n is not None and n < NEW_TEXT_SHINGLES for n in counts), (host, counts)


def test_the_memory_is_bounded_in_hosts_and_per_host() -> None:
    memory = HostText(hosts=3)
    for host in "abcd":
        memory.new_shingles(host, f"page of {host} " * 50, watch=True)
    assert [memory.watching(h) for h in "abcd"] == [False, True, True, True]  # a: least recent
    # A host whose filter fills up starts over: a page seen before is new again.
    page = " ".join(f"p{i}" for i in range(200))
    memory.new_shingles("b", page, watch=True)
    assert memory.new_shingles("b", page, watch=True) == 0
    memory.new_shingles("b", " ".join(f"w{i}" for i in range(FILTER_CELLS)), watch=True)
    again = memory.new_shingles("b", page, watch=True)
    assert again is not None and again >= NEW_TEXT_SHINGLES
