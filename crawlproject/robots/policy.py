"""RFC 9309 as pure functions: what a robots.txt fetch means, and what it allows.

* 2xx: the body is parsed (up to ``CRAWL_ROBOTS_MAX_BYTES``) with Protego;
  the most specific group for the product token applies, the longest
  matching Allow/Disallow wins, Allow on a tie, ``*`` and ``$`` wildcards.
* 4xx other than 429 ("unavailable"), and more redirects than allowed:
  everything is allowed.
* 5xx, 429, or no answer at all ("unreachable"): everything is disallowed,
  and robots.txt is retried with exponential backoff (a Retry-After counts).
  After an outage of ``CRAWL_ROBOTS_OUTAGE_SECONDS`` the last good copy
  applies again, or, with none, everything is allowed. The record keeps why
  (:func:`unreachable_reason`: ``robots_503``, ``dns``, ``connection_refused``,
  ``timeout``, ``no_answer``), the reason a host is set aside for.
"""

from __future__ import annotations

import enum
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

from protego import Protego

from crawlproject.robots.config import RobotsConfig


class RobotsKind(enum.StrEnum):
    OK = "ok"
    UNAVAILABLE = "unavailable"
    UNREACHABLE = "unreachable"


class Verdict(enum.Enum):
    ALLOW = "allow"
    FORBID = "forbid"
    UNREACHABLE = "unreachable"  # robots.txt unreachable: complete disallow, for now


@dataclass(frozen=True, slots=True)
class FetchOutcome:
    """How a robots.txt fetch ended."""

    status: int  # 0: no HTTP answer
    body: bytes = b""
    retry_after_seconds: float | None = None
    redirects_exhausted: bool = False  # more redirects than allowed, or refused by a rule
    error: str | None = None


@dataclass(frozen=True, slots=True)
class RobotsRecord:
    """One origin's robots.txt state, as kept in Redis (``r:<origin>`` in keys.py)."""

    kind: RobotsKind
    status: int
    fetched_ms: int
    expires_ms: int  # OK/UNAVAILABLE: end of the TTL; UNREACHABLE: when to retry
    body: bytes = b""  # OK: the parsed part of the body
    fails: int = 0  # UNREACHABLE: failed fetches in a row
    outage_since_ms: int = 0  # UNREACHABLE: first failure of this outage
    good_body: bytes | None = None  # UNREACHABLE: last OK body, for a long outage
    reason: str = ""  # UNREACHABLE: why (unreachable_reason)

    def to_fields(self) -> dict[str, bytes | int | str]:
        fields: dict[str, bytes | int | str] = {
            "k": self.kind.value,
            "s": self.status,
            "f": self.fetched_ms,
            "x": self.expires_ms,
        }
        if self.body:
            fields["b"] = zlib.compress(self.body)
        if self.fails:
            fields["n"] = self.fails
            fields["o"] = self.outage_since_ms
        if self.good_body is not None:
            fields["g"] = zlib.compress(self.good_body)
        if self.reason:
            fields["e"] = self.reason
        return fields

    @classmethod
    def from_fields(cls, fields: Mapping[bytes, bytes]) -> RobotsRecord | None:
        """None if the stored hash is missing or damaged (then it is fetched again)."""
        if not fields:
            return None
        try:
            good = fields.get(b"g")
            return cls(
                kind=RobotsKind(fields[b"k"].decode()),
                status=int(fields[b"s"]),
                fetched_ms=int(fields[b"f"]),
                expires_ms=int(fields[b"x"]),
                body=zlib.decompress(fields[b"b"]) if b"b" in fields else b"",
                fails=int(fields.get(b"n", b"0")),
                outage_since_ms=int(fields.get(b"o", b"0")),
                good_body=None if good is None else zlib.decompress(good),
                reason=fields.get(b"e", b"").decode("ascii", "replace"),
            )
        except (KeyError, ValueError, zlib.error):
            return None


def classify(outcome: FetchOutcome) -> RobotsKind:
    if outcome.status == 0:
        return RobotsKind.UNAVAILABLE if outcome.redirects_exhausted else RobotsKind.UNREACHABLE
    if 200 <= outcome.status < 300:
        return RobotsKind.OK
    if outcome.status == 429 or outcome.status >= 500:
        return RobotsKind.UNREACHABLE
    if 300 <= outcome.status < 500:
        # 4xx; a 3xx reaching here had no usable Location (RFC 9309 2.3.1.2
        # lets a crawler treat unresolved redirects as unavailable).
        return RobotsKind.UNAVAILABLE
    return RobotsKind.UNREACHABLE  # 1xx or nonsense


# An exception's class name (FetchOutcome.error starts with it) -> a reason;
# Scrapy 2.19's names and the Twisted ones older handlers raised.
_DNS_ERRORS = frozenset({"CannotResolveHostError", "DNSLookupError"})
_REFUSED_ERRORS = frozenset({"DownloadConnectionRefusedError", "ConnectionRefusedError"})


def unreachable_reason(outcome: FetchOutcome) -> str:
    """Why a robots.txt fetch counts as unreachable, as one word: the status
    (``robots_503``, ``robots_429``), or for no answer the failure's kind
    (``dns``: the name does not resolve; ``connection_refused``; ``timeout``;
    ``no_answer``: anything else, a reset connection say)."""
    if outcome.status:
        return f"robots_{outcome.status}"
    kind = (outcome.error or "").partition(":")[0].strip()
    if kind in _DNS_ERRORS:
        return "dns"
    if kind in _REFUSED_ERRORS:
        return "connection_refused"
    if "Timeout" in kind or "TimedOut" in kind:
        return "timeout"
    return "no_answer"


