"""Which Redis a crawl uses, and scrapy-redis's settings, read as its users mean them.

The frontier's Redis URL, first found of:

1. the ``REDIS_URL`` setting (``-s``, a spider's ``custom_settings``, Scrapyd's
   settings, the settings module);
2. scrapy-redis's ``REDIS_HOST`` / ``REDIS_PORT`` / ``REDIS_DB`` /
   ``REDIS_PARAMS`` settings: a URL is built from them, as scrapy-redis's
   redis_client.py builds its client (host ``localhost`` and port 6379 when only
   the other one is given; ``REDIS_PARAMS`` alone, with no ``REDIS_URL``
   anywhere, means ``localhost:6379`` as there);
3. the ``REDIS_URL`` environment variable (containers, systemd, Scrapyd's
   environment): a setting wins over it;
4. none: the embedded Redis (crawlproject/frontier/connection/embedded.py).

``REDIS_PARAMS`` also completes a ``REDIS_URL`` (what the URL leaves out:
password, db, TLS files ...), as redis-py's ``from_url(url, **params)`` does
for scrapy-redis. ``CRAWL_NAME`` and ``CRAWL_DATA_DIR`` are read from the
environment too (crawlproject/settings.py copies the three variables in, at
the settings module's priority, below any other setting).

scrapy-redis settings that have an equivalent are honoured:
``REDIS_START_URLS_KEY`` names the seed list (``%(name)s``: the crawl's name),
``SCHEDULER_PERSIST = False`` deletes the crawl's keys once the fleet's crawl
has ended (crawlproject/frontier/crawl/persist.py), ``SCHEDULER_FLUSH_ON_START = True``
deletes them when a worker starts, unless other workers of the crawl are alive
(crawlproject/frontier/crawl/fresh_start.py), ``MAX_IDLE_TIME_BEFORE_CLOSE`` above 0
is the seconds of a fleet-wide empty frontier before the crawl ends
(crawlproject/frontier/scrapy_glue/redis_spiders.py). Those that cannot apply to a
shared, polite frontier are refused at start (:func:`refuse_scrapy_redis`)
with one line saying what to use instead.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from scrapy.settings import BaseSettings

from crawlproject.given import is_given
from crawlproject.setting_values import ConfigError

# Environment variables read when the setting is not given (settings.py).
ENVIRONMENT_SETTINGS = ("REDIS_URL", "CRAWL_NAME", "CRAWL_DATA_DIR")

SCRAPY_REDIS_START_URLS_KEY = "%(name)s:start_urls"

# REDIS_PARAMS keys that go into the URL's query (redis-py parses them back).
_QUERY_PARAMS = frozenset(
    {
        "socket_timeout", "socket_connect_timeout", "socket_keepalive", "retry_on_timeout",
        "max_connections", "health_check_interval", "protocol", "ssl_check_hostname",
        "ssl_ca_certs", "ssl_ca_path", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs",
        "ssl_password", "ssl_min_version",
    }
)  # fmt: skip
_URL_PARAMS = frozenset({"url", "host", "port", "db", "username", "password", "ssl"})
_UTF8 = frozenset({"utf-8", "utf8"})

# scrapy-redis settings with no meaning here -> what to use instead.
_REFUSED: dict[str, str] = {
    "SCHEDULER_QUEUE_CLASS": (
        "the frontier keeps one queue per host and orders it by CRAWL_PRIORITY_POLICY "
        "('depth' or 'aopic')"
    ),
    "SCHEDULER_QUEUE_KEY": (
        "the frontier's keys are fixed per crawl (cp:{<crawl>}:...): name the crawl with "
        "CRAWL_NAME or -a crawl=NAME"
    ),
    "SCHEDULER_DUPEFILTER_CLASS": (
        "the frontier's seen-URL test replaces the dupefilter (canonical URLs; "
        "CRAWL_SESSION_PARAMS)"
    ),
    "SCHEDULER_DUPEFILTER_KEY": "the seen-URL test's keys are fixed per crawl: use CRAWL_NAME",
    "DUPEFILTER_KEY": "the seen-URL test's keys are fixed per crawl: use CRAWL_NAME",
    "SCHEDULER_SERIALIZER": (
        "requests are stored as JSON (crawlproject/frontier/store/codec.py); list Request "
        "subclasses in CRAWL_REQUEST_CLASSES"
    ),
    "SCHEDULER_IDLE_BEFORE_CLOSE": (
        "use CRAWL_IDLE_CLOSE_SECONDS (seconds the whole fleet's frontier stays empty "
        "before every worker finishes)"
    ),
    "REDIS_START_URLS_AS_SET": (
        "the seed list is a Redis LIST (LPUSH <crawl>:start_urls URL); a JSON entry "
        '{"url": ..., "meta": {...}} carries meta'
    ),
    "REDIS_START_URLS_AS_ZSET": "the seed list is a Redis LIST (LPUSH <crawl>:start_urls URL)",
    "REDIS_CLS": (
        "the frontier uses redis-py's asyncio client; redis+cluster:// URLs give its cluster client"
    ),
    "REDIS_DECODE_RESPONSES": "the frontier reads bytes replies; remove it",
}
_FALSE_IS_HARMLESS = frozenset(
    {
        "REDIS_START_URLS_AS_SET", "REDIS_START_URLS_AS_ZSET", "REDIS_DECODE_RESPONSES",
        "SCHEDULER_IDLE_BEFORE_CLOSE",
    }
)  # fmt: skip


@dataclass(frozen=True)
class RedisTarget:
    """The frontier's Redis: ``url`` None for the embedded one; ``source``
    says where the URL came from, for the start's log line."""

    url: str | None
    source: str


