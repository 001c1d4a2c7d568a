"""Pure logic: RFC 9309 robots.txt semantics (matching, fetch outcomes, records, settings)."""

from __future__ import annotations

import logging
import zlib

import pytest
from scrapy.settings import Settings

from crawlproject.frontier.crawl.config import ConfigError
from crawlproject.robots.config import RobotsConfig
from crawlproject.robots.policy import (
    FetchOutcome,
    RobotsKind,
    RobotsRecord,
    RobotsRules,
    Verdict,
    classify,
    next_record,
    truncate,
)

TOKEN = "crawlproject"
USER_AGENT = "crawlproject/1.0 (+https://example.com/bot)"
NOW = 1_700_000_000_000
SITE = "https://example.com"


def make_config(**overrides: object) -> RobotsConfig:
    return RobotsConfig.from_settings(Settings({"USER_AGENT": USER_AGENT, **overrides}))


# TTL 1 h, retries after 10 s, 20 s, 40 s... capped at 35 s, outage window 1000 s.
CONFIG = make_config(
    CRAWL_ROBOTS_TTL_SECONDS=3600,
    CRAWL_ROBOTS_RETRY_SECONDS=10,
    CRAWL_ROBOTS_RETRY_MAX_SECONDS=35,
    CRAWL_ROBOTS_OUTAGE_SECONDS=1000,
)
TTL_MS = 3_600_000
OUTAGE_MS = 1_000_000


def rules_for(body: str | bytes) -> RobotsRules:
    raw = body.encode() if isinstance(body, str) else body
    record = next_record(None, FetchOutcome(200, raw), NOW, CONFIG)
    assert record.kind is RobotsKind.OK
    return RobotsRules(record, TOKEN, OUTAGE_MS)


def verdict(body: str | bytes, path: str) -> Verdict:
    return rules_for(body).verdict(SITE + path, NOW)


def as_redis(fields: dict[str, bytes | int | str]) -> dict[bytes, bytes]:
    """What HGETALL gives back for a hash written from ``fields``."""
    out: dict[bytes, bytes] = {}
    for key, value in fields.items():
        if isinstance(value, bytes):
            out[key.encode()] = value
        elif isinstance(value, int):
            out[key.encode()] = str(value).encode()
        else:
            out[key.encode()] = value.encode()
    return out


# --- 1. Matching -------------------------------------------------------------

# RFC 9309 section 5.1, with "foobot" renamed to our product token.
RFC_5_1 = """\
User-Agent: *
Disallow: *.gif$
Disallow: /example/
Allow: /publications/

User-Agent: crawlproject
Disallow:/
Allow:/example/page.html
Allow:/example/allowed.gif

User-Agent: barbot
User-Agent: bazbot
Disallow: /example/page.html

User-Agent: quxbot
"""


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/example/page.html", Verdict.ALLOW),
        ("/example/allowed.gif", Verdict.ALLOW),
        ("/example/other.html", Verdict.FORBID),
        ("/", Verdict.FORBID),
        # The "*" group allows /publications/, but it does not apply to crawlproject.
        ("/publications/", Verdict.FORBID),
    ],
)
def test_rfc_5_1_specific_group(path: str, expected: Verdict) -> None:
    assert verdict(RFC_5_1, path) is expected


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/example/page/", Verdict.ALLOW),
        ("/example/page/other.gif", Verdict.ALLOW),
        ("/example/page/disallowed.gif", Verdict.FORBID),
        ("/elsewhere", Verdict.ALLOW),
    ],
)
def test_rfc_5_2_longest_match_wins(path: str, expected: Verdict) -> None:
    body = (
        "User-Agent: crawlproject\nAllow: /example/page/\nDisallow: /example/page/disallowed.gif\n"
    )
    assert verdict(body, path) is expected


def test_longer_disallow_beats_shorter_allow_and_vice_versa() -> None:
    body = "User-agent: *\nAllow: /p\nDisallow: /\n"
    assert verdict(body, "/page") is Verdict.ALLOW
    assert verdict(body, "/x") is Verdict.FORBID
    # "/*.html" (7 octets) is longer than "/page" (5 octets).
    body = "User-agent: *\nAllow: /page\nDisallow: /*.html\n"
    assert verdict(body, "/page.html") is Verdict.FORBID
    assert verdict(body, "/page.htm") is Verdict.ALLOW


