"""A synthetic multi-host web on loopback, for tests and benchmarks.

Host i is the loopback IP 127.0.(3 + (i-1)//250).(1 + (i-1)%250); all hosts
listen on one TCP port, so each host is a distinct politeness key. One asyncio
loop serves them all, either in a background thread (``TestWeb.start()``) or as
its own process, so a benchmark does not share a GIL with the crawler harness::

    python -m testkit.testweb --hosts 20 --pages 30 --latency-ms 10-80 \\
        --links 5 --cross-links 1 --seed 1 --log req.jsonl --ready-file web.json

The page graph is a pure function of the parameters (``random.Random(seed)``):
host h has pages ``/`` and ``/p/1`` .. ``/p/(pages-1)``; page k links to page
k+1 (the last to ``/``), so every page is reachable from its host's ``/``.
Links come in absolute, scheme-relative, root-relative and ``../`` forms, some
with a ``#fragment``, one repeated verbatim. Each host also has
``query_variants`` URLs ``/p/N?a=1&b=2``, linked with the query in either
order: they are distinct URLs (the server ignores the query when routing) and
``expected_urls`` holds them in canonical (sorted-query) form.
``links_out_of_scope`` links per page point at 127.0.2.1, which is not part of
the web: a trap listens there and logs (404) whatever a crawler sends it.

``special`` adds per-host routes for robots.txt, sitemaps, 429s and the like:
``{host index: {exact path: spec}}``, a spec being a JSON-able dict with the
optional keys ``status`` (200), ``body`` (""), ``body_b64`` (a binary body, as
base64, sent instead of ``body``), ``content_type`` ("text/plain"),
``headers`` (extra response headers), ``gzip`` (send gzip.compress(body) as a
file: no Content-Encoding), ``reset`` (log the request with status 0, then
abort the connection with an RST and no response bytes) and ``times`` (only
the first N requests for that host and path get the spec; later ones get the
normal route), ``repeat`` (send the body N times over: large bodies, gzip bombs
with ``gzip`` and a ``Content-Encoding: gzip`` header) and ``delay`` (seconds
to wait before answering, on top of the host's latency: a download timeout).
``{base}`` in ``body`` and header values becomes
``http://<host ip>:<port>``. Special routes come before every other route;
they are not part of ``graph`` nor of ``expected_urls``.

``realistic`` (``--realistic``) makes pages look like a real site's, for
near-duplicate detection: every page of a host shares a site template (a header
with the site name and a navigation bar of labels, an "About" box and a footer
of boilerplate ending in a per-page "Last updated: YYYY-MM-DD" line: together
about 1.2 KB of text), around a body of ``body_bytes`` of English sentences in
paragraphs, which differs page to page. The page's links are still exactly
``graph[h, k]``, in a "Related articles" list. Without it pages are a heading
and filler of random letter strings, as they always were.

``mirrors`` (``--mirrors JSON``: ``{"mirror host": source host}``) makes host m
a mirror of host s: m's page k is s's page k (same template, title and text)
with a ``<div class="banner">`` announcement after the heading (the same on all
of m's pages), a different "Last updated" date (realistic pages only) and links
remapped into m: ``graph[m, k]`` is ``graph[s, k]`` with host s replaced by m.
A mirror keeps its own seed URL, latency and special routes; its pages are in
``expected_urls`` and ``mirror_pairs()`` pairs each with its source page.
Mirrors of mirrors are refused.

``host_pages`` (``--host-pages JSON``: ``{"host": page count}``) gives some
hosts their own page count instead of ``pages`` (one host of 2,000 pages among
hosts of 10). Such a host's graph is drawn from its own ``random.Random`` (the
main one still draws, and drops, a ``pages``-page graph for it, so the other
hosts' graphs stay as they were, but for links into a host with fewer than
``pages`` pages: their target page ``t`` becomes ``t % count``). It keeps the
chain (page k links to k+1) and random links, and adds *index links*: page k
also links (root-relative, after its other links) to pages ``10k+1 .. 10k+10``
(those that exist), a 10-ary tree rooted at ``/``. The tree puts page k at depth
d(k) (d(0) = 0, d(1..10) = 1, d(11..110) = 2, d(111..1110) = 3,
d(1111..11110) = 4: the least d with k < (10^(d+1) - 1) / 9), so a host of up
to 11,110 pages has every page within 4 links of its ``/``, up to 111,110
within 5 (other links can only shorten that). Only hosts listed in
``host_pages`` get index links, whatever their count; a mirror has its source's
pages and cannot be listed.

``traps`` (``--traps JSON``: ``{"host": kind}``) adds a spider trap to a host,
*in addition to* its normal pages (which stay in the graph and in
``expected_urls``): the host's ``/`` also links to the trap's entry (after its
graph links, and only ``/``); trap pages link back to ``/``. Kinds:

* ``calendar``: ``/calendar?month=YYYY-MM`` (year 0001 and up, month 01..12,
  exactly so formatted; other query pairs are ignored) links to the previous
  month (``/calendar?month=...``, none before 0001-01) and the next one
  (``?month=...``, a query-only relative href), endlessly onwards. Entry:
  ``/calendar?month=2025-01`` (``CALENDAR_START``).
* ``session``: ``/s/0`` .. ``/s/4`` (``SESSION_PAGES``), each its own page;
  every render of ``/`` or of an ``/s/k`` mints one fresh session id and links
  to all of ``/s/j?sid=<id>``. The server ignores the query, so the URLs are
  endless but the content is five pages (the project's canonicalizer drops
  ``sid``; this module's ``canonical_url`` keeps it).
* ``repeat``: any path of ``x``/``y`` segments with a trailing slash (``/x/``,
  ``/x/x/``, ``/x/y/x/``...; ``/x`` is a 404) is a page linking to the relative
  ``x/`` and ``y/x/``, so the path grows by one or two segments a link. Entry:
  the relative ``x/`` on ``/``.
* ``pathsession``: a session id in the path: every render of ``/`` or of a
  ``/ps/<id>/page<j>.html`` page mints one fresh id and links to two pages,
  ``/ps/<new id>/page<2j+1>.html`` and ``page<2j+2>``; any id (16 hex digits)
  is served, each page ``j`` with its own text, so the trap's pages are all
  distinct and endless (duplicate detection cannot catch it).
* ``minted``: every render of ``/`` or of a ``/m/<token>`` page links to
  ``MINTED_LINKS`` (5) freshly minted ``/m/<token>`` URLs; any ``/m/<token>``
  (lowercase letters and digits) is served, and does the same.
* ``soft404``: a soft-404 space: every path that is not one of the host's pages
  (``/``, ``/p/N``, its popular page) answers 200 with one "not found" template
  (``TRAP_TEMPLATE_BYTES`` of shared text) that echoes the path and links to
  the relative ``more/`` and ``other-<n>/`` (n: the path's segment count), so
  each page is distinct by its path and the paths grow endlessly. Entry: the
  relative ``missing/`` on ``/``. Its ``/robots.txt`` is such a page too.
* ``farm``: a link farm: ``/f/<word>-<word>-<n>.html`` pages, near-identical
  (one shared text of ``TRAP_TEMPLATE_BYTES`` with the path's 3 words in it, 4
  times over), each linking to ``FARM_LINKS`` (3) new ones drawn from its own
  path. Entry: 3 such links on ``/``.

Session ids and tokens are 16 hex digits from the web's own
``random.Random(f"tokens/{seed}")``: the same sequence in every process for a
seed, a new value on every render. Trap pages are plain pages (title, heading,
filler, a list of links: even with ``realistic``); all pages of one trap share
their filler (session: per page), so they differ only in the heading, title and
links. Trap URLs are not part of ``graph`` nor of ``expected_urls``;
``trap_kind(url)`` tells them apart, ``trap_fetches(log)`` counts them per trap
host and ``fetches_by_host(log)`` counts every request per host IP.

``site_links`` (``--site-links JSON``: ``{"href template": every}``) gives pages
the links a real site's menu and footer carry on every page: page k of every
host (trap pages excepted) links to each template with ``{k}`` replaced by k,
when k % every == 0; root-relative templates (``/private/login``,
``/private/share?page={k}``: paths a robots.txt ``Disallow`` names; ``/go/{k}``: a
302 to ``/p/k``; ``/gone/{k}``: a 404). Realistic pages carry them in their
``<nav>`` (boilerplate: no near-duplicate verdict changes), plain ones after
their other links. Their URLs are not part of ``graph`` nor of ``expected_urls``.

``popular`` (``--popular H:/path``; ``(host, path)``) adds a page at ``path``
on host H (served 200, in ``graph`` as page ``POPULAR_PAGE`` (-1), in
``expected_urls``) that the ``/`` page of *every* host links to, after its
other links (an absolute URL; a root-relative one on host H itself). It links
to H's ``/``. It is not mirrored.

Pages change on command, for recrawl tests: every page in ``graph`` (host h,
page k; mirror pages and the popular page included, each on its own) has a
version, 0 at start; ``change(h, k)`` bumps it (from any thread: the server
reads it under a lock) and ``version(h, k)`` reads it. Version 0 renders as
ever; version n > 0 redraws the page's text (filler, or a realistic page's
paragraphs; title, template and links stay) from a seed of its own and adds a
paragraph "Revision n: <REVISION_WORDS words drawn from n>" (before
``</body>``; in a realistic page, at the end of the article), so a content
digest and a SimHash both tell versions apart (a paragraph alone often leaves a
realistic page's SimHash as it was). ``render(h, k, version)`` renders any
version. Query variants are their page. A mirror's page at version n shows its
source's page at version n (plus the banner). Process mode cannot change pages
(no control channel).

``validators`` (``--validators``) adds validators to every 200 of such a page:
``ETag: "<h>-<k>-<version>"`` and ``Last-Modified:`` ``VALIDATOR_BASE`` plus
version days (an HTTP date). A GET or HEAD then gets ``304 Not Modified`` (the
validators, no Content-Type, Content-Length nor body) when ``If-None-Match``
names the current ETag (a list, ``*`` and ``W/`` tags too: RFC 9110's weak
comparison) or, without If-None-Match, ``If-Modified-Since`` is a date at or
after Last-Modified. Without ``validators`` conditional headers are ignored.
Either way ``RequestRecord.if_none_match`` and ``if_modified_since`` log them.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import errno
import gzip
import hashlib
import html
import json
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime
from itertools import accumulate, pairwise
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import parse_qs, urlsplit, urlunsplit

from testkit import REPO_ROOT

OUT_OF_SCOPE_IP = "127.0.2.1"
REASONS = {
    200: "OK",
    301: "Moved Permanently",
    302: "Found",
    304: "Not Modified",
    403: "Forbidden",
    404: "Not Found",
    410: "Gone",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
MAX_HOSTS = 253 * 250
VARIANT_QUERY = ("a=1", "b=2")
SPECIAL_KEYS = frozenset(
    {
        "status", "body", "body_b64", "content_type", "headers", "gzip", "reset", "times",
        "repeat", "delay",
    }
)  # fmt: skip

INDEX_FANOUT = 10  # index links per page on a host_pages host: k -> 10k+1 .. 10k+10
# The longest a request waits on its host's ``hold``: under CRAWL_LEASE_SECONDS'
# default (30 s), so a held fetch is never handed to another worker meanwhile.
HOLD_MAX_SECONDS = 20.0
POPULAR_PAGE = -1  # the popular page's number in ``graph``
TRAP_KINDS = ("calendar", "session", "repeat", "minted", "pathsession", "soft404", "farm")
CALENDAR_START = "2025-01"  # the month a calendar trap's entry link shows
SESSION_PAGES = 5  # real pages behind a session trap: /s/0 .. /s/4
MINTED_LINKS = 5  # fresh /m/<token> links on every page of a minted trap
FARM_LINKS = 3  # new /f/<word>-<word>-<n>.html links on every page of a link farm
# Shared text of a soft-404 or farm page, besides what differs page to page: enough
# for near-duplicate detection to see them as near-identical.
TRAP_TEMPLATE_BYTES = 8192
REVISION_WORDS = 40  # words of a changed page's "Revision n" paragraph
VALIDATOR_BASE = datetime(2026, 1, 1, tzinfo=UTC)  # Last-Modified of version 0; +1 day each
_MONTH = re.compile(r"(\d{4,})-(\d{2})")
_SESSION_PATH = re.compile(r"/s/(0|[1-9]\d*)")
_REPEAT_PATH = re.compile(r"(?:/[xy])+/")
_MINTED_PATH = re.compile(r"/m/[0-9a-z]+")
_FARM_PATH = re.compile(r"/f/([a-z]+)-([a-z]+)-(\d+)\.html")
_PATHSESSION_PATH = re.compile(r"/ps/[0-9a-f]{16}/page(0|[1-9]\d*)\.html")

# host index (1-based) -> exact path (no query) -> spec (see the module docstring)
SpecialRoutes = dict[int, dict[str, dict[str, Any]]]

# Common English words, roughly most frequent first, for realistic pages. Body text draws them
# with Zipf-like weights (rank r weighs 1/(r+10)), so pages share many words, as real text does.
_ENGLISH_TEXT = """
the of and to in is it you that he was for on are with as his they be at one have this from or
had by word but what some we can out other were all there when up use your how said an each she
which do their time if will way about many then them write would like so these her long make
thing see him two has look more day could go come did number sound no most people my over know
water than call first who may down side been now find any new work part take get place made
live where after back little only round man year came show every good me give our under name
very through just form sentence great think say help low line differ turn cause much mean
before move right boy old too same tell does set three want air well also play small end put
home read hand port large spell add even land here must big high such follow act why ask men
change went light kind off need house picture try us again animal point mother world near build
self earth father head stand own page should country found answer school grow study still learn
plant cover food sun four between state keep eye never last let thought city tree cross farm
hard start might story saw far sea draw left late run while press close night real life few
north open seem together next white children begin got walk example ease paper group always
music those both mark often letter until mile river car feet care second book carry took
science eat room friend began idea fish mountain stop once base hear horse cut sure watch color
face wood main enough plain girl usual young ready above ever red list though feel talk bird
soon body dog family direct pose leave song measure door product black short numeral class wind
question happen complete ship area half rock order fire south problem piece told knew pass
since top whole king space heard best hour better true during hundred five remember step early
hold west ground interest reach fast verb sing listen six table travel less morning ten simple
several vowel toward war lay against pattern slow center love person money serve appear road
map rain rule govern pull cold notice voice unit power town fine certain fly fall lead cry dark
machine note wait plan figure star box noun field rest correct able pound done beauty drive
stood contain front teach week final gave green quick develop ocean warm free minute strong
special mind behind clear tail produce fact street inch multiply nothing course stay wheel full
force blue object decide surface deep moon island foot system busy test record boat common gold
possible plane stead dry wonder laugh thousand ago ran check game shape equate miss brought
heat snow tire bring yes distant fill east paint language among grand ball yet wave drop heart
present heavy dance engine position arm wide sail material size vary settle speak weight
general ice matter circle pair include divide syllable felt perhaps pick sudden count square
reason length represent art subject region energy hunt probable bed brother egg ride cell
believe fraction forest sit race window store summer train sleep prove lone leg exercise wall
catch mount wish sky board joy winter sat written wild instrument kept glass grass cow job edge
sign visit past soft fun bright gas weather month million bear finish happy hope flower clothe
strange gone jump baby eight village meet root buy raise solve metal whether push seven
paragraph third shall held hair describe cook floor either result burn hill safe cat century
consider type law bit coast copy phrase silent tall sand soil roll temperature finger industry
value fight lie beat excite natural view sense ear else quite broke case middle son lake moment
scale loud spring observe child straight consonant nation dictionary milk speed method organ
pay age section dress cloud surprise quiet stone tiny climb cool design poor lot experiment
bottom key iron single stick flat twenty skin smile crease hole trade melody trip office
receive row mouth exact symbol die least trouble shout except wrote seed tone join suggest
clean break lady yard rise bad blow oil blood touch grew cent mix team wire cost lost brown
wear garden equal sent choose fell fit flow fair bank collect save control decimal gentle woman
captain practice separate difficult doctor please protect noon whose locate ring character
insect caught period indicate radio spoke atom human history effect electric expect crop modern
element hit student corner party supply bone rail imagine provide agree thus capital chair
danger fruit rich thick soldier process operate guess necessary sharp wing create neighbor wash
bat rather crowd corn compare poem string bell depend meat rub tube famous dollar stream fear
sight thin triangle planet hurry chief colony clock mine tie enter major fresh search send
yellow allow print dead spot desert suit current lift rose arrive master track parent shore
division sheet substance favor connect post spend chord fat glad original share station dad
bread charge proper bar offer segment duck instant market degree populate chick dear enemy
reply drink occur support speech nature range steam motion path liquid log meant quotient teeth
shell neck oxygen sugar death pretty skill women season solution magnet silver thank branch
match suffix especially fig afraid huge sister steel discuss forward similar guide experience
score apple bought led pitch coat mass card band rope slip win dream evening condition feed
tool total basic smell valley nor double seat continue block chart hat sell success company
subtract event particular deal swim term opposite wife shoe shoulder spread arrange camp invent
cotton born determine quart nine truck noise level chance gather shop stretch throw shine
property column molecule select wrong gray repeat require broad prepare salt nose plural anger
claim continent
"""
ENGLISH_WORDS: tuple[str, ...] = tuple(_ENGLISH_TEXT.split())
_WORD_CUM_WEIGHTS = tuple(accumulate(1 / (rank + 10) for rank in range(len(ENGLISH_WORDS))))
SITE_ADJECTIVES = (
    "Northern", "Quiet", "Silver", "Golden", "Open", "Green", "Bright", "Little", "Old",
    "Western", "Coastal", "Red", "Blue", "Hidden", "Evening", "Morning",
)  # fmt: skip
SITE_NOUNS = (
    "Harbor", "Valley", "Garden", "River", "Lantern", "Bridge", "Meadow", "Mountain",
    "Compass", "Orchard", "Station", "Forest", "Island", "Market", "Library", "Workshop",
)  # fmt: skip
SITE_KINDS = (
    "Journal", "Review", "Gazette", "Times", "Post", "Chronicle", "Herald", "Observer",
    "Digest", "Weekly", "Notes", "Magazine",
)  # fmt: skip
NAV_SECTIONS = (
    "News", "World", "Business", "Technology", "Science", "Health", "Sports", "Culture",
    "Travel", "Food", "Opinion", "Books", "Music", "Archive", "Events", "Photos", "Video",
)  # fmt: skip
CITIES = (
    "Springfield", "Riverton", "Fairview", "Madison", "Georgetown", "Franklin", "Greenville",
    "Salem", "Bristol", "Ashland", "Milton", "Dover",
)  # fmt: skip
STATES = ("CA", "NY", "TX", "OR", "WA", "MA", "IL", "CO", "VT", "ME")
STREET_KINDS = ("Street", "Avenue", "Road", "Lane", "Boulevard")
FIRST_UPDATE = date(2015, 1, 1)  # "Last updated" dates fall in the ten years from here


def host_ip(i: int) -> str:
    """IP of host ``i`` (1-based)."""
    if not 1 <= i <= MAX_HOSTS:
        raise ValueError(f"host index {i} outside 1..{MAX_HOSTS}")
    return f"127.0.{3 + (i - 1) // 250}.{1 + (i - 1) % 250}"


def page_path(k: int) -> str:
    return "/" if k == 0 else f"/p/{k}"


def canonical_query(query: str) -> str:
    """Query pairs sorted by name, then value; empty pairs dropped."""
    return "&".join(sorted((p for p in query.split("&") if p), key=lambda p: p.split("=", 1)))


def canonical_url(url: str) -> str:
    """Fragment dropped, query pairs sorted: what the crawler's canonicalizer
    yields for this web's URLs (plain ASCII, no default ports, no session ids)."""
    parts = urlsplit(url)
    query = canonical_query(parts.query)
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path or "/", query, ""))