def truncate(body: bytes, max_bytes: int) -> tuple[bytes, bool]:
    """The first ``max_bytes`` of a body, cut after the last whole line."""
    if len(body) <= max_bytes:
        return body, False
    head = body[:max_bytes]
    cut = max(head.rfind(b"\n"), head.rfind(b"\r"))  # RFC 9309 2.2: CR, LF or CRLF
    return (head[: cut + 1] if cut >= 0 else head), True


def next_record(
    previous: RobotsRecord | None, outcome: FetchOutcome, now_ms: int, config: RobotsConfig
) -> RobotsRecord:
    """The state after a fetch, given the state before it."""
    kind = classify(outcome)
    ttl_ms = round(config.ttl_seconds * 1000)
    if kind is RobotsKind.OK:
        body, _ = truncate(outcome.body, config.max_bytes)
        return RobotsRecord(kind, outcome.status, now_ms, now_ms + ttl_ms, body=body)
    if kind is RobotsKind.UNAVAILABLE:
        return RobotsRecord(kind, outcome.status, now_ms, now_ms + ttl_ms)
    in_outage = previous is not None and previous.kind is RobotsKind.UNREACHABLE
    fails = previous.fails + 1 if in_outage and previous is not None else 1
    since = previous.outage_since_ms if in_outage and previous is not None else now_ms
    good: bytes | None = None
    if previous is not None:
        good = previous.body if previous.kind is RobotsKind.OK else previous.good_body
    backoff = min(config.retry_seconds * 2 ** (fails - 1), config.retry_max_seconds)
    if outcome.retry_after_seconds is not None:
        backoff = max(backoff, min(outcome.retry_after_seconds, config.retry_max_seconds))
    return RobotsRecord(
        kind,
        outcome.status,
        now_ms,
        now_ms + round(backoff * 1000),
        fails=fails,
        outage_since_ms=since,
        good_body=good,
        reason=unreachable_reason(outcome),
    )


class RobotsRules:
    """The decisions one record gives for one product token."""

    def __init__(self, record: RobotsRecord, token: str, outage_ms: int) -> None:
        self.record = record
        self.token = token
        self.outage_ms = outage_ms
        self.parse_error: str | None = None
        self._parser = self._parse(record.body) if record.kind is RobotsKind.OK else None
        self._fallback: Protego | None = None
        if record.kind is RobotsKind.UNREACHABLE and record.good_body:
            self._fallback = self._parse(record.good_body)

    def _parse(self, body: bytes) -> Protego:
        try:
            return _parse(body, self.token)
        except Exception as exc:  # hostile input must not fail every URL of the host
            self.parse_error = f"{type(exc).__name__}: {exc}"
            return Protego.parse("")  # RFC 9309 2.2: what cannot be parsed is ignored

    def fresh(self, now_ms: int) -> bool:
        return now_ms < self.record.expires_ms

    def verdict(self, url: str, now_ms: int) -> Verdict:
        parser = self._parser
        if self.record.kind is RobotsKind.UNAVAILABLE:
            return Verdict.ALLOW
        if self.record.kind is RobotsKind.UNREACHABLE:
            if now_ms - self.record.outage_since_ms < self.outage_ms:
                return Verdict.UNREACHABLE
            parser = self._fallback  # a long outage: the last copy, or allow
            if parser is None:
                return Verdict.ALLOW
        assert parser is not None
        return Verdict.ALLOW if parser.can_fetch(url, self.token) else Verdict.FORBID

    def delay_seconds(self, cap_seconds: float) -> float | None:
        """Crawl-delay (or the spacing a Request-rate implies) for the token, capped."""
        if self._parser is None:
            return None
        delays = []
        crawl_delay = self._parser.crawl_delay(self.token)
        if crawl_delay is not None and crawl_delay >= 0:
            delays.append(crawl_delay)
        rate = self._parser.request_rate(self.token)
        if rate is not None and rate.requests > 0:
            delays.append(rate.seconds / rate.requests)
        return min(max(delays), cap_seconds) if delays else None

    def sitemaps(self) -> list[str]:
        return list(self._parser.sitemaps) if self._parser is not None else []


# A User-agent line: Protego also accepts "useragent" and "user agent".
_USER_AGENT_LINE_RE = re.compile(r"^(\s*user[-\s]?agent\s*:\s*)([^#]*?)(\s*(?:#.*)?)$", re.I)
OTHER_AGENT = "~"  # a group name that matches no product token


def _parse(body: bytes, token: str) -> Protego:
    # RFC 9309 2.3: UTF-8; a BOM is allowed; bad bytes must not stop parsing.
    return Protego.parse(_exact_groups(body.decode("utf-8-sig", errors="replace"), token))


def _exact_groups(text: str, token: str) -> str:
    """Renames every group that is neither ``*`` nor our product token.

    RFC 9309 2.2.1 matches the product token itself; Protego also applies a
    group whose name is *part* of the token ("crawl" for "crawlproject").
    Renamed lines still start (and end) groups where they did.
    """
    token = token.lower()
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        m = _USER_AGENT_LINE_RE.match(line.rstrip("\r\n"))
        if m is None:
            continue
        name = m.group(2).strip().lower()
        if name == "*" or name.replace("*", "") == token:
            continue
        ending = line[len(line.rstrip("\r\n")) :]
        lines[i] = m.group(1) + OTHER_AGENT + m.group(3) + ending
    return "".join(lines)
