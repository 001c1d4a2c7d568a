"""URL rules, applied to every URL before the seen-URL test.

A rule looks at a canonical URL and returns why it is refused (a short name,
counted as the stat ``rules/<name>``) or None. The built-in rules are set by
``CRAWL_*`` settings (see crawlproject/default_settings/); a user adds one by
writing a class with ``from_settings(settings)`` and ``check(url) -> str | None``
and naming it in ``CRAWL_URL_RULES``::

    class NoPrintPages:
        @classmethod
        def from_settings(cls, settings): return cls()
        def check(self, url: ParsedUrl) -> str | None:
            return "print_page" if url.query_params.get("print") else None

Host patterns (``CRAWL_ALLOW_HOSTS``, ``CRAWL_DENY_HOSTS`` and its file):
``example.com`` is that host only; ``.example.com`` is example.com and every
host below it. ``CRAWL_ALLOW_DOMAINS`` follows Scrapy's ``allowed_domains``
instead: ``example.com`` allows example.com and its subdomains (as
``.example.com`` in CRAWL_ALLOW_HOSTS). When either allow list is set a host
must match one of them. A pattern is a host name or IP address: one with a
scheme, port, path or wildcard (``https://example.com``, ``*.example.com``)
would match no host, so it is refused at start with what to write instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from scrapy.settings import BaseSettings
from scrapy.utils.misc import load_object

from crawlproject.rules.parsed_url import ParsedUrl, UrlRule
from crawlproject.rules.traps import PathRepeatsRule
from crawlproject.setting_values import ConfigError, crawl_setting

# A host name (letters, digits, "-", "_"; IDN as typed or punycode) or an IP address.
_HOST_PATTERN = re.compile(r"\.?(?:[^\W_]|[_-])(?:[\w.-]*[^\W_])?|\[?[0-9a-f:.]+\]?", re.I)


class HostPatterns:
    """``example.com`` matches that host; ``.example.com`` it and its subdomains.
    ``domains`` (CRAWL_ALLOW_DOMAINS, Scrapy's allowed_domains rule): each
    matches itself and its subdomains. ``setting`` names the source in errors."""

    def __init__(
        self, patterns: Iterable[str], domains: Iterable[str] = (), setting: str = "host pattern"
    ) -> None:
        self.exact: set[str] = set()
        self.suffixes: set[str] = set()
        for p in patterns:
            p = _pattern(p, setting)
            if not p:
                continue
            if p.startswith("."):
                self.suffixes.add(p[1:])
            else:
                self.exact.add(p)
        for d in domains:
            d = _pattern(d, "CRAWL_ALLOW_DOMAINS")
            if d:
                self.suffixes.add(d.lstrip("."))

    def __bool__(self) -> bool:
        return bool(self.exact or self.suffixes)

    def matches(self, host: str) -> bool:
        if host in self.exact:
            return True
        if not self.suffixes:
            return False
        # host itself and each parent: a.b.example.com -> b.example.com -> example.com
        while True:
            if host in self.suffixes:
                return True
            _, dot, rest = host.partition(".")
            if not dot:
                return False
            host = rest


def _pattern(raw: str, setting: str) -> str:
    """A pattern, lowercase, IDN hosts as URLs spell them ("" for a blank or
    ``#`` comment line); ConfigError for what can match no host."""
    p = str(raw).strip().lower().rstrip(".")
    if not p or p.startswith("#"):
        return ""
    if not _HOST_PATTERN.fullmatch(p):
        hint = ""
        if p.startswith("*."):
            hint = f": write {p[1:]!r} for it and its subdomains"
        elif "://" in p or "/" in p or ":" in p.strip("[]"):
            host = urlsplit(p if "://" in p else f"//{p}").hostname or p
            hint = f": write the host alone, {host!r} (schemes and ports are not matched)"
        raise ConfigError(f"{setting}: {raw!r} is not a host name{hint}")
    if p.startswith("["):  # ParsedUrl.host has no brackets
        return p.strip("[]")
    dot, name = ("." if p.startswith(".") else ""), p.lstrip(".")
    try:
        return dot + (name if name.isascii() else name.encode("idna").decode("ascii"))
    except UnicodeError as exc:
        raise ConfigError(f"{setting}: {raw!r} is not a host name ({exc})") from None


class SchemeRule:
    def __init__(self, allowed: Sequence[str]) -> None:
        self.allowed = frozenset(s.lower() for s in allowed)

    def check(self, url: ParsedUrl) -> str | None:
        return None if url.scheme in self.allowed else "scheme"


class HostRule:
    def __init__(self, allow: HostPatterns, deny: HostPatterns) -> None:
        self.allow = allow
        self.deny = deny

    def check(self, url: ParsedUrl) -> str | None:
        if self.deny and self.deny.matches(url.host):
            return "host_denied"
        if self.allow and not self.allow.matches(url.host):
            return "host_not_allowed"
        return None


class PathPrefixRule:
    def __init__(self, deny_prefixes: Sequence[str]) -> None:
        self.deny_prefixes = tuple(deny_prefixes)

    def check(self, url: ParsedUrl) -> str | None:
        return "path_denied" if url.path.startswith(self.deny_prefixes) else None


class RegexRule:
    def __init__(self, allow: Sequence[str], deny: Sequence[str]) -> None:
        try:
            self.allow = [re.compile(r) for r in allow]
            self.deny = [re.compile(r) for r in deny]
        except re.error as exc:
            raise ConfigError(f"CRAWL_ALLOW/DENY_URL_REGEXES: bad regex: {exc}") from exc

    def check(self, url: ParsedUrl) -> str | None:
        if any(r.search(url.url) for r in self.deny):
            return "regex_denied"
        if self.allow and not any(r.search(url.url) for r in self.allow):
            return "regex_not_allowed"
        return None


class LimitsRule:
    def __init__(self, max_url_length: int, max_query_params: int) -> None:
        self.max_url_length = max_url_length
        self.max_query_params = max_query_params

    def check(self, url: ParsedUrl) -> str | None:
        if self.max_url_length and len(url.url) > self.max_url_length:
            return "url_too_long"
        # Count "&"-separated pairs without parsing: cheap, and exact enough.
        if self.max_query_params and url.query and url.query.count("&") >= self.max_query_params:
            return "too_many_params"
        return None


class ExtensionRule:
    def __init__(self, deny: Sequence[str]) -> None:
        self.deny = frozenset(e.lower().lstrip(".") for e in deny)

    def check(self, url: ParsedUrl) -> str | None:
        ext = url.extension
        if not ext:
            return None
        if ext in self.deny:
            return "extension"
        # Two-part extensions such as tar.gz.
        name = url.path.rsplit("/", 1)[-1].lower()
        if any(name.endswith("." + e) for e in self.deny if "." in e):
            return "extension"
        return None


class UrlRules:
    """The chain of rules; the first refusal wins."""

    def __init__(self, rules: Sequence[UrlRule]) -> None:
        self.rules = list(rules)

    def check(self, canonical_url: str) -> str | None:
        parsed = ParsedUrl.parse(canonical_url)
        for rule in self.rules:
            reason = rule.check(parsed)
            if reason is not None:
                return reason
        return None

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> UrlRules:
        deny_hosts = list(crawl_setting(settings, "CRAWL_DENY_HOSTS"))
        blocklist = crawl_setting(settings, "CRAWL_DENY_HOSTS_FILE")
        if blocklist:
            try:
                deny_hosts += Path(blocklist).read_text(encoding="utf-8").splitlines()
            except OSError as exc:
                raise ConfigError(f"CRAWL_DENY_HOSTS_FILE {blocklist!r}: {exc}") from exc
        max_length = crawl_setting(settings, "CRAWL_MAX_URL_LENGTH")
        max_params = crawl_setting(settings, "CRAWL_MAX_QUERY_PARAMS")
        max_repeats = crawl_setting(settings, "CRAWL_MAX_PATH_REPEATS")
        if max_length < 0 or max_params < 0 or max_repeats < 0:
            raise ConfigError(
                "CRAWL_MAX_URL_LENGTH, CRAWL_MAX_QUERY_PARAMS and CRAWL_MAX_PATH_REPEATS"
                " must be >= 0"
            )
        rules: list[UrlRule] = [
            SchemeRule(crawl_setting(settings, "CRAWL_ALLOWED_SCHEMES")),
            LimitsRule(max_length, max_params),
            HostRule(
                HostPatterns(
                    crawl_setting(settings, "CRAWL_ALLOW_HOSTS"),
                    crawl_setting(settings, "CRAWL_ALLOW_DOMAINS"),
                    setting="CRAWL_ALLOW_HOSTS",
                ),
                HostPatterns(deny_hosts, setting="CRAWL_DENY_HOSTS(_FILE)"),
            ),
            PathPrefixRule(crawl_setting(settings, "CRAWL_DENY_PATH_PREFIXES")),
            ExtensionRule(crawl_setting(settings, "CRAWL_DENY_EXTENSIONS")),
            *([PathRepeatsRule(max_repeats)] if max_repeats else []),
            RegexRule(
                crawl_setting(settings, "CRAWL_ALLOW_URL_REGEXES"),
                crawl_setting(settings, "CRAWL_DENY_URL_REGEXES"),
            ),
        ]
        for path in crawl_setting(settings, "CRAWL_URL_RULES"):
            rule_cls = load_object(path)
            factory = getattr(rule_cls, "from_settings", None)
            if factory is None:
                raise ConfigError(f"CRAWL_URL_RULES: {path} has no from_settings(settings)")
            rule = factory(settings)
            if not isinstance(rule, UrlRule):
                raise ConfigError(f"CRAWL_URL_RULES: {path} has no check(url) method")
            rules.append(rule)
        return cls(rules)