def special_from_json(data: dict[str, Any]) -> SpecialRoutes:
    """``special`` as JSON holds it (host keys are strings) -> host keys as ints."""
    return {
        int(h): {path: dict(spec) for path, spec in routes.items()} for h, routes in data.items()
    }


def load_special(path: str | Path) -> SpecialRoutes:
    return special_from_json(json.loads(Path(path).read_text(encoding="utf-8")))


def _check_special(special: SpecialRoutes, hosts: int) -> SpecialRoutes:
    """A validated deep copy: typos in a test's spec fail loudly, not as a 404."""
    out: SpecialRoutes = {}
    for h, routes in special.items():
        if not isinstance(h, int) or not 1 <= h <= hosts:
            raise ValueError(f"special: host {h!r} outside 1..{hosts}")
        out[h] = {}
        for path, spec in routes.items():
            if not path.startswith("/") or "?" in path or "#" in path:
                raise ValueError(f"special: {path!r} is not an exact path")
            if unknown := set(spec) - SPECIAL_KEYS:
                raise ValueError(f"special: unknown keys {sorted(unknown)} for {path!r}")
            out[h][path] = json.loads(json.dumps(spec))  # a JSON-able deep copy
    return out


def mirrors_from_json(data: dict[str, Any]) -> dict[int, int]:
    """``mirrors`` as JSON holds it (keys are strings) -> ints."""
    return {int(m): int(s) for m, s in data.items()}