@pytest.mark.parametrize(
    "body",
    [
        "User-agent: *\nAllow: /folder\nDisallow: /folder\n",
        "User-agent: *\nDisallow: /folder\nAllow: /folder\n",
        # Different patterns of the same length, both matching.
        "User-agent: *\nDisallow: /folder\nAllow: /f*lder\n",
    ],
)
def test_allow_wins_an_exact_tie(body: str) -> None:
    assert verdict(body, "/folder/page") is Verdict.ALLOW


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/fish.php", Verdict.FORBID),
        ("/fishheads/catfish.php?parameters", Verdict.FORBID),
        ("/fish", Verdict.ALLOW),
        ("/Fish.php", Verdict.ALLOW),  # paths are case-sensitive
        ("/a/fish.php", Verdict.ALLOW),  # still anchored at the start
    ],
)
def test_wildcard_in_the_middle(path: str, expected: Verdict) -> None:
    assert verdict("User-agent: *\nDisallow: /fish*.php\n", path) is expected


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/a.php", Verdict.FORBID),
        ("/dir/b.php", Verdict.FORBID),
        ("/a.php?x=1", Verdict.ALLOW),
        ("/a.phpx", Verdict.ALLOW),
        ("/a.html", Verdict.ALLOW),
    ],
)
def test_dollar_end_anchor(path: str, expected: Verdict) -> None:
    assert verdict("User-agent: *\nDisallow: /*.php$\n", path) is expected


def test_dollar_anchor_allows_only_the_root() -> None:
    body = "User-agent: *\nAllow: /$\nDisallow: /\n"
    assert verdict(body, "/") is Verdict.ALLOW
    assert verdict(body, "/page") is Verdict.FORBID


def test_specific_group_replaces_the_star_group() -> None:
    body = (
        "User-agent: *\nDisallow: /a\nCrawl-delay: 9\n\n"
        "User-agent: crawlproject\nDisallow: /b\nCrawl-delay: 0.3\n"
    )
    assert verdict(body, "/a") is Verdict.ALLOW
    assert verdict(body, "/b") is Verdict.FORBID


def test_two_groups_for_the_token_are_merged() -> None:
    body = (
        "User-agent: crawlproject\nDisallow: /a\n\n"
        "User-agent: otherbot\nDisallow: /c\n\n"
        "User-agent: crawlproject\nDisallow: /b\n"
    )
    assert verdict(body, "/a") is Verdict.FORBID
    assert verdict(body, "/b") is Verdict.FORBID
    assert verdict(body, "/c") is Verdict.ALLOW
    assert verdict(body, "/d") is Verdict.ALLOW


@pytest.mark.parametrize("line", ["User-agent: CrawlProject", "USER-AGENT: CRAWLPROJECT"])
def test_user_agent_match_is_case_insensitive(line: str) -> None:
    body = f"User-agent: *\nDisallow: /star\n\n{line}\nDisallow: /x\n"
    assert verdict(body, "/x") is Verdict.FORBID
    assert verdict(body, "/star") is Verdict.ALLOW


def test_group_for_another_bot_does_not_apply() -> None:
    assert verdict("User-agent: otherbot\nDisallow: /\n", "/x") is Verdict.ALLOW
    body = "User-agent: otherbot\nDisallow: /\n\nUser-agent: *\nDisallow: /private\n"
    assert verdict(body, "/x") is Verdict.ALLOW
    assert verdict(body, "/private/1") is Verdict.FORBID


def test_group_for_a_prefix_of_the_token_does_not_apply() -> None:
    body = "User-agent: crawl\nDisallow: /\n\nUser-agent: *\nDisallow: /private\n"
    assert verdict(body, "/x") is Verdict.ALLOW


def test_robots_txt_itself_is_always_allowed() -> None:
    body = "User-agent: *\nDisallow: /\n"
    assert verdict(body, "/robots.txt") is Verdict.ALLOW
    assert verdict(body, "/robots.txtx") is Verdict.FORBID
    assert verdict(body, "/x/robots.txt") is Verdict.FORBID


