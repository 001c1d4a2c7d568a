"""Which hosts the operator put in the crawl's scope: crawled whole, with no
budget from reputation (add.lua; docs/traps.md).

* the crawl's scope roots (the ``scope`` key: the sites of its seeds, noted by
  every worker) under a spider's ``scope`` attribute, as the web spider's
  ``-a scope=``: ``hosts``, a root's host; ``domains``, every host under a
  root's registered domain; ``any`` (or no such attribute), none but the
  seeds' hosts, which the seed mark covers (h:<host> ``seed``);
* for any spider, the hosts of its ``allowed_domains`` (Scrapy's rule: the
  domain and its subdomains).

Hosts a crawl found by itself (scope ``any``, or outside these) keep their
budgets. The worker tells the frontier with the operator's scope vote
(link_votes.py ``SCOPE_VOTE``), once per host, on a URL it sends (outbox.py).
"""

from __future__ import annotations

from typing import Any

from crawlproject.frontier.basics.urls import SERVER_DEFAULT_PORTS, registered_domain

SCOPE_MODES = ("hosts", "domains")  # spider.scope values whose roots count
VERDICTS_CACHED = 65_536  # hosts whose verdict is remembered (cleared when full)


def _hostname(pkey: str) -> str:
    """The host of a politeness key ``host``, ``host:port`` or ``[v6]:port``."""
    if pkey.startswith("["):
        return pkey[1 : pkey.find("]")]
    return pkey.rsplit(":", 1)[0] if pkey.count(":") == 1 else pkey


def _server(root: str) -> str:
    """A host root as a politeness key writes it (no port 80 or 443)."""
    head, sep, port = root.rpartition(":")
    if sep and port.isdigit() and int(port) in SERVER_DEFAULT_PORTS and not head.endswith(":"):
        return head
    return root


class OperatorScope:
    def __init__(self) -> None:
        self.mode: str | None = None  # one of SCOPE_MODES, or None: seeds only
        self.allowed: tuple[str, ...] = ()
        self.roots: frozenset[str] = frozenset()
        self._seen_roots: set[str] = set()  # as given: the maintenance loop's every turn
        self._verdicts: dict[str, bool] = {}

    @property
    def active(self) -> bool:
        """Whether any host beyond the seeds' can be in scope."""
        return bool(self.allowed or (self.mode and self.roots))

    def watch(self, spider: Any) -> None:
        """Reads the spider's scope mode and ``allowed_domains``."""
        mode = getattr(spider, "scope", None)
        self.mode = mode if mode in SCOPE_MODES else None
        allowed = getattr(spider, "allowed_domains", None) or ()
        if isinstance(allowed, str):
            allowed = (allowed,)
        self.allowed = tuple(
            d.lower().strip(".") for d in allowed if isinstance(d, str) and d.strip(".")
        )
        self._verdicts.clear()

    def see(self, roots: set[str] | frozenset[str]) -> bool:
        """Takes the crawl's scope roots; True if there are new ones."""
        given = roots - self._seen_roots  # most turns: none (a set difference, no string work)
        if not given:
            return False
        self._seen_roots |= given
        new = {_server(r.lower()) for r in given} - self.roots
        if not new:
            return False
        self.roots = self.roots | new
        self._verdicts.clear()
        return True

    def covers(self, pkey: str) -> bool:
        """Whether the host of politeness key ``pkey`` is in the operator's scope."""
        verdict = self._verdicts.get(pkey)
        if verdict is None:
            verdict = self._judge(pkey)
            if len(self._verdicts) >= VERDICTS_CACHED:
                self._verdicts.clear()
            self._verdicts[pkey] = verdict
        return verdict

    def _judge(self, pkey: str) -> bool:
        host = _hostname(pkey)
        if any(host == d or host.endswith("." + d) for d in self.allowed):
            return True
        if self.mode == "hosts":
            return pkey in self.roots
        if self.mode == "domains":
            return registered_domain(host) in self.roots
        return False