def _check_mirrors(mirrors: dict[int, int], hosts: int) -> dict[int, int]:
    """A validated copy of mirror host -> source host."""
    for m, s in mirrors.items():
        for i in (m, s):
            if not isinstance(i, int) or isinstance(i, bool) or not 1 <= i <= hosts:
                raise ValueError(f"mirrors: host {i!r} outside 1..{hosts}")
        if m == s:
            raise ValueError(f"mirrors: host {m} cannot mirror itself")
        if s in mirrors:
            raise ValueError(f"mirrors: host {m} mirrors host {s}, itself a mirror")
    return dict(sorted(mirrors.items()))


def int_keys_from_json(data: dict[str, Any]) -> dict[int, Any]:
    """``host_pages`` or ``traps`` as JSON holds them (host keys are strings) -> int keys."""
    return {int(h): value for h, value in data.items()}


def _check_host(option: str, h: Any, hosts: int) -> int:
    if not isinstance(h, int) or isinstance(h, bool) or not 1 <= h <= hosts:
        raise ValueError(f"{option}: host {h!r} outside 1..{hosts}")
    return h


def _check_host_pages(
    host_pages: dict[int, int], hosts: int, mirrors: dict[int, int]
) -> dict[int, int]:
    """A validated copy of host -> page count."""
    for h, n in host_pages.items():
        _check_host("host_pages", h, hosts)
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"host_pages: host {h} needs a page count >= 1, not {n!r}")
        if h in mirrors:
            raise ValueError(f"host_pages: host {h} is a mirror: it has its source's pages")
    return dict(sorted(host_pages.items()))


def _check_traps(traps: dict[int, str], hosts: int) -> dict[int, str]:
    """A validated copy of host -> trap kind."""
    for h, kind in traps.items():
        _check_host("traps", h, hosts)
        if kind not in TRAP_KINDS:
            raise ValueError(f"traps: unknown kind {kind!r} for host {h} (not in {TRAP_KINDS})")
    return dict(sorted(traps.items()))


def _check_site_links(site_links: Any) -> dict[str, int]:
    """``{root-relative href template: every}``, validated (JSON gives the same dict)."""
    if not isinstance(site_links, dict):
        raise ValueError(f"site_links: {site_links!r} is not {{href template: every}}")
    for template, every in site_links.items():
        if not isinstance(template, str) or not template.startswith("/"):
            raise ValueError(f"site_links: {template!r} is not a root-relative href")
        if not isinstance(every, int) or every < 1:
            raise ValueError(f"site_links: {template!r} every {every!r} is not an int >= 1")
    return dict(site_links)


def _check_popular(popular: Any, hosts: int) -> tuple[int, str] | None:
    """``(host, path)`` (a list from JSON too) -> a tuple; the path must be free."""
    if popular is None:
        return None
    if not isinstance(popular, tuple | list) or len(popular) != 2:
        raise ValueError(f"popular: {popular!r} is not (host, path)")
    h, path = _check_host("popular", popular[0], hosts), popular[1]
    if (
        not isinstance(path, str)
        or not path.startswith("/")
        or "?" in path
        or "#" in path
        or path in ("/", "/echo")
        or _page_number(path) is not None
        or path.startswith(("/go/", "/flaky/"))
    ):
        raise ValueError(f"popular: {path!r} is not a free exact path")
    return h, path


def month_index(month: str) -> int | None:
    """``YYYY-MM`` (year >= 1, exactly so formatted) -> months since 0001-01; else None."""
    found = _MONTH.fullmatch(month)
    if not found:
        return None
    year, mon = int(found.group(1)), int(found.group(2))
    if year < 1 or not 1 <= mon <= 12 or f"{year:04d}-{mon:02d}" != month:
        return None
    return (year - 1) * 12 + mon - 1


def month_name(index: int) -> str:
    """Inverse of ``month_index``."""
    return f"{index // 12 + 1:04d}-{index % 12 + 1:02d}"


def trap_page(kind: str, path: str, query: str = "") -> str | None:
    """What a trap of ``kind`` serves at ``path`` (no query) and ``query``: the page's
    key (the month, the session page number, the path or the token), None for a 404."""
    if kind == "soft404":  # every path (the host's own pages are routed before)
        return path
    if kind == "farm":
        return path if _FARM_PATH.fullmatch(path) else None
    if kind == "calendar":
        months = parse_qs(query).get("month") if path == "/calendar" else None
        return months[0] if months and month_index(months[0]) is not None else None
    pattern = {
        "session": _SESSION_PATH,
        "repeat": _REPEAT_PATH,
        "minted": _MINTED_PATH,
        "pathsession": _PATHSESSION_PATH,
    }[kind]
    found = pattern.fullmatch(path)
    if not found:
        return None
    if kind == "pathsession":
        return found.group(1)
    if kind == "session":
        return found.group(1) if int(found.group(1)) < SESSION_PAGES else None
    return path.removeprefix("/m/") if kind == "minted" else path


def fetches_by_host(log: Iterable[RequestRecord], robots: bool = False) -> Counter[str]:
    """Host IP -> requests it served (robots.txt ones only if ``robots``)."""
    return Counter(rec.host_ip for rec in log if robots or rec.path != "/robots.txt")


SYLLABLES = ("ka", "lo", "ven", "tri", "mar", "sol", "dun", "ber", "qui", "ral", "hob", "zen",
             "pra", "gul", "mis", "tor", "ely", "wan", "cor", "fiz")  # fmt: skip
TOPIC_TERMS_PER_PAGE = 40
TOPIC_SHARE = 0.15  # of a sentence's words: what an article is about


def _topic_terms(rng: random.Random) -> list[str]:
    """A page's own vocabulary: names, terms and numbers no other page shares
    by design, as real articles have (common words alone make all pages alike)."""
    terms = []
    for _ in range(TOPIC_TERMS_PER_PAGE):
        if rng.random() < 0.2:
            terms.append(str(rng.randint(10, 99_999)))
        else:
            word = "".join(rng.choices(SYLLABLES, k=rng.randint(2, 4)))
            terms.append(word.capitalize() if rng.random() < 0.5 else word)
    return terms


def _sentence(rng: random.Random, n: int, topic: list[str] | None = None) -> str:
    """A capitalised sentence of ``n`` words, common English and, given a page's
    topic terms, some of those; maybe with a comma."""
    words = rng.choices(ENGLISH_WORDS, cum_weights=_WORD_CUM_WEIGHTS, k=n)
    for i in range(n if topic else 0):
        if rng.random() < TOPIC_SHARE:
            words[i] = rng.choice(topic or [""])
    if n >= 8 and rng.random() < 0.4:
        words[rng.randrange(3, n - 3)] += ","
    text = " ".join(words)
    return text[0].upper() + text[1:] + rng.choice("..........??!")


def _paragraphs(rng: random.Random, nbytes: int) -> list[str]:
    """Paragraphs of 3-6 sentences of 8-20 words, ``nbytes`` of text or a sentence more."""
    topic = _topic_terms(rng)
    paragraphs: list[str] = []
    size = 0
    while size < nbytes:
        sentences: list[str] = []
        for _ in range(rng.randint(3, 6)):
            sentences.append(_sentence(rng, rng.randint(8, 20), topic))
            size += len(sentences[-1]) + 1
            if size >= nbytes:
                break
        paragraphs.append(" ".join(sentences))
    return paragraphs


@dataclass(frozen=True)
class SiteTemplate:
    """The text a realistic host shares between all its pages (its mirrors too)."""

    name: str
    tagline: str
    nav: tuple[str, ...]  # navigation labels (not links: a page's links are its graph's)
    about: str
    footer: tuple[str, ...]  # footer lines, before the page's "Last updated" line


class Reply(NamedTuple):
    status: int  # 0: abort the connection (RST) without answering
    content_type: str
    payload: bytes
    headers: tuple[tuple[str, str], ...] = ()  # extra response headers


