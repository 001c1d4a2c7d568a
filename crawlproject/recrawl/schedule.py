"""Per-URL fetch state, its text form, and the adaptive recrawl interval.

Pure logic: no Redis, no network. The recrawl service keeps one state per
tracked URL in Redis and a due schedule (a ZSET scored by ``due_s()``); a Lua
script copies the state text verbatim into the JSON meta of the request that
fetches the URL again, and the worker hands it back with the fetch's outcome
to :func:`next_state`.

State text (``encode_state`` / ``decode_state``)
------------------------------------------------
One line of UTF-8, twelve fields joined by a TAB, in this order::

    version  last_fetch_s  interval_s  fetches  changes  gone
    digest  simhash  depth  etag  last_modified  url

* ``version``: ``STATE_VERSION`` ("1").
* Integers in decimal, no sign, no padding, no leading zeros.
* ``digest``: first 8 bytes of the SHA-1 of the last body, 16 lowercase hex
  digits; ``simhash``: the 64-bit SimHash, 16 lowercase hex digits; either may
  be empty (no body / no fingerprint).
* ``etag``, ``last_modified``: the header values as received, or empty.
* ``url``: last, so it may hold anything but TAB, CR and LF (as may the two
  header values). ``encode_state`` refuses a state that breaks this
  (``ValueError``) rather than altering it; ``decode_state`` refuses any text
  that ``encode_state`` could not have written (``StateDecodeError``), so
  ``encode_state(decode_state(t)) == t`` for every text it accepts.

Example: 130 bytes, of which the URL is 25 (the ``\\t`` are TABs)::

    1\\t1767225600\\t846720\\t2\\t0\\t0\\t2fd4e1c67a2d28fc\\tc3a1f0e47b92d615\\t1\\t
    W/"5f1a-3c2"\\tThu, 01 Jan 2026 00:00:00 GMT\\thttps://example.com/news/

(one line, wrapped here): fetched twice, last at 2026-01-01T00:00:00Z, found
unchanged on the refetch, so its interval grew from 7 days to 7 x 1.4 days
(846,720 s), 1 hop from a seed; due at 1767225600 + 846720.

The interval (``next_state``)
-----------------------------
In the manner of Nutch's ``AdaptiveFetchSchedule``
(org.apache.nutch.crawl.AdaptiveFetchSchedule; defaults
``db.fetch.schedule.adaptive.inc_rate`` 0.4 and ``dec_rate`` 0.2 in
conf/nutch-default.xml): each refetch that finds the page unchanged multiplies
its interval by ``1 + inc_rate``, each that finds it changed by
``1 - dec_rate``, within ``[min_interval_s, max_interval_s]``, rounded to
whole seconds. Nutch's ``sync_delta`` (shifting the next fetch towards the
page's Last-Modified time) is not done.

* First fetch: the interval is ``default_interval_s``, or the one of the
  sitemap's ``<changefreq>`` for the URL (always: the minimum; hourly, daily,
  weekly, monthly (30 days), yearly (365 days); never: the maximum; anything
  else: the default), clamped to the bounds. Verdict NEW (GONE / ERROR as below,
  with the same interval). A 304 on a first fetch (the state was lost, or the
  request carried validators of its own) counts as NEW.
* 2xx: CHANGED iff the body's digest differs from the last one AND the SimHash
  is missing on either side or more than ``simhash_k`` bits away from the last
  one; else UNCHANGED (a near-duplicate SimHash means only boilerplate moved:
  a date, a counter). A last digest of "" (no body seen yet) vs a body counts
  as CHANGED. The new digest, SimHash, ETag and Last-Modified replace the old
  ones (a 2xx without an ETag clears it: the old one no longer describes the
  page).
* 304: NOT_MODIFIED: unchanged; digest and SimHash kept; an ETag /
  Last-Modified the 304 carries replaces the stored one.
* Sitemap ``<lastmod>`` after the last fetch while the fetch found the page
  unchanged (304 or same content): the interval is kept, not lengthened: the
  sitemap says the page changes, our test says it did not; neither is trusted
  enough to move the interval. It plays no part otherwise.
* 404 / 410: GONE; ``gone`` + 1; once it reaches ``gone_after`` the URL is no
  longer tracked (``next_state`` returns ``None``); until then the state is kept
  with its interval, so the URL is tried again after the same time.
* Any other answer (3xx, other 4xx, 5xx) or none (network error): ERROR;
  interval, ``gone``, digest and validators are kept.
* A 2xx or 304 resets ``gone`` to 0.
* Every kept state: ``last_fetch_s`` is the fetch's time, ``fetches`` + 1,
  ``depth`` the smaller of the old and the new, ``url`` the URL as requested,
  and the interval is clamped to the current bounds (so new bounds apply to
  URLs already tracked).
* ETag / Last-Modified values holding TAB, CR or LF (which their grammars in
  RFC 9110 do not allow) are not stored: the next request is then
  unconditional, instead of the state becoming unencodable.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Final

from crawlproject.hamming import hamming
from crawlproject.recrawl.config import RecrawlConfig

__all__ = [
    "CHANGEFREQ_INTERVAL_S",
    "STATE_VERSION",
    "FetchOutcome",
    "FetchState",
    "StateDecodeError",
    "Verdict",
    "changefreq_interval_s",
    "decode_state",
    "encode_state",
    "next_state",
]

STATE_VERSION: Final = "1"
FIELD_SEPARATOR: Final = "\t"
STATE_FIELDS: Final = 12

DAY_S: Final = 86400
# Sitemap <changefreq> values (sitemaps.org protocol) as intervals in seconds;
# None: the configured bound ("always" -> min, "never" -> max).
CHANGEFREQ_INTERVAL_S: Final[dict[str, int | None]] = {
    "always": None,
    "hourly": 3600,
    "daily": DAY_S,
    "weekly": 7 * DAY_S,
    "monthly": 30 * DAY_S,
    "yearly": 365 * DAY_S,
    "never": None,
}

GONE_STATUSES: Final = frozenset({404, 410})
NOT_MODIFIED_STATUS: Final = 304

# ASCII digits only (str.isdigit() also takes "²" and Arabic-Indic digits), no
# leading zeros: decode_state accepts exactly what encode_state writes.
_INT_RE: Final = re.compile(r"0|[1-9][0-9]*")
_HEX64_RE: Final = re.compile(r"[0-9a-f]{16}")
_LINE_BREAKERS: Final = ("\t", "\r", "\n")


# Longest ETag / Last-Modified value kept (real ones are 10-60 characters).
MAX_VALIDATOR_CHARS = 200


class StateDecodeError(ValueError):
    """A fetch-state text that is not a state ``encode_state`` could have written."""


@dataclass(frozen=True, slots=True)
class FetchState:
    url: str  # the URL as requested (the recrawl requests it again)
    depth: int
    last_fetch_s: int  # unix seconds of the last fetch
    interval_s: int  # current recrawl interval
    fetches: int  # fetches so far
    changes: int  # refetches that found the page changed
    gone: int  # 404/410 answers in a row
    digest: str  # 16 hex: first 8 bytes of the SHA-1 of the last body; "" for none
    simhash: str  # 16 hex of the 64-bit SimHash, or ""
    etag: str  # the last ETag header value as received, or ""
    last_modified: str  # the last Last-Modified header value as received, or ""

    def due_s(self) -> int:
        return self.last_fetch_s + self.interval_s


class Verdict(enum.StrEnum):
    NEW = "new"
    CHANGED = "changed"
    UNCHANGED = "unchanged"
    NOT_MODIFIED = "not_modified"
    GONE = "gone"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class FetchOutcome:
    url: str
    depth: int
    fetched_at_s: int
    status: int | None  # None: no answer (network error)
    digest: str = ""  # of the body, 16 hex; "" for no body
    simhash: str = ""
    etag: str = ""
    last_modified: str = ""
    sitemap_changefreq: str = ""  # from a sitemap entry, if the URL came from one
    sitemap_lastmod_s: int | None = None


# --- the text form ------------------------------------------------------------------


def _check_text(name: str, value: str, *, required: bool = False) -> None:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a str, got {type(value).__name__}")
    if required and not value:
        raise ValueError(f"{name} must not be empty")
    if any(c in value for c in _LINE_BREAKERS):
        raise ValueError(f"{name} must not contain TAB, CR or LF: {value!r}")


def _check_hex64(name: str, value: str) -> None:
    if not isinstance(value, str) or (value and not _HEX64_RE.fullmatch(value)):
        raise ValueError(f"{name} must be '' or 16 lowercase hex digits, got {value!r}")


def _check_count(name: str, value: int) -> None:
    # bool is an int subclass; True would be written as "True".
    if type(value) is not int or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")


def encode_state(state: FetchState) -> str:
    """The state as one TAB-separated line (format in the module docstring).

    Raises ``ValueError`` for a state the format cannot hold as it is.
    """
    for name in ("last_fetch_s", "interval_s", "fetches", "changes", "gone", "depth"):
        _check_count(name, getattr(state, name))
    _check_hex64("digest", state.digest)
    _check_hex64("simhash", state.simhash)
    _check_text("etag", state.etag)
    _check_text("last_modified", state.last_modified)
    _check_text("url", state.url, required=True)
    return FIELD_SEPARATOR.join(
        (
            STATE_VERSION,
            str(state.last_fetch_s),
            str(state.interval_s),
            str(state.fetches),
            str(state.changes),
            str(state.gone),
            state.digest,
            state.simhash,
            str(state.depth),
            state.etag,
            state.last_modified,
            state.url,
        )
    )


def _decode_int(name: str, field: str) -> int:
    if not _INT_RE.fullmatch(field):
        raise StateDecodeError(f"fetch state: {name} is not a decimal integer: {field!r}")
    return int(field)


def decode_state(text: str | bytes) -> FetchState:
    """Parse ``encode_state``'s text (str, or the UTF-8 bytes Redis returns).

    Raises ``StateDecodeError`` on anything ``encode_state`` could not have written.
    """
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise StateDecodeError(f"fetch state is not UTF-8: {e}") from None
    if not isinstance(text, str):
        raise StateDecodeError(f"fetch state must be str or bytes, got {type(text).__name__}")
    fields = text.split(FIELD_SEPARATOR)
    if len(fields) != STATE_FIELDS:
        raise StateDecodeError(
            f"fetch state has {len(fields)} fields, expected {STATE_FIELDS}: {text[:200]!r}"
        )
    (version, last_fetch, interval, fetches, changes, gone, digest, simhash, depth) = fields[:9]
    etag, last_modified, url = fields[9:]
    if version != STATE_VERSION:
        raise StateDecodeError(
            f"fetch state version {version[:20]!r} is not supported (expected {STATE_VERSION!r})"
        )
    for name, value in (("digest", digest), ("simhash", simhash)):
        if value and not _HEX64_RE.fullmatch(value):
            raise StateDecodeError(f"fetch state: {name} is not 16 lowercase hex: {value!r}")
    for name, value in (("etag", etag), ("last_modified", last_modified), ("url", url)):
        if "\r" in value or "\n" in value:
            raise StateDecodeError(f"fetch state: {name} contains CR or LF")
    if not url:
        raise StateDecodeError("fetch state: url is empty")
    return FetchState(
        url=url,
        depth=_decode_int("depth", depth),
        last_fetch_s=_decode_int("last_fetch_s", last_fetch),
        interval_s=_decode_int("interval_s", interval),
        fetches=_decode_int("fetches", fetches),
        changes=_decode_int("changes", changes),
        gone=_decode_int("gone", gone),
        digest=digest,
        simhash=simhash,
        etag=etag,
        last_modified=last_modified,
    )


# --- the interval -------------------------------------------------------------------


def _clamp_interval_s(interval_s: float, config: RecrawlConfig) -> int:
    return round(min(max(interval_s, config.min_interval_s), config.max_interval_s))


def changefreq_interval_s(changefreq: str, config: RecrawlConfig) -> int:
    """First-fetch interval for a sitemap ``<changefreq>`` ("" or unknown: the default)."""
    key = changefreq.strip().lower()
    if key not in CHANGEFREQ_INTERVAL_S:
        return _clamp_interval_s(config.default_interval_s, config)
    seconds = CHANGEFREQ_INTERVAL_S[key]
    if seconds is None:
        return config.min_interval_s if key == "always" else config.max_interval_s
    return _clamp_interval_s(seconds, config)


def _content_changed(prev: FetchState, outcome: FetchOutcome, config: RecrawlConfig) -> bool:
    if outcome.digest == prev.digest:
        return False
    if not outcome.simhash or not prev.simhash:
        return True
    return hamming(int(outcome.simhash, 16), int(prev.simhash, 16)) > config.simhash_k


def _validator(value: str) -> str:
    # A header value that breaks the state format is dropped, never altered;
    # so is an absurdly long one (it would cost Redis bytes for every URL of
    # the host): the refetch is then unconditional, nothing worse.
    if len(value) > MAX_VALIDATOR_CHARS or any(c in value for c in _LINE_BREAKERS):
        return ""
    return value


def next_state(
    prev: FetchState | None, outcome: FetchOutcome, config: RecrawlConfig
) -> tuple[FetchState | None, Verdict]:
    """The state after ``outcome`` and what the fetch found (rules in the module
    docstring); ``(None, Verdict.GONE)``: stop tracking the URL."""
    status = outcome.status
    ok = status is not None and 200 <= status < 300
    gone = status in GONE_STATUSES
    # Fields that a 2xx/304 replaces and any other answer keeps.
    digest = prev.digest if prev else ""
    simhash = prev.simhash if prev else ""
    etag = prev.etag if prev else ""
    last_modified = prev.last_modified if prev else ""
    changes = prev.changes if prev else 0

    if prev is None:
        interval_s: float = changefreq_interval_s(outcome.sitemap_changefreq, config)
        gone_count = 1 if gone else 0
        if ok or status == NOT_MODIFIED_STATUS:
            verdict = Verdict.NEW
            digest, simhash = outcome.digest, outcome.simhash
            etag, last_modified = _validator(outcome.etag), _validator(outcome.last_modified)
        else:
            verdict = Verdict.GONE if gone else Verdict.ERROR
    elif ok or status == NOT_MODIFIED_STATUS:
        gone_count = 0
        if ok:
            changed = _content_changed(prev, outcome, config)
            verdict = Verdict.CHANGED if changed else Verdict.UNCHANGED
            digest, simhash = outcome.digest, outcome.simhash
            etag, last_modified = _validator(outcome.etag), _validator(outcome.last_modified)
        else:
            changed = False
            verdict = Verdict.NOT_MODIFIED
            # A 304 may repeat or refresh validators; it never clears them.
            etag = _validator(outcome.etag) or prev.etag
            last_modified = _validator(outcome.last_modified) or prev.last_modified
        if changed:
            changes += 1
            interval_s = prev.interval_s * (1 - config.dec_rate)
        elif (
            outcome.sitemap_lastmod_s is not None and outcome.sitemap_lastmod_s > prev.last_fetch_s
        ):
            # The sitemap says it changed since; don't back off on our word alone.
            interval_s = prev.interval_s
        else:
            interval_s = prev.interval_s * (1 + config.inc_rate)
    else:
        verdict = Verdict.GONE if gone else Verdict.ERROR
        gone_count = prev.gone + 1 if gone else prev.gone
        interval_s = prev.interval_s

    if gone and gone_count >= config.gone_after:
        return None, Verdict.GONE
    state = FetchState(
        url=outcome.url,
        depth=min(prev.depth, outcome.depth) if prev else outcome.depth,
        last_fetch_s=outcome.fetched_at_s,
        interval_s=_clamp_interval_s(interval_s, config),
        fetches=(prev.fetches if prev else 0) + 1,
        changes=changes,
        gone=gone_count,
        digest=digest,
        simhash=simhash,
        etag=etag,
        last_modified=last_modified,
    )
    return state, verdict