def environment_values(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The :data:`ENVIRONMENT_SETTINGS` set (non-empty) in the environment."""
    env = os.environ if environ is None else environ
    return {name: value for name in ENVIRONMENT_SETTINGS if (value := env.get(name, "").strip())}


def from_environment(
    settings: BaseSettings, name: str, environ: Mapping[str, str] | None = None
) -> bool:
    """Whether setting ``name`` holds its environment variable's value
    (settings.py put it there) rather than a value given as a setting."""
    env = environment_values(environ).get(name)
    if env is None or str(settings.get(name) or "") != env:
        return False
    # A -s (or spider, Scrapyd) value equal to the variable's is a setting.
    return not is_given(settings, name, above_project=True)


def redis_target(settings: BaseSettings, environ: Mapping[str, str] | None = None) -> RedisTarget:
    """The frontier's Redis URL and its source (module docstring's order)."""
    params = _redis_params(settings)
    url = settings.get("REDIS_URL") or None
    env_url = from_environment(settings, "REDIS_URL", environ)
    names_server = any(settings.get(n) for n in ("REDIS_HOST", "REDIS_PORT", "REDIS_DB")) or any(
        k in params for k in ("url", "host", "port")
    )
    if url and not env_url:
        return RedisTarget(_complete(url, params), "the REDIS_URL setting")
    if names_server or (params and not url):
        # scrapy-redis's way; REDIS_PARAMS alone means localhost:6379, as there.
        base = params.pop("url", None)
        if base:
            return RedisTarget(_complete(str(base), params), "REDIS_PARAMS['url']")
        return RedisTarget(_build(settings, params), "REDIS_HOST/REDIS_PORT/REDIS_PARAMS")
    if url:
        return RedisTarget(_complete(url, params), "the REDIS_URL environment variable")
    return RedisTarget(None, "")


def _redis_params(settings: BaseSettings) -> dict[str, Any]:
    try:
        params = dict(settings.getdict("REDIS_PARAMS"))
    except ValueError as exc:
        raise ConfigError(f"REDIS_PARAMS must be a dict (JSON with -s): {exc}") from None
    encoding = str(params.pop("encoding", None) or settings.get("REDIS_ENCODING") or "utf-8")
    if encoding.lower() not in _UTF8:
        raise ConfigError(
            f"REDIS_ENCODING/REDIS_PARAMS['encoding'] {encoding!r}: the frontier stores "
            "URLs as UTF-8; remove it"
        )
    if params.pop("decode_responses", False):
        raise ConfigError("REDIS_PARAMS['decode_responses']: the frontier reads bytes replies")
    if "redis_cls" in params:
        raise ConfigError(f"REDIS_PARAMS['redis_cls']: {_REFUSED['REDIS_CLS']}")
    unknown = sorted(set(params) - _QUERY_PARAMS - _URL_PARAMS)
    if unknown:
        raise ConfigError(
            f"REDIS_PARAMS {', '.join(map(repr, unknown))} cannot apply to the frontier's "
            f"client; it takes {', '.join(sorted(_URL_PARAMS | _QUERY_PARAMS))}"
        )
    return params


def _build(settings: BaseSettings, params: dict[str, Any]) -> str:
    host = str(settings.get("REDIS_HOST") or params.pop("host", None) or "localhost")
    port = settings.get("REDIS_PORT") or params.pop("port", None) or 6379
    db = settings.get("REDIS_DB")
    if db not in (None, ""):
        params["db"] = db
    params.pop("host", None)
    params.pop("port", None)
    try:
        port = int(port)
    except (TypeError, ValueError):
        raise ConfigError(f"REDIS_PORT {port!r} is not a port number") from None
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return _complete(f"redis://{netloc}", params)


def _complete(url: str, params: Mapping[str, Any]) -> str:
    """``url`` with ``params`` filling in what it leaves out (the URL's own
    values win, as in redis-py's ``from_url(url, **params)``)."""
    if not params:
        return url
    parts = urlsplit(url)
    scheme, netloc, path = parts.scheme, parts.netloc, parts.path
    if params.get("ssl") and not scheme.startswith("rediss") and scheme != "unix":
        scheme = scheme.replace("redis", "rediss", 1)
    userinfo, at, hostport = netloc.rpartition("@")
    user, colon, password = userinfo.partition(":")
    if not userinfo and (params.get("username") or params.get("password")):
        user = quote(str(params.get("username") or ""), safe="")
        password, colon = quote(str(params.get("password") or ""), safe=""), ":"
        userinfo, at = f"{user}{colon}{password}", "@"
    netloc = f"{userinfo}{at}{hostport}"
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    db = params.get("db")
    if db not in (None, "") and path.strip("/") == "" and "db" not in query and scheme != "unix":
        path = f"/{int(db)}"
    for name in sorted(_QUERY_PARAMS & set(params)):
        query.setdefault(name, _query_value(params[name]))
    if scheme == "unix" and db not in (None, ""):
        query.setdefault("db", str(int(db)))
    return urlunsplit((scheme, netloc, path, urlencode(query), parts.fragment))


def _query_value(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def start_urls_key(settings: BaseSettings, crawl: str) -> str:
    """The seed list's key: ``REDIS_START_URLS_KEY`` (scrapy-redis's
    ``%(name)s:start_urls`` by default) with ``%(name)s`` the crawl's name."""
    template = str(settings.get("REDIS_START_URLS_KEY") or SCRAPY_REDIS_START_URLS_KEY)
    try:
        key = template % {"name": crawl}
    except (KeyError, ValueError, TypeError) as exc:
        raise ConfigError(
            f"REDIS_START_URLS_KEY {template!r}: only %(name)s (the crawl's name) is "
            f"expanded ({exc!r})"
        ) from None
    if not key:
        raise ConfigError("REDIS_START_URLS_KEY must not be empty")
    return key


def refuse_scrapy_redis(settings: BaseSettings) -> None:
    """ConfigError (one line: the setting, what to use instead) for the first
    scrapy-redis setting that cannot apply to the frontier."""
    for name in ("SCHEDULER", "DUPEFILTER_CLASS"):
        value = str(settings.get(name) or "")
        if value.startswith("scrapy_redis."):
            raise ConfigError(
                f"{name}={value} cannot apply: crawlproject's shared Redis frontier "
                f"(crawlproject.frontier.scheduler.FrontierScheduler) {_INSTEAD[name]}"
            )
    for name, instead in _REFUSED.items():
        if not is_given(settings, name):
            continue
        value = settings.get(name)
        if name in _FALSE_IS_HARMLESS and not _truthy(value):
            continue
        raise ConfigError(f"{name}={value!r} cannot apply: {instead}")
    max_idle = settings.get("MAX_IDLE_TIME_BEFORE_CLOSE")
    if is_given(settings, "MAX_IDLE_TIME_BEFORE_CLOSE") and not _seconds(max_idle):
        raise ConfigError(
            f"MAX_IDLE_TIME_BEFORE_CLOSE={max_idle!r}: expected a whole number of seconds >= 0 "
            "(scrapy-redis's; 0: not set, CRAWL_IDLE_CLOSE_SECONDS applies)"
        )


_INSTEAD = {
    "SCHEDULER": "is the scheduler and already uses REDIS_URL / REDIS_HOST: remove SCHEDULER",
    "DUPEFILTER_CLASS": (
        "tests each URL against the crawl's seen set in Redis: remove DUPEFILTER_CLASS"
    ),
}


def _seconds(value: Any) -> bool:
    """Whether ``value`` reads as scrapy-redis reads MAX_IDLE_TIME_BEFORE_CLOSE
    (``int(value)``), at least 0."""
    try:
        return int(value) >= 0
    except (TypeError, ValueError):
        return False


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() not in ("", "0", "false", "no", "off", "none")
    return bool(value)