@dataclass(frozen=True)
class Link:
    host: int  # 1-based host index; 0 = the out-of-scope host
    page: int
    form: str  # "abs" | "net" (//host/path) | "root" (/path) | "rel" (../path)
    query: str = ""
    fragment: str = ""


@dataclass
class RequestRecord:
    """One request as the server saw it. Times are ``time.time()`` (wall clock),
    so logs of a separate web process compare with the crawler's clock."""

    host_ip: str
    port: int
    path: str  # path with query, as sent
    method: str
    start: float  # request line parsed
    end: float  # just before the response is written
    status: int
    headers: dict[str, str]  # lowercased names; repeats joined with ", "
    body_len: int
    body_sha1: str
    # The conditional headers as sent (None: absent); defaults keep old logs loadable.
    if_none_match: str | None = None
    if_modified_since: str | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host_ip}:{self.port}{self.path}"


@dataclass
class HostPoliteness:
    requests: int
    max_in_flight: int
    min_gap: float | None  # least start-to-start gap; None below 2 requests
    gaps_below_delay: int  # start-to-start gaps < delay - tolerance
    min_idle: float | None  # least end-of-earlier-fetches to next start (<0: overlap)
    idle_below_delay: int  # such idle gaps < delay - tolerance (CRAWL_HOST_DELAY semantics)


def politeness_report(
    log: Iterable[RequestRecord], delay: float, tolerance: float = 0.0
) -> dict[str, HostPoliteness]:
    """Per host IP: request count, peak concurrency and the gaps between fetches."""
    by_host: dict[str, list[RequestRecord]] = defaultdict(list)
    for rec in log:
        by_host[rec.host_ip].append(rec)
    report = {}
    for ip, recs in sorted(by_host.items()):
        recs.sort(key=lambda r: r.start)
        # Ends sort before starts at the same instant: touching intervals don't overlap.
        events = sorted([(r.start, 1) for r in recs] + [(r.end, -1) for r in recs])
        in_flight = peak = 0
        for _, step in events:
            in_flight += step
            peak = max(peak, in_flight)
        gaps = [b.start - a.start for a, b in pairwise(recs)]
        idles, last_end = [], recs[0].end
        for rec in recs[1:]:
            idles.append(rec.start - last_end)
            last_end = max(last_end, rec.end)
        report[ip] = HostPoliteness(
            requests=len(recs),
            max_in_flight=peak,
            min_gap=min(gaps, default=None),
            gaps_below_delay=sum(g < delay - tolerance for g in gaps),
            min_idle=min(idles, default=None),
            idle_below_delay=sum(g < delay - tolerance for g in idles),
        )
    return report


def fetch_counts(log: Iterable[RequestRecord]) -> Counter[str]:
    """Canonical URL -> how many times it was fetched."""
    return Counter(canonical_url(rec.url) for rec in log)


def page_counts(log: Iterable[RequestRecord]) -> Counter[str]:
    """Like fetch_counts, without robots.txt fetches."""
    return fetch_counts(rec for rec in log if rec.path != "/robots.txt")


def load_log(path: str | Path) -> list[RequestRecord]:
    with open(path, encoding="utf-8") as fh:
        return [RequestRecord(**json.loads(line)) for line in fh if line.strip()]


def bind_sockets(ips: list[str], port: int | None = None) -> tuple[int, list[socket.socket]]:
    """Listening sockets on one port for every IP; a random port unless given."""
    pick = random.Random(os.urandom(8))  # not the graph's seeded RNG
    for _ in range(100):
        p = port or pick.randint(20000, 60000)
        socks: list[socket.socket] = []
        try:
            for ip in ips:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((ip, p))
                sock.listen(1024)
                sock.setblocking(False)
            return p, socks
        except OSError as exc:
            for sock in socks:
                sock.close()
            if exc.errno != errno.EADDRINUSE or port:
                raise
    raise RuntimeError("no free port found for the test web")