@pytest.mark.parametrize(
    ("rule", "path"),
    [
        # RFC 9309 2.2.2: non-ASCII octets are percent-encoded before comparison...
        ("/foo/bar/\u30c4", "/foo/bar/%E3%83%84"),
        ("/foo/bar/%E3%83%84", "/foo/bar/\u30c4"),
        ("/foo/bar/\u30c4", "/foo/bar/%e3%83%84"),
        # ...and percent-encoded unreserved ASCII octets are decoded.
        ("/foo/bar/%62%61%7A", "/foo/bar/baz"),
        ("/foo/bar/baz", "/foo/bar/%62%61%7A"),
        ("/%7Euser", "/~user"),
        ("/~user", "/%7euser"),
    ],
)
def test_percent_encoding_equivalence(rule: str, path: str) -> None:
    body = f"User-agent: *\nDisallow: {rule}\n"
    assert verdict(body, path) is Verdict.FORBID
    assert verdict(body, "/foo/other") is Verdict.ALLOW


def test_utf8_bom_does_not_break_the_first_line() -> None:
    body = b"\xef\xbb\xbfUser-agent: crawlproject\nDisallow: /x\n"
    assert verdict(body, "/x") is Verdict.FORBID
    assert verdict(body, "/y") is Verdict.ALLOW


def test_invalid_utf8_does_not_stop_parsing() -> None:
    body = b"User-agent: *\nDisallow: /\xff\nDisallow: /x\n"
    assert verdict(body, "/x") is Verdict.FORBID


@pytest.mark.parametrize("status", [200, 204])
def test_empty_success_body_allows_everything(status: int) -> None:
    record = next_record(None, FetchOutcome(status, b""), NOW, CONFIG)
    rules = RobotsRules(record, TOKEN, OUTAGE_MS)
    assert record.kind is RobotsKind.OK
    assert rules.verdict(SITE + "/", NOW) is Verdict.ALLOW
    assert rules.verdict(SITE + "/any/path?q=1", NOW) is Verdict.ALLOW
    assert rules.delay_seconds(30.0) is None
    assert rules.sitemaps() == []


# --- 2. delay_seconds ----------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("User-agent: *\nCrawl-delay: 0.3\n", 0.3),
        ("User-agent: *\nCrawl-delay: 0\n", 0.0),
        ("User-agent: *\nCrawl-delay: 120\n", 30.0),
        ("User-agent: *\nRequest-rate: 1/5\n", 5.0),
        ("User-agent: *\nRequest-rate: 3/1m\n", 20.0),
        ("User-agent: *\nCrawl-delay: 2\nRequest-rate: 1/10\n", 10.0),
        ("User-agent: *\nCrawl-delay: 7\nRequest-rate: 2/10\n", 7.0),
        ("User-agent: *\nCrawl-delay: 45\nRequest-rate: 1/60\n", 30.0),
        ("User-agent: *\nDisallow: /x\n", None),
        (
            "User-agent: *\nCrawl-delay: 9\n\nUser-agent: crawlproject\nCrawl-delay: 1\n",
            1.0,
        ),
        # The crawlproject group has no delay; the "*" group's does not apply.
        ("User-agent: *\nCrawl-delay: 9\n\nUser-agent: crawlproject\nDisallow: /x\n", None),
    ],
)
def test_delay_seconds(body: str, expected: float | None) -> None:
    assert rules_for(body).delay_seconds(30.0) == expected


def test_delay_seconds_is_none_without_a_parsed_body() -> None:
    unavailable = next_record(None, FetchOutcome(404), NOW, CONFIG)
    unreachable = next_record(None, FetchOutcome(503), NOW, CONFIG)
    assert RobotsRules(unavailable, TOKEN, OUTAGE_MS).delay_seconds(30.0) is None
    assert RobotsRules(unreachable, TOKEN, OUTAGE_MS).delay_seconds(30.0) is None


# --- 3. sitemaps -------------------------------------------------------------


def test_sitemaps_are_site_wide() -> None:
    body = (
        "Sitemap: https://example.com/s1.xml\n"
        "User-agent: otherbot\n"
        "Disallow: /x\n"
        "Sitemap: https://example.com/s2.xml\n"
        "\n"
        "User-agent: *\n"
        "Disallow: /y\n"
    )
    assert rules_for(body).sitemaps() == [
        "https://example.com/s1.xml",
        "https://example.com/s2.xml",
    ]
    assert rules_for("User-agent: *\nDisallow: /y\n").sitemaps() == []


