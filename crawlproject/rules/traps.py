"""Spider-trap guards: pure functions of a canonical URL, no Redis, no engine.

Two shapes of trap make a site's URL space unbounded:

* **Repeating path segments**, ``/a/b/a/b/a/b/...``: a relative link (``b/``,
  ``../a/b/``) resolved against a page that the server answers at any depth.
  ``repeated_path_segments`` spots them; ``PathRepeatsRule`` plugs it into the
  URL rules (crawlproject/rules/url_rules.py, stat ``rules/path_repeats``,
  setting ``CRAWL_MAX_PATH_REPEATS``).
* **One path pattern, endless parameter values**: a calendar's "next month"
  (``/cal?month=2026-11``, ``2026-12``, ...) or a session id the canonicalizer
  does not know (``/list?s=<random>``) give unboundedly many URLs of one shape.
  ``url_pattern`` gives that shape an 8-byte key, so the frontier can cap how
  many distinct URLs one host queues per pattern (its counters live in Redis).

* **Tokens minted per render**, ``/s/8f3a91c2e07d4b5a/page`` or
  ``/list?sid=8f3a...``: a session id or token that the server makes anew on
  every page, so every link is a URL never seen before. ``token_shape`` gives
  every URL with a token-like part (``is_token``) a shape key with the tokens
  (and digits) blanked; the frontier counts, per host and shape, the new URLs
  and the links that were seen before, and what the shape's pages showed
  (copies of the host's pages, links of the same shape:
  crawlproject/frontier/admission/token_evidence.py), and contains a shape whose tokens
  never repeat and whose pages show them minted (add.lua,
  ``CRAWL_TRAP_TOKEN_URLS``): a stable id linked once is not a token.

``OncePerKey`` remembers, bounded, which keys (hosts) were seen, so each guard
logs once per host rather than once per URL.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections import Counter
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from crawlproject.once import OncePerKey

if TYPE_CHECKING:
    from crawlproject.rules.parsed_url import ParsedUrl

logger = logging.getLogger(__name__)

MAX_BLOCK_SEGMENTS = 3  # the longest block of segments repeat detection looks for
PATTERN_BYTES = 8
LOGGED_HOSTS = 10_000  # hosts a guard remembers having logged (per process)

_DIGITS = re.compile(r"[0-9]+")
# A token: letters and digits mixed (hex ids, base64 session ids), or a long
# run of digits (a timestamp or random number), inside a path segment or a
# query value, cut at the usual separators.
_PARTS = re.compile(r"[A-Za-z0-9]+")
_LETTER_DIGIT = re.compile(r"[A-Za-z][0-9]|[0-9][A-Za-z]")
_LONG_RUN = re.compile(r"[A-Za-z0-9]{8,}")
_CASE_SWITCH = re.compile(r"[a-z][A-Z]|[A-Z][a-z]")
_HEX = re.compile(r"[0-9a-f]+|[0-9A-F]+")
TOKEN_LONG_CHARS = 16  # letters and digits mixed this long: an id, not a name
TOKEN_MIN_CHARS = 8  # shorter mixes are names: v2, x86, mp3, utf8, h264
TOKEN_MIN_SWITCHES = 3  # letter<->digit (or case) switches: "page123" has 1
TOKEN_MIN_DIGITS = 10  # an all-digit token: unix times, random numbers


def repeated_path_segments(path: str, max_repeats: int) -> bool:
    """True when ``path`` looks like a relative-link trap.

    ``max_repeats`` (>= 1) is how many times a block may *repeat*, i.e. occur
    again right after itself; it is a trap when either:

    1. a block of 1 to 3 consecutive segments occurs more than
       ``max_repeats + 1`` times in a row; or
    2. one segment occurs more than ``max_repeats + 2`` times anywhere in the
       path (a relative navigation menu on a page served at any depth:
       ``/news/about/sport/news/about/...`` need not repeat back to back).

    Empty segments (``//``) are ignored; segments compare case-sensitively, as
    paths do. With ``max_repeats=2`` (the default of ``CRAWL_MAX_PATH_REPEATS``)::

        /x/x/x/                    False  (x repeats twice)
        /x/x/x/x                   True   (three times)
        /a/b/a/b/a/b/page.html     False  (a/b occurs 3 times in a row)
        /a/b/a/b/a/b/a/b/          True   (4 times)
        /a/b/c/a/b/c/a/b/c/a/b/c/  True   (a/b/c, 4 times)
        /2024/01/01/news/          False
        /a/b/c/a/ and /tiles/0/0/0/0.png   False
        /a/1/a/2/a/3/a/4/          False  (a occurs 4 times: the limit)
        /a/1/a/2/a/3/a/4/a/        True   (5 times)

    Cost: one pass per block length plus a count, O(segments x 3); no regex.
    """
    if max_repeats < 1:
        raise ValueError("max_repeats must be >= 1")
    segments = [s for s in path.split("/") if s]
    # A block of k segments occurring n times in a row is a run of
    # (n - 1) * k positions i with segments[i] == segments[i - k].
    for k in range(1, MAX_BLOCK_SEGMENTS + 1):
        needed = (max_repeats + 1) * k
        if len(segments) < needed + k:
            break  # longer blocks need even more segments
        run = 0
        for i in range(k, len(segments)):
            if segments[i] == segments[i - k]:
                run += 1
                if run >= needed:
                    return True
            else:
                run = 0
    if len(segments) > max_repeats + 2:
        _, most = Counter(segments).most_common(1)[0]
        return most > max_repeats + 2
    return False


def url_shape(canonical_url: str) -> str | None:
    """The shape of a URL with a query string (None without one).

    The path (no scheme, no host: the frontier counts per host) with every run
    of ASCII digits turned into ``0``, then ``?`` and the query's parameter
    names, sorted and de-duplicated, values dropped::

        http://h/cal/2026/11?day=3&view=week   ->  /cal/0/0?day&view
        http://h/cal/2027/01?view=month&day=9  ->  /cal/0/0?day&view

    Digits inside ``%XX`` escapes count as digits too; that only merges shapes.
    """
    parts = urlsplit(canonical_url)
    if not parts.query:
        return None
    names = {pair.split("=", 1)[0] for pair in parts.query.split("&") if pair}
    return _DIGITS.sub("0", parts.path or "/") + "?" + "&".join(sorted(names))


def url_pattern(canonical_url: str) -> bytes | None:
    """An 8-byte key (BLAKE2b) of ``url_shape``; None for a URL without a query.

    Why per pattern: a calendar (``/events?month=2026-11``, each page linking
    the next month) or a session id in a parameter the canonicalizer does not
    strip (``/list?s=8f3a...``, new on every visit) gives unboundedly many
    distinct URLs of one shape, which the seen test cannot stop; counting
    distinct URLs per (host, pattern) and refusing those past a cap can.
    URLs without a query get no pattern: their growth is in the path, bounded
    by the crawl depth and ``repeated_path_segments``.
    """
    shape = url_shape(canonical_url)
    if shape is None:
        return None
    return hashlib.blake2b(
        shape.encode("utf-8", "surrogatepass"), digest_size=PATTERN_BYTES
    ).digest()


def is_token(part: str) -> bool:
    """True for a run of ASCII letters and digits that looks minted, not named.

    ``8f3a91c2e07d``, ``A1b2C3d4E5``, ``x7Kq9LmN2pR4sT6v`` (base62),
    ``1732531200123`` are tokens; ``page123``, ``20261125``, ``index``,
    ``x86_64``'s parts, ``utf8``, ``mp3player``, ``chapter12`` are not. (One
    part of a segment: the caller splits at ``-_.;,=~`` and other punctuation.)
    Random 16-hex-digit and 22-character base62 ids are tokens all but never
    missed (tests/test_trap_budgets.py measures it).
    """
    n = len(part)
    if n < TOKEN_MIN_CHARS:
        return False
    if part.isdigit():
        return n >= TOKEN_MIN_DIGITS
    if part.isalpha():
        # Random letters switch case often; words do not.
        return n >= TOKEN_LONG_CHARS and len(_CASE_SWITCH.findall(part)) >= TOKEN_MIN_SWITCHES
    if n >= TOKEN_LONG_CHARS or _HEX.fullmatch(part):
        return True  # letters and digits mixed: long, or hex (an id, a digest)
    return len(_LETTER_DIGIT.findall(part)) >= TOKEN_MIN_SWITCHES


def _blank(text: str) -> tuple[str, bool]:
    """``text`` with token parts as ``*`` and other digit runs as ``0``; and
    whether it had a token."""
    found = False

    def part(m: re.Match[str]) -> str:
        nonlocal found
        if is_token(m.group()):
            found = True
            return "*"
        return _DIGITS.sub("0", m.group())

    return _PARTS.sub(part, text), found


def token_shape(canonical_url: str) -> bytes | None:
    """The 8-byte shape key of a URL with a token part; None without one.

    The shape is the path and the query's parameter names and values with
    every token part blanked (``*``) and every other digit run as ``0``::

        http://h/s/8f3a91c2e07d4b5a/page/2     ->  /s/*/page/0
        http://h/list?sid=8f3a91c2e07d&p=3     ->  /list?p=0&sid=*

    Only URLs with a token get a shape: they are the ones whose tokens the
    frontier watches for never repeating (a session id minted per render).
    """
    # Most URLs have no token: one scan of the whole URL says so, cheaply.
    if not any(is_token(run) for run in _LONG_RUN.findall(canonical_url)):
        return None
    parts = urlsplit(canonical_url)
    path, token = _blank(parts.path or "/")
    pairs = []
    for pair in parts.query.split("&") if parts.query else ():
        name, _, value = pair.partition("=")
        blanked, t = _blank(value)
        token = token or t
        pairs.append(name + "=" + blanked)
    if not token:
        return None
    shape = path + "?" + "&".join(sorted(pairs))
    return hashlib.blake2b(
        shape.encode("utf-8", "surrogatepass"), digest_size=PATTERN_BYTES
    ).digest()


class PathRepeatsRule:
    """A URL rule (crawlproject/rules/url_rules.py): refuses ``path_repeats``.

    Logs the first refused URL of each host at INFO (per process).
    """

    reason = "path_repeats"

    def __init__(self, max_repeats: int, logged_hosts: int = LOGGED_HOSTS) -> None:
        if max_repeats < 1:
            raise ValueError("max_repeats must be >= 1")
        self.max_repeats = max_repeats
        self._logged = OncePerKey(logged_hosts)

    def check(self, url: ParsedUrl) -> str | None:
        if not repeated_path_segments(url.path, self.max_repeats):
            return None
        if self._logged.first(url.host):
            logger.info(
                "%s: URL path repeats its segments (a spider trap?); such URLs of this "
                "host are not queued (stat rules/%s), e.g. %s",
                url.host,
                self.reason,
                url.url,
            )
        return self.reason