class TestWeb:
    """The web's graph and its server. ``start()`` serves it from a thread."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        hosts: int = 20,
        pages: int = 30,
        latency_ms: tuple[float, float] | float = 0.0,
        links: int = 5,
        cross_links: int = 1,
        links_out_of_scope: int = 0,
        query_variants: int = 1,
        body_bytes: int = 2048,
        seed: int = 1,
        port: int | None = None,
        special: SpecialRoutes | None = None,
        realistic: bool = False,
        mirrors: dict[int, int] | None = None,
        host_pages: dict[int, int] | None = None,
        traps: dict[int, str] | None = None,
        popular: tuple[int, str] | None = None,
        validators: bool = False,
        site_links: dict[str, int] | None = None,
    ) -> None:
        if not 1 <= hosts <= MAX_HOSTS or pages < 1:
            raise ValueError("need 1 <= hosts <= MAX_HOSTS and pages >= 1")
        self.special = _check_special(special or {}, hosts)
        self.mirrors = _check_mirrors(mirrors or {}, hosts)  # mirror host -> source host
        self.host_pages = _check_host_pages(host_pages or {}, hosts, self.mirrors)
        self.traps = _check_traps(traps or {}, hosts)  # host -> trap kind
        self.popular = _check_popular(popular, hosts)  # (host, path) or None
        self.realistic = bool(realistic)
        self.validators = bool(validators)
        self.site_links = _check_site_links(site_links or {})
        lo, hi = latency_ms if isinstance(latency_ms, tuple) else (latency_ms, latency_ms)
        self.params: dict[str, Any] = dict(
            hosts=hosts,
            pages=pages,
            latency_ms=[lo, hi],
            links=links,
            cross_links=cross_links,
            links_out_of_scope=links_out_of_scope,
            query_variants=query_variants,
            body_bytes=body_bytes,
            seed=seed,
            special=self.special,
            realistic=self.realistic,
            mirrors=self.mirrors,
            host_pages=self.host_pages,
            traps=self.traps,
            popular=self.popular,
            validators=self.validators,
            site_links=self.site_links,
        )
        self.hosts, self.pages, self.body_bytes, self.seed = hosts, pages, body_bytes, seed
        self.port = port or 0
        self.log: list[RequestRecord] = []
        self.ips = [host_ip(i) for i in range(1, hosts + 1)]
        self._host_of = {ip: i for i, ip in enumerate(self.ips, 1)}
        rng = random.Random(seed)
        self.latency = {ip: rng.uniform(lo, hi) / 1000 for ip in self.ips}  # seconds
        # ip -> ready(path): that host's requests wait (before its latency) until
        # ready(path) is true, at most HOLD_MAX_SECONDS; ready runs on the server's
        # loop, beside ``log``. For tests that order one host's answers after what
        # the crawler asked of another (the mirror after its source's verdict).
        self.hold: dict[str, Callable[[str], bool]] = {}
        self.variants: dict[int, list[int]] = {}  # host -> pages with a query variant
        self.graph: dict[tuple[int, int], list[Link]] = {}
        for h in range(1, hosts + 1):
            self.variants[h] = sorted(rng.sample(range(pages), min(query_variants, pages)))
            for k in range(pages):
                page_links = self._page_links(
                    rng, h, k, pages, links, cross_links, links_out_of_scope
                )
                if h not in self.host_pages:  # drawn all the same: see below
                    self.graph[h, k] = page_links
        # A host_pages host's ``pages`` pages were drawn above all the same, so that the other
        # hosts' graphs stay as they were; its own come from its own RNG, plus index links.
        for h, n in self.host_pages.items():
            own = random.Random(f"host/{seed}/{h}")
            self.variants[h] = sorted(own.sample(range(n), min(query_variants, n)))
            for k in range(n):
                index = range(INDEX_FANOUT * k + 1, min(INDEX_FANOUT * (k + 1) + 1, n))
                self.graph[h, k] = [
                    *self._page_links(own, h, k, n, links, cross_links, links_out_of_scope),
                    *(Link(h, child, "root") for child in index),
                ]
        # A mirror's own links were drawn above all the same, so that adding a mirror leaves
        # every other host's graph as it was; they are replaced by its source's, remapped.
        for m, s in self.mirrors.items():
            self.variants[m] = list(self.variants[s])
            for k in range(pages):
                del self.graph[m, k]
            for k in range(self.page_count(s)):
                self.graph[m, k] = [
                    replace(link, host=m) if link.host == s else link for link in self.graph[s, k]
                ]
        if self.popular:  # after the mirrors: the popular page is not mirrored
            ph = self.popular[0]
            self.graph[ph, POPULAR_PAGE] = [Link(ph, 0, "root")]
            for h in range(1, hosts + 1):
                form = "root" if h == ph else "abs"
                self.graph[h, 0] = [*self.graph[h, 0], Link(ph, POPULAR_PAGE, form)]
        vocab_rng = random.Random(f"vocab/{seed}")
        letters = "abcdefghijklmnopqrstuvwxyz"
        self._vocab = [
            "".join(vocab_rng.choices(letters, k=vocab_rng.randint(2, 9))) for _ in range(2000)
        ]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._failures_left: dict[tuple[str, str], int] = {}  # (ip, path) -> 503s still to send
        self._special_hits: Counter[tuple[int, str]] = Counter()  # (host, path) -> requests
        self._sites: dict[int, SiteTemplate] = {}
        self._tokens = random.Random(f"tokens/{seed}")  # session ids and minted tokens
        # (host, page) -> version, when not 0; change() runs in the test's thread, the server
        # in its own (or its loop), so both go through the lock.
        self._versions: dict[tuple[int, int], int] = {}
        self._versions_lock = threading.Lock()

    # -- graph ------------------------------------------------------------------

    def _page_links(
        self, rng: random.Random, h: int, k: int, n: int, links: int, cross: int, oos: int
    ) -> list[Link]:
        """Page k's links on host h of n pages (n = ``pages`` draws as ever)."""
        forms = ("abs", "net", "root", "rel")

        def same_host(target: int, query: str = "") -> Link:
            frag = f"s{rng.randint(1, 9)}" if rng.random() < 0.25 else ""
            return Link(h, target, rng.choice(forms), query, frag)

        out = [same_host((k + 1) % n)]  # the chain keeps every page reachable
        out += [same_host(rng.randrange(n)) for _ in range(links - 1)]
        if links >= 2:
            out.append(rng.choice(out))  # the same href twice on one page
        if self.variants[h]:
            pairs = list(VARIANT_QUERY)
            rng.shuffle(pairs)  # b=2&a=1 or a=1&b=2: one canonical URL
            # Page k links to variant k % n, so every variant is linked somewhere.
            out.append(same_host(self.variants[h][k % len(self.variants[h])], "&".join(pairs)))
        for _ in range(cross if self.hosts > 1 else 0):
            other = rng.randrange(1, self.hosts)
            other += other >= h  # any host but this one
            target = rng.randrange(self.pages) % self.page_count(other)
            out.append(Link(other, target, rng.choice(("abs", "net"))))
        out += [Link(0, rng.randrange(self.pages), "abs") for _ in range(oos)]
        rng.shuffle(out)
        return out

    def page_count(self, h: int) -> int:
        """Host h's number of numbered pages (``/`` and ``/p/1`` ..): ``host_pages`` or
        ``pages`` (a mirror's is its source's)."""
        return self.host_pages.get(self.mirrors.get(h, h), self.pages)

    def path_of(self, k: int) -> str:
        """Path of page k (``POPULAR_PAGE``: the popular page's)."""
        return self.popular[1] if k == POPULAR_PAGE and self.popular else page_path(k)

    def base_url(self, i: int) -> str:
        return f"http://{host_ip(i)}:{self.port}/"

    @property
    def seeds(self) -> list[str]:
        return [self.base_url(i) for i in range(1, self.hosts + 1)]

    @property
    def out_of_scope_ips(self) -> list[str]:
        return [OUT_OF_SCOPE_IP] if self.params["links_out_of_scope"] else []

    @property
    def expected_urls(self) -> set[str]:
        """Every URL a correct crawl from ``seeds`` fetches, in canonical form."""
        return self.reachable_urls(lambda url: True)

    def reachable_urls(self, allowed: Callable[[str], bool]) -> set[str]:
        """Canonical URLs a crawl from ``seeds`` reaches by following the page graph
        without fetching any URL for which ``allowed(canonical url)`` is false: such
        a URL is not in the result and its links are not followed. Special routes
        are not part of the graph."""
        bases = [f"http://{ip}:{self.port}" for ip in self.ips]
        queries: dict[str, str] = {}  # as linked -> canonical
        seen: set[tuple[int, int, str]] = set()  # (host, page, canonical query)
        urls: set[str] = set()
        todo: list[tuple[int, int]] = []
        expanded: set[tuple[int, int]] = set()  # a query variant renders as its page

        def reach(h: int, k: int, query: str) -> None:
            if (h, k, query) in seen:
                return
            seen.add((h, k, query))
            url = bases[h - 1] + self.path_of(k) + (f"?{query}" if query else "")
            if allowed(url):
                urls.add(url)
                if (h, k) not in expanded:
                    expanded.add((h, k))
                    todo.append((h, k))

        for h in range(1, self.hosts + 1):
            reach(h, 0, "")
        while todo:
            for link in self.graph[todo.pop()]:
                if link.host:  # host 0 is out of scope
                    if link.query not in queries:
                        queries[link.query] = canonical_query(link.query)
                    reach(link.host, link.page, queries[link.query])
        return urls

    def mirror_pairs(self) -> list[tuple[str, str]]:
        """(mirror page URL, source page URL) for every page of every mirror, query
        variants included, in canonical form (as in ``expected_urls``)."""
        variant = canonical_query("&".join(VARIANT_QUERY))
        pairs = []
        for m, s in self.mirrors.items():
            mirror, source = (f"http://{host_ip(i)}:{self.port}" for i in (m, s))
            for k in range(self.page_count(s)):
                path = page_path(k)
                pairs.append((mirror + path, source + path))
                if k in self.variants[m]:
                    pairs.append((f"{mirror}{path}?{variant}", f"{source}{path}?{variant}"))
        return pairs

    def href(self, link: Link) -> str:
        ip = host_ip(link.host) if link.host else OUT_OF_SCOPE_IP
        path = self.path_of(link.page) + (f"?{link.query}" if link.query else "")
        path += f"#{link.fragment}" if link.fragment else ""
        prefix = {
            "abs": f"http://{ip}:{self.port}",
            "net": f"//{ip}:{self.port}",
            "root": "",
            "rel": "..",
        }[link.form]
        return prefix + path  # "../p/3" resolves to /p/3 from both "/" and "/p/N"

    # -- versions and validators -------------------------------------------------------

    def _check_page(self, h: int, k: int) -> None:
        if (h, k) not in self.graph:  # a typo would otherwise change nothing the server serves
            raise KeyError(f"no page {k} on host {h}")

    def change(self, h: int, k: int) -> int:
        """Bump page k of host h to its next version; returns the new version."""
        self._check_page(h, k)
        with self._versions_lock:
            self._versions[h, k] = n = self._versions.get((h, k), 0) + 1
        return n

    def version(self, h: int, k: int) -> int:
        """Page k of host h's current version (0 until changed)."""
        self._check_page(h, k)
        with self._versions_lock:
            return self._versions.get((h, k), 0)

    @staticmethod
    def etag(h: int, k: int, version: int) -> str:
        """The ETag (quotes included) of a page's version."""
        return f'"{h}-{k}-{version}"'

    @staticmethod
    def last_modified(version: int) -> datetime:
        """A version's Last-Modified: later for every change."""
        return VALIDATOR_BASE + timedelta(days=version)

    def validator_headers(self, h: int, k: int, version: int) -> tuple[tuple[str, str], ...]:
        """ETag and Last-Modified of a page's version, as sent."""
        modified = format_datetime(self.last_modified(version), usegmt=True)
        return (("ETag", self.etag(h, k, version)), ("Last-Modified", modified))

    @staticmethod
    def revision_html(version: int) -> str:
        """The paragraph version n > 0 adds (none at version 0: pages render as ever).
        Uniform draws, not Zipf ones: more distinct words, so a SimHash moves more."""
        if version <= 0:
            return ""
        words = random.Random(f"revision/{version}").choices(ENGLISH_WORDS, k=REVISION_WORDS)
        return f"<p>Revision {version}: {' '.join(words)}.</p>\n"

    def _not_modified(self, h: int, k: int, version: int, headers: dict[str, str]) -> bool:
        """Whether the request's conditional headers match this version (RFC 9110 13.2.2:
        If-None-Match wins; If-Modified-Since only without it)."""
        if (tags := headers.get("if-none-match")) is not None:
            if tags.strip() == "*":
                return True
            current = self.etag(h, k, version)
            # Weak comparison, as If-None-Match calls for: W/"x" matches "x".
            return any(tag.strip().removeprefix("W/") == current for tag in tags.split(","))
        if (since := headers.get("if-modified-since")) is not None:
            try:
                when = parsedate_to_datetime(since)
            except (TypeError, ValueError, IndexError):
                return False  # an invalid date is ignored (RFC 9110 13.1.3)
            when = when if when.tzinfo else when.replace(tzinfo=UTC)  # "-0000": UTC anyway
            return when >= self.last_modified(version)
        return False

    def _page_reply(self, h: int, k: int, method: str, headers: dict[str, str]) -> Reply:
        """A page's 200, or its 304; the version is read once, so body and validators agree
        even if change() runs meanwhile."""
        version = self.version(h, k)
        if not self.validators:
            return Reply(200, "text/html; charset=utf-8", self.render(h, k, version))
        validators = self.validator_headers(h, k, version)
        if method in ("GET", "HEAD") and self._not_modified(h, k, version, headers):
            return Reply(304, "", b"", validators)
        return Reply(200, "text/html; charset=utf-8", self.render(h, k, version), validators)

    # -- rendering ----------------------------------------------------------------------

    def render(self, h: int, k: int, version: int | None = None) -> bytes:
        """Page k of host h (``POPULAR_PAGE``: the popular page) at ``version`` (default:
        its current one); a trap host's ``/`` links to its trap too, freshly minted ids
        and all."""
        if version is None:
            version = self.version(h, k)
        if self.realistic:
            return self._render_realistic(h, k, version)
        src = self.mirrors.get(h, h)  # a mirror shows its source's title and text
        title = f"Host {src} popular page" if k == POPULAR_PAGE else f"Host {src} page {k}"
        items = (
            "".join(
                f'<li><a href="{html.escape(self.href(link))}">{_plain_link_text(link)}</a></li>\n'
                for link in self.graph[h, k]
            )
            + _items_html(self._trap_entry(h) if k == 0 else [])
            + _items_html(self._site_links(k))
        )
        # Filler differs per page, so near-duplicate detection sees distinct pages.
        rng = random.Random(f"{self.seed}/{src}/{k}" + _version_suffix(version))
        revision = self.revision_html(version)
        return self._plain_page(title, self._banner_html(h), items, rng, revision)

    def _plain_page(
        self, title: str, banner: str, items: str, rng: random.Random, revision: str = ""
    ) -> bytes:
        words, size = [], 0
        while size < self.body_bytes:
            words.append(rng.choice(self._vocab))
            size += len(words[-1]) + 1
        half = len(words) // 2
        page = (
            f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title>'
            f"</head>\n<body><h1>{title}</h1>\n{banner}"
            f"<p>{' '.join(words[:half])}</p>\n"
            f"<ul>\n{items}</ul>\n<p>{' '.join(words[half:])}</p>\n{revision}</body></html>\n"
        )
        return page.encode()

    # -- traps --------------------------------------------------------------------------

    def token(self) -> str:
        """A fresh session id or minted token: 16 hex digits from the web's own RNG."""
        return f"{self._tokens.getrandbits(64):016x}"

    def _trap_entry(self, h: int) -> list[tuple[str, str]]:
        """(href, text) of the trap links on trap host h's ``/`` (none on other hosts)."""
        kind = self.traps.get(h)
        if kind == "calendar":
            return [(f"/calendar?month={CALENDAR_START}", "calendar")]
        if kind == "session":
            sid = self.token()
            return [(f"/s/{j}?sid={sid}", f"session page {j}") for j in range(SESSION_PAGES)]
        if kind == "repeat":
            return [("x/", "repeat")]
        if kind == "minted":
            return [(f"/m/{self.token()}", "more") for _ in range(MINTED_LINKS)]
        if kind == "pathsession":
            sid = self.token()
            return [(f"/ps/{sid}/page{j}.html", f"page {j}") for j in (1, 2)]
        if kind == "soft404":
            return [("missing/", "a page that is not there")]
        if kind == "farm":
            return self._farm_links(h, "/")
        return []

    def trap_kind(self, url: str) -> str | None:
        """The trap kind of a URL a trap serves (200), else None (normal pages, the popular
        page, 404s, special routes and other hosts' URLs included)."""
        parts = urlsplit(url)
        h = self._host_of.get(parts.hostname or "", 0)
        kind = self.traps.get(h)
        if kind is None or parts.path in self.special.get(h, {}) or self.popular == (h, parts.path):
            return None
        if kind == "soft404" and self._own_page(h, parts.path):
            return None
        return kind if trap_page(kind, parts.path, parts.query) is not None else None

    def trap_fetches(self, log: Iterable[RequestRecord]) -> Counter[int]:
        """Trap host index -> requests for its trap URLs (every trap host, 0s included)."""
        counts: Counter[int] = Counter(dict.fromkeys(self.traps, 0))
        for rec in log:
            if self.trap_kind(rec.url):
                counts[self._host_of[rec.host_ip]] += 1
        return counts

    def render_trap(self, h: int, path: str, query: str = "") -> bytes | None:
        """Trap host h's page at ``path`` (no query) and ``query``; None: a 404."""
        kind = self.traps.get(h)
        key = trap_page(kind, path, query) if kind else None
        if kind is None or key is None:
            return None
        if kind == "soft404":
            return self._render_soft404(h, path)
        if kind == "farm":
            return self._render_farm(h, path)
        links: list[tuple[str, str]] = []
        if kind == "calendar":
            month = month_index(key)
            assert month is not None
            title = f"Host {h} calendar {key}"
            if month > 0:
                links.append((f"/calendar?month={month_name(month - 1)}", "previous month"))
            links.append((f"?month={month_name(month + 1)}", "next month"))
        elif kind == "session":
            title = f"Host {h} session page {key}"
            sid = self.token()
            links += [(f"/s/{j}?sid={sid}", f"session page {j}") for j in range(SESSION_PAGES)]
        elif kind == "repeat":
            title = f"Host {h} repeat page {key}"
            links += [("x/", "x"), ("y/x/", "y x")]
        elif kind == "pathsession":
            title = f"Host {h} page {key}"
            sid, j = self.token(), int(key)
            links += [(f"/ps/{sid}/page{c}.html", f"page {c}") for c in (2 * j + 1, 2 * j + 2)]
        else:
            title = f"Host {h} page {key}"
            links += [(f"/m/{self.token()}", "more") for _ in range(MINTED_LINKS)]
        links.append(("/", "home"))
        filler = f"trap/{self.seed}/{h}/{kind}" + (
            f"/{key}" if kind in ("session", "pathsession") else ""
        )
        return self._plain_page(html.escape(title), "", _items_html(links), random.Random(filler))

    def _own_page(self, h: int, path: str) -> bool:
        """Whether ``path`` is one of host h's numbered pages (``/`` included)."""
        k = 0 if path == "/" else _page_number(path)
        return k is not None and k < self.page_count(h)

    def _render_soft404(self, h: int, path: str) -> bytes:
        """The soft-404 template with ``path`` echoed, linking deeper (relative)."""
        depth = len([part for part in path.split("/") if part])
        links = [("more/", "more"), (f"other-{depth + 1}/", "other"), ("/", "home")]
        rng = random.Random(f"trap/{self.seed}/{h}/soft404")
        words, size = [], 0
        while size < TRAP_TEMPLATE_BYTES:
            words.append(rng.choice(self._vocab))
            size += len(words[-1]) + 1
        page = (
            '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Page not found</title>'
            f"</head>\n<body><h1>Page not found</h1>\n<p>Sorry, {html.escape(path)} is not "
            f"here.</p>\n<p>{' '.join(words)}</p>\n<ul>\n{_items_html(links)}</ul>\n"
            "</body></html>\n"
        )
        return page.encode()

    def _farm_links(self, h: int, path: str) -> list[tuple[str, str]]:
        """The FARM_LINKS farm pages linked from ``path``, drawn from the path."""
        rng = random.Random(f"farm/{self.seed}/{h}/{path}")
        out = []
        for _ in range(FARM_LINKS):
            first, second = (rng.choice(ENGLISH_WORDS[:300]) for _ in range(2))
            href = f"/f/{first}-{second}-{rng.randrange(1_000_000)}.html"
            out.append((href, f"{first} {second}"))
        return out

    def _render_farm(self, h: int, path: str) -> bytes:
        """A farm page: the farm's one text with the path's words in a few places."""
        found = _FARM_PATH.fullmatch(path)
        assert found is not None
        first, second, n = found.groups()
        links = [*self._farm_links(h, path), ("/", "home")]
        words, size = [], 0
        rng = random.Random(f"trap/{self.seed}/{h}/farm")
        while size < TRAP_TEMPLATE_BYTES:
            words.append(rng.choice(self._vocab))
            size += len(words[-1]) + 1
        for i, word in enumerate((first, second, n), 1):
            words[i * len(words) // 4] = word
        # The shared text four times over weighs four times the changed words.
        text = "".join(f"<p>{' '.join(words)}</p>\n" for _ in range(4))
        page = (
            '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Best deals</title>'
            f"</head>\n<body><h1>Best deals</h1>\n{text}"
            f"<ul>\n{_items_html(links)}</ul>\n</body></html>\n"
        )
        return page.encode()

    # -- realistic pages and mirrors ----------------------------------------------------

    def site(self, h: int) -> SiteTemplate:
        """Host h's site template (its source's, for a mirror)."""
        h = self.mirrors.get(h, h)
        if h not in self._sites:
            rng = random.Random(f"site/{self.seed}/{h}")
            name = " ".join(
                rng.choice(words) for words in (SITE_ADJECTIVES, SITE_NOUNS, SITE_KINDS)
            )
            name = f"The {name}"
            sections = rng.sample(NAV_SECTIONS, 9)
            since, year = rng.randint(1995, 2012), rng.randint(2020, 2025)
            slug = name.lower().replace(" ", "")
            street = f"{rng.choice(SITE_NOUNS)} {rng.choice(STREET_KINDS)}"
            place = f"{rng.choice(CITIES)}, {rng.choice(STATES)} {rng.randrange(10000, 99999)}"
            about = (
                f"{name} is an independent publication covering {sections[0].lower()}, "
                f"{sections[1].lower()} and {sections[2].lower()} since {since}. "
                + " ".join(_sentence(rng, rng.randint(12, 16)) for _ in range(3))
                + f" Contact the newsroom at news@{slug}.example; corrections and complaints go "
                f"to editor@{slug}.example."
            )
            footer = (
                "Subscribe to our newsletter for a weekly summary of new stories, "
                "events and letters from our readers. " + _sentence(rng, rng.randint(14, 18)),
                f"{name}, {rng.randint(10, 999)} {street}, {place}. "
                f"Phone: (555) {rng.randrange(100, 999)}-{rng.randrange(1000, 9999)}. "
                f"Email: contact@{slug}.example",
                f"\u00a9 {year} {name}. All rights reserved. Reproduction of any part of this "
                "site without written permission is prohibited.",
                "Privacy Policy | Terms of Use | Cookie Settings | Accessibility | Contact Us",
            )
            tagline = _sentence(rng, rng.randint(6, 9))
            self._sites[h] = SiteTemplate(name, tagline, ("Home", *sections), about, footer)
        return self._sites[h]

    def headline(self, h: int, k: int) -> str:
        """Title of a realistic page (a mirror's is its source's)."""
        rng = random.Random(f"headline/{self.seed}/{self.mirrors.get(h, h)}/{k}")
        return " ".join(
            w.capitalize() for w in rng.choices(ENGLISH_WORDS[100:], k=rng.randint(3, 7))
        )

    def last_updated(self, h: int, k: int) -> str:
        """The footer's date (YYYY-MM-DD) of a realistic page; a mirror's differs from
        its source's."""

        def day(i: int) -> int:
            return random.Random(f"updated/{self.seed}/{i}/{k}").randrange(3650)

        d = day(h)
        if h in self.mirrors and d == day(self.mirrors[h]):
            d = (d + 1) % 3650
        return (FIRST_UPDATE + timedelta(days=d)).isoformat()

    def banner(self, m: int) -> str:
        """The announcement of mirror ``m`` (15-25 words), the same on all its pages."""
        rng = random.Random(f"banner/{self.seed}/{m}")
        return "Mirror notice: " + _sentence(rng, rng.randint(13, 23))

    def _banner_html(self, h: int) -> str:
        if h not in self.mirrors:
            return ""
        return f'<div class="banner">{html.escape(self.banner(h))}</div>\n'

    def _site_links(self, k: int) -> list[tuple[str, str]]:
        """Page k's site links (``site_links``) as (href, text)."""
        if k < 0:  # the popular page: not a numbered page
            return []
        return [
            (template.replace("{k}", str(k)), f"Site link {n + 1}")
            for n, (template, every) in enumerate(self.site_links.items())
            if k % every == 0
        ]

    def _link_text(self, link: Link) -> str:
        return self.headline(link.host, link.page) if link.host else f"Partner resource {link.page}"

    def _render_realistic(self, h: int, k: int, version: int = 0) -> bytes:
        esc = html.escape
        site, headline = self.site(h), self.headline(h, k)
        rng = random.Random(
            f"body/{self.seed}/{self.mirrors.get(h, h)}/{k}" + _version_suffix(version)
        )
        paragraphs = [f"<p>{esc(p)}</p>\n" for p in _paragraphs(rng, self.body_bytes)]
        half = (len(paragraphs) + 1) // 2
        nav = "".join(f"<li><span>{esc(label)}</span></li>" for label in site.nav)
        nav += _items_html(self._site_links(k)).replace("\n", "")
        related = "".join(
            f'<li><a href="{esc(self.href(link))}">{esc(self._link_text(link))}</a></li>\n'
            for link in self.graph[h, k]
        ) + _items_html(self._trap_entry(h) if k == 0 else [])
        footer = "".join(f"<p>{esc(line)}</p>\n" for line in site.footer)
        page = (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{esc(headline)} | {esc(site.name)}</title>\n"
            '<meta name="viewport" content="width=device-width, initial-scale=1"></head>\n'
            f'<body>\n<header class="site-header"><div class="site-name">{esc(site.name)}</div>\n'
            f'<p class="tagline">{esc(site.tagline)}</p>\n<nav><ul>{nav}</ul></nav>\n</header>\n'
            f"<main>\n<article>\n<h1>{esc(headline)}</h1>\n{self._banner_html(h)}"
            + "".join(paragraphs[:half])
            + f'<h2>Related articles</h2>\n<ul class="related">\n{related}</ul>\n'
            + "".join(paragraphs[half:])
            + self.revision_html(version)
            + f"</article>\n<aside><h2>About {esc(site.name)}</h2>\n<p>{esc(site.about)}</p>"
            f'</aside>\n</main>\n<footer class="site-footer">\n{footer}'
            f'<p class="updated">Last updated: {self.last_updated(h, k)}</p>\n</footer>\n'
            "</body></html>\n"
        )
        return page.encode()

    def describe(self) -> dict[str, Any]:
        """JSON-able description: what the ready file holds."""
        return {
            "pid": os.getpid(),
            "port": self.port,
            "hosts": self.ips,
            "seeds": self.seeds,
            "expected_urls": sorted(self.expected_urls),
            "out_of_scope": self.out_of_scope_ips,
            "latency_s": self.latency,
            "params": self.params,  # with "special"; JSON makes its host keys strings
            "mirror_pairs": self.mirror_pairs(),
            "trap_hosts": {host_ip(h): kind for h, kind in self.traps.items()},  # IP -> kind
            "popular_url": self.popular_url,
        }

    @property
    def popular_url(self) -> str | None:
        """The popular page's URL (as in ``expected_urls``), or None."""
        if not self.popular:
            return None
        return f"http://{host_ip(self.popular[0])}:{self.port}{self.popular[1]}"

    # -- HTTP ---------------------------------------------------------------------

    def _route(
        self,
        ip: str,
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes,
        query: str = "",
    ) -> Reply:
        h = self._host_of.get(ip)
        spec = self.special.get(h, {}).get(path) if h is not None else None
        if h is not None and spec is not None:
            self._special_hits[h, path] += 1
            if "times" not in spec or self._special_hits[h, path] <= int(spec["times"]):
                return self._special_reply(ip, spec)
        # /go/N answers 302 to /p/N; /flaky/F/N answers 503 F times, then 302 to /p/N.
        parts = path.split("/")
        if len(parts) == 4 and parts[1] == "flaky":
            left = self._failures_left.setdefault((ip, path), int(parts[2]))
            if left > 0:
                self._failures_left[ip, path] = left - 1
                return Reply(503, "text/plain", b"try again\n")
            parts = ["", "go", parts[3]]
        if len(parts) == 3 and parts[1] == "go" and parts[2].isdigit():
            return Reply(302, "text/plain", b"", (("Location", "/p/" + parts[2]),))
        if path == "/echo":
            echo = {
                "method": method,
                "headers": headers,
                "body_b64": base64.b64encode(body).decode(),
            }
            return Reply(200, "application/json", json.dumps(echo).encode())
        if h is not None and path.startswith("/"):
            k = 0 if path == "/" else _page_number(path)
            if k is not None and 0 <= k < self.page_count(h):
                return self._page_reply(h, k, method, headers)
            if self.popular == (h, path):
                return self._page_reply(h, POPULAR_PAGE, method, headers)
            if h in self.traps and (trap := self.render_trap(h, path, query)) is not None:
                return Reply(200, "text/html; charset=utf-8", trap)
        return Reply(404, "text/plain", b"not found\n")

    def _special_delay(self, ip: str, path: str) -> float:
        """Seconds a special route waits before answering (its ``delay``)."""
        h = self._host_of.get(ip)
        spec = self.special.get(h, {}).get(path) if h is not None else None
        return float(spec.get("delay", 0.0)) if spec else 0.0

    def _special_reply(self, ip: str, spec: dict[str, Any]) -> Reply:
        if spec.get("reset"):
            return Reply(0, "", b"")
        base = f"http://{ip}:{self.port}"
        if "body_b64" in spec:  # binary (a PDF): sent as is, no {base}
            payload = base64.b64decode(spec["body_b64"])
        else:
            payload = str(spec.get("body", "")).replace("{base}", base).encode()
        payload *= int(spec.get("repeat", 1))
        if spec.get("gzip"):  # a .gz file, not a Content-Encoding
            payload = gzip.compress(payload, mtime=0)
        headers = tuple(
            (str(name), str(value).replace("{base}", base))
            for name, value in spec.get("headers", {}).items()
        )
        ctype = str(spec.get("content_type", "text/plain"))
        return Reply(int(spec.get("status", 200)), ctype, payload, headers)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        ip, port = writer.get_extra_info("sockname")[:2]
        try:
            while line := await reader.readline():
                start = time.time()
                try:
                    method, target, version = line.decode("latin-1").split()
                except ValueError:
                    writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                    break
                headers: dict[str, str] = {}
                while (raw := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = raw.decode("latin-1").partition(":")
                    name, value = name.strip().lower(), value.strip()
                    headers[name] = f"{headers[name]}, {value}" if name in headers else value
                body = await _read_body(reader, headers)
                conn = headers.get("connection", "").lower()
                keep = "close" not in conn and (version == "HTTP/1.1" or "keep-alive" in conn)
                if (ready := self.hold.get(ip)) is not None:
                    await _held(ready, urlsplit(target).path)
                await asyncio.sleep(self.latency.get(ip, 0.0))
                parts = urlsplit(target)  # absolute-form targets too
                if (delay := self._special_delay(ip, parts.path)) > 0:
                    await asyncio.sleep(delay)
                path = parts.path + (f"?{parts.query}" if parts.query else "")
                status, ctype, payload, extra = self._route(
                    ip, method, parts.path, headers, body, parts.query
                )
                # A 304 has no content, so no Content-Length (it would have to be the 200's).
                content = (
                    f"Content-Type: {ctype}\r\nContent-Length: {len(payload)}\r\n"
                    if status != 304
                    else ""
                )
                head = (
                    f"HTTP/1.1 {status} {REASONS.get(status, 'Other')}\r\n{content}"
                    f"Connection: {'keep-alive' if keep else 'close'}\r\n"
                    + "".join(f"{name}: {value}\r\n" for name, value in extra)
                    + "\r\n"
                ).encode("latin-1")
                end = time.time()
                # Logged before the write: a client holding the response finds its record.
                sha1 = hashlib.sha1(body).hexdigest()
                self.log.append(RequestRecord(
                    ip, port, path, method, start, end, status, headers, len(body), sha1,
                    headers.get("if-none-match"), headers.get("if-modified-since"),
                ))  # fmt: skip
                if status == 0:  # reset: linger 0 makes close() send an RST, not a FIN
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    writer.transport.abort()
                    break
                writer.write(head + (b"" if method == "HEAD" else payload))
                await writer.drain()
                if not keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass  # client went away or sent garbage: nothing to answer
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def serve(
        self, socks: list[socket.socket], stop: asyncio.Event, on_ready: Callable[[], None]
    ) -> None:
        """Serve on bound sockets until ``stop`` is set, then drop open connections."""
        servers = [await asyncio.start_server(self._handle, sock=s) for s in socks]
        on_ready()
        await stop.wait()
        for server in servers:
            server.close()
        for task in list(self._tasks):  # idle keep-alive connections never end by themselves
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for server in servers:
            await server.wait_closed()

    def bind(self) -> list[socket.socket]:
        self.port, socks = bind_sockets(self.ips + self.out_of_scope_ips, self.port or None)
        return socks

    # -- in-thread mode --------------------------------------------------------------

    def start(self) -> TestWeb:
        socks = self.bind()
        ready, errors = threading.Event(), []
        self._loop = loop = asyncio.new_event_loop()
        self._stop = stop = asyncio.Event()

        def run() -> None:
            try:
                loop.run_until_complete(self.serve(socks, stop, ready.set))
            except BaseException as exc:
                errors.append(exc)
            finally:
                for sock in socks:
                    sock.close()
                ready.set()  # never leave start() waiting

        self._thread = threading.Thread(target=run, name="testweb", daemon=True)
        self._thread.start()
        if not ready.wait(30) or errors:
            raise RuntimeError("test web failed to start") from (errors[0] if errors else None)
        return self

    def stop(self) -> None:
        if self._thread is None or self._loop is None or self._stop is None:
            return
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        self._loop.close()
        self._thread = self._loop = None

    def __enter__(self) -> TestWeb:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def _held(ready: Callable[[str], bool], path: str) -> None:
    """Until ``ready(path)``, or HOLD_MAX_SECONDS: a test that waits too long
    then fails on what it checks, not on a crawl that never ends."""
    deadline = time.monotonic() + HOLD_MAX_SECONDS
    while not ready(path) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


def _plain_link_text(link: Link) -> str:
    return "to the popular page" if link.page == POPULAR_PAGE else f"to page {link.page}"


def _items_html(links: list[tuple[str, str]]) -> str:
    """``<li>`` items of (href, text) links."""
    esc = html.escape
    return "".join(f'<li><a href="{esc(href)}">{esc(text)}</a></li>\n' for href, text in links)


def _version_suffix(version: int) -> str:
    """Appended to a page's text seed: version 0 keeps the seed (and page) it always had; a
    later one redraws the text, since an added paragraph alone can leave a SimHash as it was
    (the site template outweighs it)."""
    return f"/v{version}" if version else ""


def _page_number(path: str) -> int | None:
    if path.startswith("/p/") and path[3:].isdigit() and not path[3:].startswith("0"):
        return int(path[3:])
    return None


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks = []
        while size := int((await reader.readline()).split(b";")[0], 16):
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)  # CRLF after each chunk
        while (await reader.readline()) not in (b"\r\n", b"\n", b""):
            pass  # trailers
        return b"".join(chunks)
    length = int(headers.get("content-length", "0"))
    return await reader.readexactly(length) if length else b""


# -- process mode ------------------------------------------------------------------------


def _parse_range(text: str) -> tuple[float, float]:
    lo, _, hi = text.partition("-")
    return float(lo), float(hi or lo)


def _json_option(text: str) -> Any:
    """Inline JSON, or the path of a JSON file (as WebProcess passes dicts)."""
    data = text if text.lstrip().startswith("{") else Path(text).read_text(encoding="utf-8")
    return json.loads(data)


def _parse_mirrors(text: str) -> dict[int, int]:
    """``--mirrors``: inline JSON, or the path of a JSON file."""
    return mirrors_from_json(_json_option(text))


def _parse_int_keys(text: str) -> dict[int, Any]:
    """``--host-pages`` and ``--traps``: inline JSON, or the path of a JSON file."""
    return int_keys_from_json(_json_option(text))


def _parse_popular(text: str) -> tuple[int, str]:
    """``--popular``: ``H:/path`` or ``H-/path`` (WebProcess joins a tuple with "-"), or
    ``H`` for ``H:/popular``."""
    found = re.fullmatch(r"(\d+)(?:[:-](/.*))?", text)
    if not found:
        raise argparse.ArgumentTypeError(f"not HOST[:PATH]: {text!r}")
    return int(found.group(1)), found.group(2) or "/popular"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=20)
    ap.add_argument("--pages", type=int, default=30)
    ap.add_argument("--latency-ms", type=_parse_range, default=(0.0, 0.0), help="LO-HI or MS")
    ap.add_argument("--links", type=int, default=5)
    ap.add_argument("--cross-links", type=int, default=1)
    ap.add_argument("--links-out-of-scope", type=int, default=0)
    ap.add_argument("--query-variants", type=int, default=1)
    ap.add_argument("--body-bytes", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--port", type=int, default=None)
    ap.add_argument("--special", type=Path, help="JSON file: {host: {path: spec}}")
    ap.add_argument("--realistic", action="store_true", help="real-looking pages")
    ap.add_argument(
        "--mirrors", type=_parse_mirrors, help='JSON {"mirror": source}, or a file holding it'
    )
    ap.add_argument(
        "--host-pages", type=_parse_int_keys, help='JSON {"host": pages}, or a file holding it'
    )
    ap.add_argument(
        "--traps",
        type=_parse_int_keys,
        help=f'JSON {{"host": kind}}, or a file holding it; kinds: {", ".join(TRAP_KINDS)}',
    )
    ap.add_argument(
        "--popular", type=_parse_popular, help="HOST:PATH of a page every host's / links to"
    )
    ap.add_argument(
        "--validators", action="store_true", help="ETag, Last-Modified and conditional GET"
    )
    ap.add_argument(
        "--site-links", type=_json_option, help='JSON {"/href/{k}": every}, or a file holding it'
    )
    ap.add_argument("--log", type=Path, help="JSON lines of requests, written at exit")
    ap.add_argument("--ready-file", type=Path, help="JSON description, written once listening")
    args = ap.parse_args(argv)
    web = TestWeb(
        hosts=args.hosts,
        pages=args.pages,
        latency_ms=args.latency_ms,
        links=args.links,
        cross_links=args.cross_links,
        links_out_of_scope=args.links_out_of_scope,
        query_variants=args.query_variants,
        body_bytes=args.body_bytes,
        seed=args.seed,
        port=args.port,
        special=load_special(args.special) if args.special else None,
        realistic=args.realistic,
        mirrors=args.mirrors,
        host_pages=args.host_pages,
        traps=args.traps,
        popular=args.popular,
        validators=args.validators,
        site_links=args.site_links,
    )

    def ready() -> None:
        if args.ready_file:  # rename: a poller never reads half a file
            tmp = args.ready_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(web.describe()))
            tmp.replace(args.ready_file)

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await web.serve(web.bind(), stop, ready)

    asyncio.run(run())
    if args.log:
        with open(args.log, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(asdict(rec)) + "\n" for rec in web.log)