# --- 4. classify -------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        (FetchOutcome(200, b"x"), RobotsKind.OK),
        (FetchOutcome(204), RobotsKind.OK),
        (FetchOutcome(301), RobotsKind.UNAVAILABLE),
        (FetchOutcome(400), RobotsKind.UNAVAILABLE),
        (FetchOutcome(401), RobotsKind.UNAVAILABLE),
        (FetchOutcome(403), RobotsKind.UNAVAILABLE),
        (FetchOutcome(404), RobotsKind.UNAVAILABLE),
        (FetchOutcome(410), RobotsKind.UNAVAILABLE),
        (FetchOutcome(429), RobotsKind.UNREACHABLE),
        (FetchOutcome(500), RobotsKind.UNREACHABLE),
        (FetchOutcome(503, retry_after_seconds=30.0), RobotsKind.UNREACHABLE),
        (FetchOutcome(0, error="connection refused"), RobotsKind.UNREACHABLE),
        (FetchOutcome(0, redirects_exhausted=True), RobotsKind.UNAVAILABLE),
    ],
)
def test_classify(outcome: FetchOutcome, expected: RobotsKind) -> None:
    assert classify(outcome) is expected


# --- 5. next_record ------------------------------------------------------------


def test_ok_record_expires_after_the_ttl() -> None:
    body = b"User-agent: *\nDisallow: /x\n"
    record = next_record(None, FetchOutcome(200, body), NOW, CONFIG)
    assert record == RobotsRecord(RobotsKind.OK, 200, NOW, NOW + TTL_MS, body=body)
    rules = RobotsRules(record, TOKEN, OUTAGE_MS)
    assert rules.fresh(NOW + TTL_MS - 1)
    assert not rules.fresh(NOW + TTL_MS)


@pytest.mark.parametrize(
    "outcome", [FetchOutcome(404), FetchOutcome(403), FetchOutcome(0, redirects_exhausted=True)]
)
def test_unavailable_allows_everything(outcome: FetchOutcome) -> None:
    previous = next_record(None, FetchOutcome(200, b"User-agent: *\nDisallow: /\n"), NOW, CONFIG)
    later = NOW + TTL_MS
    record = next_record(previous, outcome, later, CONFIG)
    assert record == RobotsRecord(RobotsKind.UNAVAILABLE, outcome.status, later, later + TTL_MS)
    rules = RobotsRules(record, TOKEN, OUTAGE_MS)
    assert rules.verdict(SITE + "/", later) is Verdict.ALLOW
    assert rules.verdict(SITE + "/private", later) is Verdict.ALLOW
    assert rules.sitemaps() == []


def test_unreachable_backoff_outage_and_fallback_to_the_last_good_copy() -> None:
    good = b"User-agent: *\nDisallow: /private\n"
    ok = next_record(None, FetchOutcome(200, good), NOW, CONFIG)

    t1 = NOW + 5_000
    r1 = next_record(ok, FetchOutcome(503), t1, CONFIG)
    assert r1 == RobotsRecord(
        RobotsKind.UNREACHABLE,
        503,
        t1,
        t1 + 10_000,
        fails=1,
        outage_since_ms=t1,
        good_body=good,
        reason="robots_503",
    )
    t2 = r1.expires_ms
    r2 = next_record(r1, FetchOutcome(0, error="timeout"), t2, CONFIG)
    assert r2 == RobotsRecord(
        RobotsKind.UNREACHABLE,
        0,
        t2,
        t2 + 20_000,
        fails=2,
        outage_since_ms=t1,
        good_body=good,
        reason="no_answer",
    )
    t3 = r2.expires_ms
    r3 = next_record(r2, FetchOutcome(429), t3, CONFIG)
    # 10 s * 2**2 = 40 s, capped at 35 s.
    assert r3 == RobotsRecord(
        RobotsKind.UNREACHABLE,
        429,
        t3,
        t3 + 35_000,
        fails=3,
        outage_since_ms=t1,
        good_body=good,
        reason="robots_429",
    )
    assert (
        RobotsRecord.from_fields(
            {
                k.encode(): str(v).encode() if isinstance(v, int | str) else v
                for k, v in r3.to_fields().items()
            }
        )
        == r3
    )  # the reason is kept in Redis
    t4 = r3.expires_ms
    r4 = next_record(r3, FetchOutcome(500), t4, CONFIG)
    assert (r4.fails, r4.expires_ms, r4.outage_since_ms, r4.good_body) == (
        4,
        t4 + 35_000,
        t1,
        good,
    )

    rules = RobotsRules(r4, TOKEN, OUTAGE_MS)
    during = t1 + OUTAGE_MS - 1
    assert rules.verdict(SITE + "/private", during) is Verdict.UNREACHABLE
    assert rules.verdict(SITE + "/public", during) is Verdict.UNREACHABLE
    after = t1 + OUTAGE_MS
    assert rules.verdict(SITE + "/private", after) is Verdict.FORBID
    assert rules.verdict(SITE + "/public", after) is Verdict.ALLOW


