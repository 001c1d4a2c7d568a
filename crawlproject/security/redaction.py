"""No credential in the logs: a filter on every log handler masks secrets.

Scrapy logs the settings that differ from its defaults when a crawl starts
("Overridden settings"), so ``-s AWS_SECRET_ACCESS_KEY=...`` or a ``REDIS_URL``
with a password would be written to every worker's log, and from there to log
collectors. This extension, built by Scrapy just before that line is logged,
adds a filter to each handler of the root logger (where Scrapy's own handler
is) that rewrites any record mentioning a secret:

* the value of every setting someone set whose name says it is secret
  (``SECRET``, ``PASSWORD``, ``TOKEN``, ``KEY_ID``, ``CREDENTIAL`` in it: AWS
  keys and session tokens, passwords, ...), wherever it appears;
* the password part of any ``scheme://user:password@host`` URL, and the
  value of a URL query parameter whose name says it is secret
  (``rediss://...?ssl_password=...``).

Values shorter than ``MIN_SECRET_CHARS`` are not masked by value (masking
"1" everywhere would wreck every log line); URLs are masked whatever the
length. The mask is ``***``. Off only by removing the extension.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from scrapy import signals

from crawlproject.given import is_given

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

MASK = "***"
MIN_SECRET_CHARS = 4
SECRET_NAME_PARTS = ("SECRET", "PASSWORD", "PASSWD", "TOKEN", "KEY_ID", "CREDENTIAL")
# scheme://user:password@ -> scheme://user:***@ (user may be empty: redis://:pw@h)
_URL_PASSWORD_RE = re.compile(r"(?P<head>\b[a-zA-Z][\w+.-]*://[^\s:/@'\"]*:)[^\s@/'\"]+@")
# ?ssl_password=x -> ?ssl_password=*** (not "token": crawled URLs are full of
# pagination and CSRF tokens, and their log lines should stay greppable)
_QUERY_SECRET_RE = re.compile(
    r"(?P<head>[?&][\w.-]*(?:secret|password|passwd)[\w.-]*=)[^&\s'\"#]+",
    re.IGNORECASE,
)


def secret_values(settings: BaseSettings) -> list[str]:
    """The values of the settings whose names say they are secret, longest first."""
    found = set()
    for name, value in settings.items():
        if not isinstance(value, str) or len(value) < MIN_SECRET_CHARS:
            continue
        if not is_given(settings, name):
            continue  # Scrapy's own defaults (FTP_PASSWORD "guest") are no secret
        if any(part in name.upper() for part in SECRET_NAME_PARTS):
            found.add(value)
    return sorted(found, key=len, reverse=True)


def redact(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, MASK)
    text = _URL_PASSWORD_RE.sub(lambda m: m.group("head") + MASK + "@", text)
    return _QUERY_SECRET_RE.sub(lambda m: m.group("head") + MASK, text)


class RedactingFilter(logging.Filter):
    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return True  # a malformed record: leave it to logging's own error path
        clean = redact(message, self.secrets)
        if clean != message:
            record.msg, record.args = clean, ()
        return True


class SecretRedaction:
    def __init__(self, crawler: Crawler, secrets: list[str]) -> None:
        self.filter = RedactingFilter(secrets)
        self._handlers: list[logging.Handler] = []
        self._install()
        crawler.signals.connect(self._remove, signal=signals.engine_stopped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SecretRedaction:
        return cls(crawler, secret_values(crawler.settings))

    def _install(self) -> None:
        for handler in logging.getLogger().handlers:
            if self.filter not in handler.filters:
                handler.addFilter(self.filter)
                self._handlers.append(handler)

    def _remove(self, *_: Any) -> None:
        for handler in self._handlers:
            handler.removeFilter(self.filter)
        self._handlers.clear()