def web_from_description(description: dict[str, Any]) -> TestWeb:
    """The (unstarted) TestWeb a ready file describes: same graph, same port."""
    params = dict(description["params"])
    lo, hi = params.pop("latency_ms")
    special = special_from_json(params.pop("special", {}))
    mirrors = mirrors_from_json(params.pop("mirrors", {}))
    host_pages = int_keys_from_json(params.pop("host_pages", {}))
    traps = int_keys_from_json(params.pop("traps", {}))
    return TestWeb(
        **params,
        latency_ms=(lo, hi),
        special=special,
        mirrors=mirrors,
        host_pages=host_pages,
        traps=traps,
        port=int(description["port"]),
    )


@dataclass
class WebProcess:
    """A web served by ``python -m testkit.testweb`` in a child process.

    ``start()`` waits for the ready file; ``stop()`` sends SIGTERM and returns the log.
    An option whose value is a dict (e.g. ``special``, ``mirrors``, ``host_pages``,
    ``traps``) is passed as a JSON file; a bool one (``realistic``) as a bare flag when
    true, not at all when false; ``popular`` as ``(host, path)`` or ``"host:/path"``.
    """

    workdir: Path
    options: dict[str, Any] = field(default_factory=dict)  # CLI options, e.g. {"hosts": 20}
    description: dict[str, Any] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    _web: tuple[Any, TestWeb] | None = field(default=None, repr=False, compare=False)

    @property
    def log_path(self) -> Path:
        return self.workdir / "testweb-requests.jsonl"

    @property
    def seeds(self) -> list[str]:
        return list(self.description["seeds"])

    @property
    def expected_urls(self) -> set[str]:
        return set(self.description["expected_urls"])

    @property
    def port(self) -> int:
        return int(self.description["port"])

    def mirror_pairs(self) -> list[tuple[str, str]]:
        return [(m, s) for m, s in self.description["mirror_pairs"]]

    def reachable_urls(self, allowed: Callable[[str], bool]) -> set[str]:
        """``TestWeb.reachable_urls`` for this web (rebuilt from its description)."""
        return web_from_description(self.description).reachable_urls(allowed)

    def web(self) -> TestWeb:
        """The (unstarted) TestWeb this process serves, rebuilt from its description
        once per start: its graph, ``trap_kind``, ``trap_fetches`` and the like."""
        key = (self.description.get("pid"), self.description.get("port"))
        if self._web is None or self._web[0] != key:
            self._web = (key, web_from_description(self.description))
        return self._web[1]

    def trap_kind(self, url: str) -> str | None:
        return self.web().trap_kind(url)

    def trap_fetches(self, log: Iterable[RequestRecord]) -> Counter[int]:
        return self.web().trap_fetches(log)

    def start(self, timeout: float = 60.0) -> WebProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        ready = self.workdir / "testweb-ready.json"
        ready.unlink(missing_ok=True)
        self.log_path.unlink(missing_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "testkit.testweb",
            "--log",
            str(self.log_path),
            "--ready-file",
            str(ready),
        ]
        for key, value in self.options.items():
            if isinstance(value, bool):
                cmd += [f"--{key.replace('_', '-')}"] if value else []
                continue
            if isinstance(value, dict):
                value_file = self.workdir / f"testweb-{key}.json"
                value_file.write_text(json.dumps(value), encoding="utf-8")
                value = value_file
            value = "-".join(map(str, value)) if isinstance(value, tuple | list) else value
            cmd += [f"--{key.replace('_', '-')}", str(value)]
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                [str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
        }
        stderr = open(self.workdir / "testweb-stderr.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stderr=stderr)
        stderr.close()
        deadline = time.monotonic() + timeout
        while not ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                err = (self.workdir / "testweb-stderr.log").read_text(errors="replace")
                raise RuntimeError(f"test web process did not start:\n{err[-3000:]}")
            time.sleep(0.02)
        self.description = json.loads(ready.read_text())
        return self

    def stop(self, timeout: float = 30.0) -> list[RequestRecord]:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        return load_log(self.log_path) if self.log_path.exists() else []

    def __enter__(self) -> WebProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    main()