def test_unreachable_without_a_good_copy_allows_after_the_outage() -> None:
    record = next_record(None, FetchOutcome(500), NOW, CONFIG)
    assert record == RobotsRecord(
        RobotsKind.UNREACHABLE,
        500,
        NOW,
        NOW + 10_000,
        fails=1,
        outage_since_ms=NOW,
        reason="robots_500",
    )
    rules = RobotsRules(record, TOKEN, OUTAGE_MS)
    assert rules.verdict(SITE + "/x", NOW) is Verdict.UNREACHABLE
    assert rules.verdict(SITE + "/x", NOW + OUTAGE_MS - 1) is Verdict.UNREACHABLE
    assert rules.verdict(SITE + "/x", NOW + OUTAGE_MS) is Verdict.ALLOW
    # An UNAVAILABLE record before the outage is no good copy either.
    unavailable = next_record(None, FetchOutcome(404), NOW, CONFIG)
    assert next_record(unavailable, FetchOutcome(503), NOW, CONFIG).good_body is None


@pytest.mark.parametrize(
    ("failures_before", "retry_after", "expected_backoff_ms"),
    [
        (0, 25.0, 25_000),  # Retry-After above the 10 s backoff wins
        (0, 100.0, 35_000),  # ...capped at retry_max
        (0, 3.0, 10_000),  # a smaller Retry-After does not shorten the backoff
        (1, 15.0, 20_000),  # second failure: 20 s backoff beats 15 s
        (1, 30.0, 30_000),
    ],
)
def test_retry_after(failures_before: int, retry_after: float, expected_backoff_ms: int) -> None:
    previous: RobotsRecord | None = None
    for _ in range(failures_before):
        previous = next_record(previous, FetchOutcome(503), NOW, CONFIG)
    outcome = FetchOutcome(503, retry_after_seconds=retry_after)
    record = next_record(previous, outcome, NOW, CONFIG)
    assert record.fails == failures_before + 1
    assert record.expires_ms == NOW + expected_backoff_ms


def test_success_after_failures_resets_the_outage() -> None:
    previous = next_record(None, FetchOutcome(200, b"User-agent: *\nDisallow: /old\n"), NOW, CONFIG)
    for i in range(3):
        previous = next_record(previous, FetchOutcome(503), NOW + i, CONFIG)
    assert previous.fails == 3
    new = b"User-agent: *\nDisallow: /new\n"
    t = NOW + 100_000
    record = next_record(previous, FetchOutcome(200, new), t, CONFIG)
    assert record == RobotsRecord(RobotsKind.OK, 200, t, t + TTL_MS, body=new)
    assert record.fails == 0
    # The next outage starts afresh and keeps the new copy.
    again = next_record(record, FetchOutcome(503), t + 1, CONFIG)
    assert (again.fails, again.outage_since_ms, again.good_body) == (1, t + 1, new)


# --- 6. truncate ---------------------------------------------------------------


def test_truncate_small_inputs() -> None:
    assert truncate(b"ab\ncd\n", 6) == (b"ab\ncd\n", False)
    assert truncate(b"ab\ncd\n", 100) == (b"ab\ncd\n", False)
    assert truncate(b"ab\ncd\nef", 7) == (b"ab\ncd\n", True)
    assert truncate(b"ab\r\ncd\r\nef", 9) == (b"ab\r\ncd\r\n", True)
    assert truncate(b"abcdef", 3) == (b"abc", True)  # no line end at all


HEAD = b"User-agent: *\nDisallow: /early\n"  # 31 bytes
PAD = b"#" + b"p" * 98 + b"\n"  # a 100-byte comment line
LATE = HEAD + PAD * 5200 + b"Disallow: /late\n"  # /late starts at byte 520,031


def test_rule_beyond_the_limit_has_no_effect() -> None:
    assert len(LATE) == 520_047
    record = next_record(None, FetchOutcome(200, LATE), NOW, CONFIG)
    # 31 + 5119 * 100: the whole lines that fit in 512,000 bytes.
    assert len(record.body) == 511_931
    assert LATE.startswith(record.body)
    assert record.body.endswith(PAD)
    rules = RobotsRules(record, TOKEN, OUTAGE_MS)
    assert rules.verdict(SITE + "/late", NOW) is Verdict.ALLOW
    assert rules.verdict(SITE + "/early", NOW) is Verdict.FORBID


