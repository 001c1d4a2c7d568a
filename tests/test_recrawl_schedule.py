"""Pure logic of the recrawl service (crawlproject/recrawl/): the fetch-state text,
the adaptive interval (Nutch's AdaptiveFetchSchedule rules) and its settings."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest
from scrapy.settings import Settings

from crawlproject.frontier.crawl.config import ConfigError
from crawlproject.recrawl.config import RecrawlConfig
from crawlproject.recrawl.schedule import (
    STATE_VERSION,
    FetchOutcome,
    FetchState,
    StateDecodeError,
    Verdict,
    changefreq_interval_s,
    decode_state,
    encode_state,
    next_state,
)

DAY_S = 86400
WEEK_S = 7 * DAY_S
HOUR_S = 3600
MAX_S = 90 * DAY_S
T0_S = 1_767_225_600  # 2026-01-01T00:00:00Z
URL = "https://news.example.org/world/2026/01/elections.html"


def digest_of(body: bytes) -> str:
    return hashlib.sha1(body).digest()[:8].hex()


BODY_V1 = b"<html><body><h1>Elections</h1><p>Polls open at 8am.</p></body></html>"
BODY_V2 = b"<html><body><h1>Elections</h1><p>Turnout reached 61%.</p></body></html>"
SIMHASH_V1 = "c3a1f0e47b92d615"
SIMHASH_FAR = f"{int(SIMHASH_V1, 16) ^ 0xFFFF_0000_0000_0000:016x}"  # 16 bits away
SIMHASH_NEAR = f"{int(SIMHASH_V1, 16) ^ 0b101:016x}"  # 2 bits away


@pytest.fixture
def config() -> RecrawlConfig:
    return RecrawlConfig.from_settings(Settings())


def outcome(
    fetched_at_s: int, status: int | None = 200, body: bytes | None = BODY_V1, **kw: object
) -> FetchOutcome:
    fields: dict[str, object] = {
        "url": URL,
        "depth": 2,
        "fetched_at_s": fetched_at_s,
        "status": status,
        "digest": digest_of(body) if body is not None else "",
    }
    fields.update(kw)
    return FetchOutcome(**fields)  # type: ignore[arg-type]


def first(config: RecrawlConfig, **kw: object) -> FetchState:
    state, verdict = next_state(None, outcome(T0_S, **kw), config)
    assert verdict is Verdict.NEW
    assert state is not None
    return state


def refetch(
    prev: FetchState, config: RecrawlConfig, **kw: object
) -> tuple[FetchState | None, Verdict]:
    return next_state(prev, outcome(prev.due_s(), **kw), config)


# --- settings ------------------------------------------------------------------------


def test_config_defaults(config: RecrawlConfig) -> None:
    assert config == RecrawlConfig(
        track=False,
        default_interval_s=WEEK_S,
        min_interval_s=HOUR_S,
        max_interval_s=MAX_S,
        inc_rate=0.4,
        dec_rate=0.2,
        gone_after=3,
        batch=1000,
        max_queued=1_000_000,
        poll_seconds=5.0,
        simhash_k=3,
    )


def test_config_reads_strings_as_scrapy_settings_do() -> None:
    config = RecrawlConfig.from_settings(
        Settings(
            {
                "CRAWL_RECRAWL_TRACK": "1",
                "CRAWL_RECRAWL_DEFAULT_INTERVAL_SECONDS": "86400",
                "CRAWL_RECRAWL_INC_RATE": "0.5",
                "CRAWL_SIMHASH_K": "4",
            }
        )
    )
    assert config.track is True
    assert config.default_interval_s == DAY_S
    assert config.inc_rate == 0.5
    assert config.simhash_k == 4


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"CRAWL_RECRAWL_MIN_INTERVAL_SECONDS": 0}, "CRAWL_RECRAWL_MIN_INTERVAL_SECONDS"),
        ({"CRAWL_RECRAWL_MIN_INTERVAL_SECONDS": -60}, "CRAWL_RECRAWL_MIN_INTERVAL_SECONDS"),
        (
            {
                "CRAWL_RECRAWL_MIN_INTERVAL_SECONDS": 30 * DAY_S,
                "CRAWL_RECRAWL_MAX_INTERVAL_SECONDS": 7 * DAY_S,
            },
            "CRAWL_RECRAWL_MAX_INTERVAL_SECONDS",
        ),
        ({"CRAWL_RECRAWL_DEFAULT_INTERVAL_SECONDS": 60}, "CRAWL_RECRAWL_DEFAULT_INTERVAL_SECONDS"),
        (
            {"CRAWL_RECRAWL_DEFAULT_INTERVAL_SECONDS": 365 * DAY_S},
            "CRAWL_RECRAWL_DEFAULT_INTERVAL_SECONDS",
        ),
        ({"CRAWL_RECRAWL_INC_RATE": 0.0}, "CRAWL_RECRAWL_INC_RATE"),
        ({"CRAWL_RECRAWL_INC_RATE": 10.5}, "CRAWL_RECRAWL_INC_RATE"),
        ({"CRAWL_RECRAWL_INC_RATE": "nan"}, "CRAWL_RECRAWL_INC_RATE"),
        ({"CRAWL_RECRAWL_DEC_RATE": 0.0}, "CRAWL_RECRAWL_DEC_RATE"),
        ({"CRAWL_RECRAWL_DEC_RATE": 1.0}, "CRAWL_RECRAWL_DEC_RATE"),
        ({"CRAWL_RECRAWL_GONE_AFTER": 0}, "CRAWL_RECRAWL_GONE_AFTER"),
        ({"CRAWL_RECRAWL_BATCH": 0}, "CRAWL_RECRAWL_BATCH"),
        ({"CRAWL_RECRAWL_MAX_QUEUED": 0}, "CRAWL_RECRAWL_MAX_QUEUED"),
        ({"CRAWL_RECRAWL_POLL_SECONDS": 0}, "CRAWL_RECRAWL_POLL_SECONDS"),
        ({"CRAWL_RECRAWL_POLL_SECONDS": -1.0}, "CRAWL_RECRAWL_POLL_SECONDS"),
        ({"CRAWL_SIMHASH_K": 16}, "CRAWL_SIMHASH_K"),
    ],
)
def test_config_rejects(settings: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        RecrawlConfig.from_settings(Settings(settings))


def test_config_accepts_edges() -> None:
    config = RecrawlConfig.from_settings(
        Settings(
            {
                "CRAWL_RECRAWL_MIN_INTERVAL_SECONDS": DAY_S,
                "CRAWL_RECRAWL_MAX_INTERVAL_SECONDS": DAY_S,
                "CRAWL_RECRAWL_DEFAULT_INTERVAL_SECONDS": DAY_S,
                "CRAWL_RECRAWL_INC_RATE": 10.0,
                "CRAWL_RECRAWL_GONE_AFTER": 1,
            }
        )
    )
    assert config.min_interval_s == config.max_interval_s == DAY_S


# --- the state text ------------------------------------------------------------------

STATE = FetchState(
    url="https://example.com/news/",
    depth=1,
    last_fetch_s=T0_S,
    interval_s=846720,
    fetches=2,
    changes=0,
    gone=0,
    digest="2fd4e1c67a2d28fc",
    simhash="c3a1f0e47b92d615",
    etag='W/"5f1a-3c2"',
    last_modified="Thu, 01 Jan 2026 00:00:00 GMT",
)
STATE_TEXT = (
    "1\t1767225600\t846720\t2\t0\t0\t2fd4e1c67a2d28fc\tc3a1f0e47b92d615\t1\t"
    'W/"5f1a-3c2"\tThu, 01 Jan 2026 00:00:00 GMT\thttps://example.com/news/'
)


def test_encode_is_the_documented_example() -> None:
    assert STATE_VERSION == "1"
    assert encode_state(STATE) == STATE_TEXT
    assert len(STATE_TEXT.encode()) == 130  # as the module docstring says
    assert decode_state(STATE_TEXT) == STATE
    assert decode_state(STATE_TEXT.encode()) == STATE
    assert STATE.due_s() == T0_S + 846720


@pytest.mark.parametrize(
    "state",
    [
        STATE,
        # Unicode path percent-encoded, a query with '=' '&' ';' '#' and spaces
        # (the URL is the last field, so only TAB/CR/LF are off limits).
        replace(
            STATE,
            url="https://de.example.org/st%C3%A4dte/m%C3%BCnchen?q=a b&x=1;y=2#top",
            etag='"33a64df551425fcc55e4d42a148795d9f25f89d4"',
        ),
        # Non-ASCII text survives as UTF-8; an ETag with quotes, W/ and a comma.
        replace(STATE, url="https://例え.jp/パス", etag='W/"x,y"', last_modified=""),
        # Nothing known yet: empty digest, SimHash and validators.
        replace(STATE, digest="", simhash="", etag="", last_modified="", interval_s=3600),
        replace(STATE, depth=0, fetches=0, changes=0, gone=0, last_fetch_s=0),
    ],
)
def test_round_trip(state: FetchState) -> None:
    text = encode_state(state)
    assert decode_state(text) == state
    assert decode_state(text.encode("utf-8")) == state
    assert encode_state(decode_state(text)) == text
    assert len(text.split("\t")) == 12


@pytest.mark.parametrize(
    "field", ["url", "etag", "last_modified"], ids=["url", "etag", "last_modified"]
)
@pytest.mark.parametrize("bad", ["\t", "\r", "\n"], ids=["tab", "cr", "lf"])
def test_encode_rejects_line_breakers(field: str, bad: str) -> None:
    value = getattr(STATE, field) + bad + "x"
    with pytest.raises(ValueError, match=field):
        encode_state(replace(STATE, **{field: value}))


@pytest.mark.parametrize(
    "changes",
    [
        {"url": ""},
        {"digest": "2FD4E1C67A2D28FC"},  # upper case: not what the fleet writes
        {"digest": "2fd4e1c67a2d28"},  # 14 hex: would be a truncated digest
        {"simhash": "xyz"},
        {"interval_s": -1},
        {"fetches": True},
        {"depth": 1.0},
    ],
)
def test_encode_rejects_unwritable(changes: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        encode_state(replace(STATE, **changes))  # type: ignore[arg-type]


def _with_field(index: int, value: str) -> str:
    fields = STATE_TEXT.split("\t")
    fields[index] = value
    return "\t".join(fields)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1",
        STATE_TEXT + "\textra",  # a TAB in the URL: 13 fields
        STATE_TEXT.rsplit("\t", 1)[0],  # 11 fields
        _with_field(0, "2"),  # a future version
        _with_field(0, ""),
        _with_field(1, "17672256OO"),
        _with_field(1, "-5"),
        _with_field(2, "+846720"),
        _with_field(2, "0846720"),  # padding: never written
        _with_field(2, " 846720"),
        _with_field(3, "2.0"),
        _with_field(4, "1_000"),
        _with_field(5, "٣"),  # an Arabic-Indic 3: int() takes it, the format does not
        _with_field(8, ""),
        _with_field(6, "2fd4e1c67a2d28fz"),
        _with_field(7, "c3a1f0e47b92d615ff"),
        _with_field(11, ""),
        STATE_TEXT + "\n",  # CR/LF would break the one-line form
        STATE_TEXT.replace("Thu,", "Thu,\r"),
    ],
)
def test_decode_rejects_malformed(text: str) -> None:
    with pytest.raises(StateDecodeError):
        decode_state(text)


def test_decode_rejects_invalid_utf8_and_is_a_value_error() -> None:
    with pytest.raises(StateDecodeError, match="UTF-8"):
        decode_state(STATE_TEXT.encode() + b"\xff")
    assert issubclass(StateDecodeError, ValueError)


# --- first fetch ---------------------------------------------------------------------


def test_first_fetch_takes_the_default_interval_and_the_page(config: RecrawlConfig) -> None:
    state = first(config, simhash=SIMHASH_V1, etag='"v1"', last_modified="Wed, 31 Dec 2025")
    assert state == FetchState(
        url=URL,
        depth=2,
        last_fetch_s=T0_S,
        interval_s=WEEK_S,
        fetches=1,
        changes=0,
        gone=0,
        digest=digest_of(BODY_V1),
        simhash=SIMHASH_V1,
        etag='"v1"',
        last_modified="Wed, 31 Dec 2025",
    )
    assert state.due_s() == T0_S + WEEK_S


@pytest.mark.parametrize(
    ("changefreq", "interval_s"),
    [
        ("always", HOUR_S),  # the minimum
        ("hourly", HOUR_S),
        ("daily", DAY_S),
        (" Daily ", DAY_S),  # sitemaps in the wild: case and spaces vary
        ("weekly", WEEK_S),
        ("monthly", 30 * DAY_S),
        ("yearly", MAX_S),  # 365 days, clamped to the 90-day maximum
        ("never", MAX_S),
        ("fortnightly", WEEK_S),  # unknown: the default
        ("", WEEK_S),
    ],
)
def test_first_fetch_follows_sitemap_changefreq(
    config: RecrawlConfig, changefreq: str, interval_s: int
) -> None:
    assert first(config, sitemap_changefreq=changefreq).interval_s == interval_s
    assert changefreq_interval_s(changefreq, config) == interval_s


def test_changefreq_is_clamped_to_a_raised_minimum(config: RecrawlConfig) -> None:
    raised = replace(config, min_interval_s=2 * DAY_S)
    assert changefreq_interval_s("hourly", raised) == 2 * DAY_S
    assert changefreq_interval_s("always", raised) == 2 * DAY_S


def test_changefreq_only_sets_the_first_interval(config: RecrawlConfig) -> None:
    state = first(config, sitemap_changefreq="daily")
    again, verdict = refetch(state, config, sitemap_changefreq="hourly")
    assert verdict is Verdict.UNCHANGED
    assert again is not None and again.interval_s == round(DAY_S * 1.4) == 120960


def test_first_fetch_error_is_tracked_with_the_default_interval(config: RecrawlConfig) -> None:
    for status in (500, 503, 403, 301, None):
        state, verdict = next_state(None, outcome(T0_S, status=status, body=None), config)
        assert verdict is Verdict.ERROR
        assert state is not None
        assert (state.interval_s, state.fetches, state.gone, state.digest) == (WEEK_S, 1, 0, "")


def test_first_fetch_404_keeps_tracking_until_gone_after(config: RecrawlConfig) -> None:
    state, verdict = next_state(None, outcome(T0_S, status=404, body=None), config)
    assert verdict is Verdict.GONE
    assert state is not None and (state.gone, state.interval_s) == (1, WEEK_S)
    once = replace(config, gone_after=1)
    assert next_state(None, outcome(T0_S, status=410, body=None), once) == (None, Verdict.GONE)


def test_first_fetch_304_counts_as_new(config: RecrawlConfig) -> None:
    state, verdict = next_state(None, outcome(T0_S, status=304, body=None, etag='"abc"'), config)
    assert verdict is Verdict.NEW
    assert state is not None and (state.etag, state.digest, state.interval_s) == (
        '"abc"',
        "",
        WEEK_S,
    )


# --- refetches -----------------------------------------------------------------------


def test_304_lengthens_and_keeps_the_content_fingerprints(config: RecrawlConfig) -> None:
    state = first(config, simhash=SIMHASH_V1, etag='"v1"', last_modified="Wed, 31 Dec 2025")
    again, verdict = refetch(state, config, status=304, body=None)
    assert verdict is Verdict.NOT_MODIFIED
    assert again == replace(
        state, last_fetch_s=T0_S + WEEK_S, interval_s=846720, fetches=2
    )  # 7 days x 1.4
    # A 304 that carries a fresh ETag updates it; the absent Last-Modified is kept.
    third, verdict = refetch(again, config, status=304, body=None, etag='"v1b"')
    assert verdict is Verdict.NOT_MODIFIED
    assert third is not None
    assert (third.etag, third.last_modified) == ('"v1b"', "Wed, 31 Dec 2025")
    assert third.interval_s == round(846720 * 1.4) == 1185408


def test_same_digest_lengthens(config: RecrawlConfig) -> None:
    state = first(config, simhash=SIMHASH_V1)
    again, verdict = refetch(state, config, simhash=SIMHASH_V1)
    assert verdict is Verdict.UNCHANGED
    assert again is not None
    assert (again.interval_s, again.changes, again.fetches) == (846720, 0, 2)


def test_digest_change_shortens(config: RecrawlConfig) -> None:
    state = first(config, simhash=SIMHASH_V1, etag='"v1"')
    again, verdict = refetch(state, config, body=BODY_V2, simhash=SIMHASH_FAR, etag='"v2"')
    assert verdict is Verdict.CHANGED
    assert again == replace(
        state,
        last_fetch_s=T0_S + WEEK_S,
        interval_s=483840,  # 7 days x 0.8
        fetches=2,
        changes=1,
        digest=digest_of(BODY_V2),
        simhash=SIMHASH_FAR,
        etag='"v2"',
    )


def test_digest_change_without_simhash_is_a_change(config: RecrawlConfig) -> None:
    # A PDF: no SimHash on either side, so the digest decides.
    state = first(config)
    again, verdict = refetch(state, config, body=BODY_V2)
    assert verdict is Verdict.CHANGED
    assert again is not None and again.interval_s == 483840


def test_near_simhash_is_unchanged(config: RecrawlConfig) -> None:
    # The body differs (a timestamp moved) but the text's SimHash is 2 bits away (<= k=3).
    state = first(config, simhash=SIMHASH_V1)
    again, verdict = refetch(state, config, body=BODY_V2, simhash=SIMHASH_NEAR)
    assert verdict is Verdict.UNCHANGED
    assert again is not None
    assert (again.interval_s, again.changes) == (846720, 0)
    # The new fingerprints are kept: the next comparison is against this fetch.
    assert (again.digest, again.simhash) == (digest_of(BODY_V2), SIMHASH_NEAR)
    # With k = 1 the same 2 bits are a change.
    strict = replace(config, simhash_k=1)
    _, verdict = refetch(state, strict, body=BODY_V2, simhash=SIMHASH_NEAR)
    assert verdict is Verdict.CHANGED


def test_200_without_validators_clears_them(config: RecrawlConfig) -> None:
    state = first(config, etag='"v1"', last_modified="Wed, 31 Dec 2025")
    again, _ = refetch(state, config)
    assert again is not None and (again.etag, again.last_modified) == ("", "")


def test_unencodable_validators_are_dropped(config: RecrawlConfig) -> None:
    state = first(config, etag='"a\tb"', last_modified="Wed,\r\n 31 Dec 2025")
    assert (state.etag, state.last_modified) == ("", "")
    encode_state(state)  # still encodable


def test_always_changing_page_converges_to_min(config: RecrawlConfig) -> None:
    state = first(config)
    intervals = []
    for i in range(30):
        body = f"<html><body>live score, update {i}</body></html>".encode()
        new, verdict = refetch(state, config, body=body)
        assert verdict is Verdict.CHANGED and new is not None
        state = new
        intervals.append(state.interval_s)
    assert intervals[:3] == [483840, 387072, 309658]  # x 0.8 each (309657.6 rounds up)
    # 604800 x 0.8**n < 3600 from n = 23 on.
    assert intervals[21] > HOUR_S
    assert intervals[22:] == [HOUR_S] * 8
    assert (state.fetches, state.changes) == (31, 30)


def test_never_changing_page_converges_to_max(config: RecrawlConfig) -> None:
    state = first(config)
    intervals = []
    for _ in range(12):
        new, verdict = refetch(state, config)
        assert verdict is Verdict.UNCHANGED and new is not None
        state = new
        intervals.append(state.interval_s)
    assert intervals[:3] == [846720, 1185408, 1659571]  # x 1.4 each
    # 604800 x 1.4**n > 90 days from n = 8 on.
    assert intervals[6] < MAX_S
    assert intervals[7:] == [MAX_S] * 5
    assert state.due_s() == state.last_fetch_s + MAX_S


def test_sitemap_lastmod_after_last_fetch_holds_the_interval(config: RecrawlConfig) -> None:
    state = first(config)
    lastmod_s = T0_S + 3 * DAY_S  # the sitemap claims a change after our fetch
    again, verdict = refetch(state, config, sitemap_lastmod_s=lastmod_s)
    assert verdict is Verdict.UNCHANGED
    assert again is not None and again.interval_s == WEEK_S  # not lengthened
    again, verdict = refetch(state, config, status=304, body=None, sitemap_lastmod_s=lastmod_s)
    assert verdict is Verdict.NOT_MODIFIED
    assert again is not None and again.interval_s == WEEK_S
    # A lastmod before our last fetch says nothing new: the usual x 1.4.
    again, _ = refetch(state, config, sitemap_lastmod_s=T0_S - DAY_S)
    assert again is not None and again.interval_s == 846720
    # A real change still shortens.
    again, verdict = refetch(state, config, body=BODY_V2, sitemap_lastmod_s=lastmod_s)
    assert verdict is Verdict.CHANGED
    assert again is not None and again.interval_s == 483840


def test_404_three_times_stops_tracking(config: RecrawlConfig) -> None:
    state = first(config, simhash=SIMHASH_V1, etag='"v1"')
    gone1, verdict = refetch(state, config, status=404, body=None)
    assert verdict is Verdict.GONE and gone1 is not None
    # Kept as it was (interval, content, validators): retried after the same time.
    assert gone1 == replace(state, last_fetch_s=T0_S + WEEK_S, fetches=2, gone=1)
    gone2, verdict = refetch(gone1, config, status=410, body=None)
    assert verdict is Verdict.GONE and gone2 is not None
    assert (gone2.gone, gone2.interval_s, gone2.fetches) == (2, WEEK_S, 3)
    assert refetch(gone2, config, status=404, body=None) == (None, Verdict.GONE)


def test_a_good_answer_resets_gone(config: RecrawlConfig) -> None:
    state = first(config)
    gone2 = replace(state, gone=2)
    for status in (200, 304):
        again, _ = refetch(gone2, config, status=status)
        assert again is not None and again.gone == 0
    # An error does not: 404, 500, 404 still ends it.
    err, verdict = refetch(gone2, config, status=500, body=None)
    assert verdict is Verdict.ERROR and err is not None and err.gone == 2
    assert refetch(err, config, status=404, body=None) == (None, Verdict.GONE)


@pytest.mark.parametrize("status", [500, 502, 503, 429, 403, 301, None])
def test_errors_keep_interval_and_content(config: RecrawlConfig, status: int | None) -> None:
    state = replace(first(config, simhash=SIMHASH_V1, etag='"v1"'), interval_s=846720)
    again, verdict = refetch(state, config, status=status, body=None)
    assert verdict is Verdict.ERROR
    assert again == replace(state, last_fetch_s=T0_S + 846720, fetches=2)


def test_depth_keeps_the_shortest_path(config: RecrawlConfig) -> None:
    state = first(config)  # depth 2
    again, _ = refetch(state, config, depth=5)
    assert again is not None and again.depth == 2
    again, _ = refetch(again, config, depth=0)
    assert again is not None and again.depth == 0


def test_interval_is_clamped_to_new_bounds(config: RecrawlConfig) -> None:
    state = replace(first(config), interval_s=80 * DAY_S)
    tighter = replace(config, max_interval_s=30 * DAY_S, default_interval_s=WEEK_S)
    again, verdict = refetch(state, tighter, status=503, body=None)
    assert verdict is Verdict.ERROR
    assert again is not None and again.interval_s == 30 * DAY_S


def test_every_state_next_state_makes_encodes(config: RecrawlConfig) -> None:
    state = first(config, simhash=SIMHASH_V1, etag='W/"1"', last_modified="Wed, 31 Dec 2025")
    for kw in (
        {"status": 304, "body": None},
        {"body": BODY_V2, "simhash": SIMHASH_FAR},
        {"status": 404, "body": None},
        {"status": None, "body": None},
    ):
        new, _ = refetch(state, config, **kw)
        assert new is not None
        assert decode_state(encode_state(new)) == new
        state = new


def test_an_overlong_validator_is_not_kept() -> None:
    config = RecrawlConfig.from_settings(Settings())
    outcome = FetchOutcome(
        url="http://a.test/", depth=0, fetched_at_s=1_767_225_600, status=200,
        digest="0123456789abcdef", etag='"' + "x" * 300 + '"', last_modified="Thu, 01 Jan 2026",
    )  # fmt: skip
    state, _ = next_state(None, outcome, config)
    assert state is not None and state.etag == "" and state.last_modified == "Thu, 01 Jan 2026"