def test_rule_within_a_larger_limit_applies() -> None:
    config = make_config(CRAWL_ROBOTS_MAX_BYTES=1_000_000)
    record = next_record(None, FetchOutcome(200, LATE), NOW, config)
    assert record.body == LATE
    rules = RobotsRules(record, TOKEN, OUTAGE_MS)
    assert rules.verdict(SITE + "/late", NOW) is Verdict.FORBID
    assert rules.verdict(SITE + "/early", NOW) is Verdict.FORBID


def test_truncate_cuts_at_a_bare_cr_line_end() -> None:
    head = b"User-agent: *\rDisallow: /early\r"
    pad = b"#" + b"p" * 98 + b"\r"
    body = head + pad * 5119  # 511,931 bytes
    body += b"#" + b"q" * (512_000 - len(body) - 15) + b"\r"  # ends at byte 511,987
    body += b"Disallow: /latepage\r"  # the limit falls after "Disallow: /la"
    assert body[:512_000].endswith(b"\rDisallow: /la")
    record = next_record(None, FetchOutcome(200, body), NOW, CONFIG)
    rules = RobotsRules(record, TOKEN, OUTAGE_MS)
    assert rules.verdict(SITE + "/early", NOW) is Verdict.FORBID
    assert rules.verdict(SITE + "/lab", NOW) is Verdict.ALLOW


# --- 7. RobotsRecord fields ------------------------------------------------------

OK_RECORD = RobotsRecord(RobotsKind.OK, 200, NOW, NOW + TTL_MS, body=b"User-agent: *\n")
UNAVAILABLE_RECORD = RobotsRecord(RobotsKind.UNAVAILABLE, 404, NOW, NOW + TTL_MS)
UNREACHABLE_RECORD = RobotsRecord(
    RobotsKind.UNREACHABLE,
    503,
    NOW,
    NOW + 20_000,
    fails=2,
    outage_since_ms=NOW - 10_000,
    good_body=b"User-agent: *\nDisallow: /x\n",
)


@pytest.mark.parametrize(
    ("record", "keys"),
    [
        (OK_RECORD, {"k", "s", "f", "x", "b"}),
        (UNAVAILABLE_RECORD, {"k", "s", "f", "x"}),
        (UNREACHABLE_RECORD, {"k", "s", "f", "x", "n", "o", "g"}),
        (
            RobotsRecord(RobotsKind.UNREACHABLE, 0, NOW, NOW + 1, fails=1, good_body=b""),
            {"k", "s", "f", "x", "n", "o", "g"},
        ),
    ],
)
def test_record_fields_round_trip(record: RobotsRecord, keys: set[str]) -> None:
    fields = record.to_fields()
    assert set(fields) == keys
    assert fields["k"] == record.kind.value
    assert RobotsRecord.from_fields(as_redis(fields)) == record


def test_record_fields_compress_bodies() -> None:
    fields = UNREACHABLE_RECORD.to_fields()
    assert fields["g"] == zlib.compress(b"User-agent: *\nDisallow: /x\n")
    assert (fields["n"], fields["o"]) == (2, NOW - 10_000)


def _damage(fields: dict[bytes, bytes], key: bytes, value: bytes | None) -> dict[bytes, bytes]:
    damaged = dict(fields)
    if value is None:
        del damaged[key]
    else:
        damaged[key] = value
    return damaged


@pytest.mark.parametrize(
    ("record", "key", "value"),
    [
        (OK_RECORD, b"b", b"not zlib"),
        (UNREACHABLE_RECORD, b"g", b"\x78\x9c garbage"),
        (OK_RECORD, b"k", None),
        (OK_RECORD, b"k", b"sometimes"),
        (OK_RECORD, b"k", b"\xff"),
        (UNAVAILABLE_RECORD, b"s", b"four-oh-four"),
        (UNAVAILABLE_RECORD, b"x", None),
        (UNREACHABLE_RECORD, b"n", b"two"),
    ],
)
def test_damaged_fields_give_none(record: RobotsRecord, key: bytes, value: bytes | None) -> None:
    fields = as_redis(record.to_fields())
    assert RobotsRecord.from_fields(fields) == record  # undamaged, it reads back
    assert RobotsRecord.from_fields(_damage(fields, key, value)) is None


def test_empty_fields_give_none() -> None:
    assert RobotsRecord.from_fields({}) is None


# --- 8. RobotsConfig -------------------------------------------------------------


def test_config_defaults() -> None:
    config = make_config()
    assert config.obey is True
    assert config.user_agent_token == "crawlproject"
    assert config.ttl_seconds == 86400.0
    assert config.max_bytes == 512_000
    assert config.max_redirects == 5
    assert config.crawl_delay_max_seconds == 30.0


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"ROBOTSTXT_OBEY": True}, "ROBOTSTXT_OBEY"),
        ({"CRAWL_ROBOTS_USER_AGENT": "crawl project"}, "product token"),
        ({"CRAWL_ROBOTS_USER_AGENT": "bot/1.0"}, "product token"),
        ({"CRAWL_ROBOTS_USER_AGENT": ""}, "product token"),
        ({"CRAWL_ROBOTS_TTL_SECONDS": 86401}, "CRAWL_ROBOTS_TTL_SECONDS"),
        ({"CRAWL_ROBOTS_TTL_SECONDS": 0}, "CRAWL_ROBOTS_TTL_SECONDS"),
        ({"CRAWL_ROBOTS_MAX_BYTES": 511_999}, "CRAWL_ROBOTS_MAX_BYTES"),
        ({"CRAWL_ROBOTS_MAX_REDIRECTS": 4}, "CRAWL_ROBOTS_MAX_REDIRECTS"),
        ({"CRAWL_ROBOTS_CRAWL_DELAY_MAX_SECONDS": -1}, "CRAWL_DELAY_MAX"),
        (
            {"CRAWL_ROBOTS_RETRY_SECONDS": 100, "CRAWL_ROBOTS_RETRY_MAX_SECONDS": 50},
            "CRAWL_ROBOTS_RETRY_SECONDS",
        ),
    ],
)
def test_config_rejects(overrides: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        make_config(**overrides)


@pytest.mark.parametrize(
    "overrides",
    [
        {"ROBOTSTXT_OBEY": True, "CRAWL_ROBOTS_OBEY": False},
        {"CRAWL_ROBOTS_USER_AGENT": "Crawl_Project-x", "USER_AGENT": "Crawl_Project-x/2"},
        {"CRAWL_ROBOTS_TTL_SECONDS": 86400},
        {"CRAWL_ROBOTS_MAX_BYTES": 500 * 1024},
        {"CRAWL_ROBOTS_MAX_REDIRECTS": 5},
    ],
)
def test_config_accepts_the_boundaries(overrides: dict[str, object]) -> None:
    make_config(**overrides)


def test_config_rejects_a_token_with_a_trailing_newline() -> None:
    with pytest.raises(ConfigError, match="product token"):
        make_config(CRAWL_ROBOTS_USER_AGENT="crawlproject\n")


def test_user_agent_without_the_token_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="crawlproject.robots.config"):
        make_config(USER_AGENT="Mozilla/5.0 (compatible; otherbot/2.0)")
    warnings = [r for r in caplog.records if r.name == "crawlproject.robots.config"]
    assert len(warnings) == 1
    assert warnings[0].levelno == logging.WARNING
    assert "'crawlproject'" in warnings[0].getMessage()
    assert "otherbot/2.0" in warnings[0].getMessage()


@pytest.mark.parametrize(
    "overrides",
    [
        {"USER_AGENT": "Mozilla/5.0 (compatible; CrawlProject/1.0)"},
        {"USER_AGENT": "otherbot/2.0", "CRAWL_ROBOTS_OBEY": False},
    ],
)
def test_user_agent_with_the_token_does_not_warn(
    overrides: dict[str, object], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="crawlproject.robots.config"):
        make_config(**overrides)
    assert [r for r in caplog.records if r.name == "crawlproject.robots.config"] == []


def test_a_parser_crash_counts_as_no_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    import crawlproject.robots.policy as policy

    def boom(body: bytes, token: str) -> object:
        raise RecursionError("hostile input")

    monkeypatch.setattr(policy, "_parse", boom)
    record = RobotsRecord(RobotsKind.OK, 200, 0, 10**13, body=b"User-agent: *\nDisallow: /\n")
    rules = RobotsRules(record, "crawlproject", 10**9)
    assert rules.parse_error == "RecursionError: hostile input"
    assert rules.verdict("http://a.test/x", 1) is Verdict.ALLOW
