"""Which addresses a crawler may connect to: a guard against SSRF.

A page can link (or redirect) to ``http://169.254.169.254/latest/meta-data/``
(a cloud's instance metadata, with credentials), ``http://127.0.0.1:6379/``
(the fleet's own Redis) or a name that resolves to such an address. A whole-web
crawler running inside a private network must not fetch them. With
``CRAWL_GUARD_ENABLED`` (the default) a request is refused when the address it
would connect to is not a public one:

* unspecified (``0.0.0.0``, ``::``) and "this network" (``0.0.0.0/8``);
* loopback (``127.0.0.0/8``, ``::1``);
* private (``10/8``, ``172.16/12``, ``192.168/16``, ``fc00::/7`` and the other
  special-purpose blocks Python's :mod:`ipaddress` calls private, such as
  ``192.0.0.0/24``, ``198.18.0.0/15`` and the documentation blocks);
* shared address space (``100.64.0.0/10``, carrier-grade NAT);
* link-local (``169.254.0.0/16``, ``fe80::/10``): metadata services live here;
* multicast (``224.0.0.0/4``, ``ff00::/8``) and reserved (``240.0.0.0/4``,
  broadcast, ``::/8`` ...);
* anything else :attr:`ipaddress.IPv4Address.is_global` says is not global;
* an IPv6 address embedding an IPv4 one (IPv4-mapped ``::ffff:a.b.c.d``,
  NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``) is judged by that IPv4 address.

``CRAWL_GUARD_ALLOW`` lists what may be fetched anyway: networks in CIDR form
(``10.1.0.0/16``, ``127.0.0.1`` for one address, ``fd00::/8``) and host names,
exact (``intranet.example``) or every name under a suffix (``*.corp.example``:
``a.corp.example``, not ``corp.example`` itself). A name allowed by name is
not checked at all, whatever it resolves to. An entry that is neither a valid
network nor a valid host name is a :class:`ConfigError` when the worker starts.

The checks happen where the address is known (see ``middlewares/guard.py`` and
``crawlproject/dns/resolver.py``): an IP literal in a URL is checked before the
request is downloaded; a host name is checked on the address the resolver
returned, which is the address the connection then uses (no second lookup: a
name cannot resolve to a public address for the check and a private one for
the fetch).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from crawlproject.setting_values import ConfigError, Setting, crawl_setting, read_config

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

SHARED = ipaddress.IPv4Network("100.64.0.0/10")
THIS_NETWORK = ipaddress.IPv4Network("0.0.0.0/8")
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")

_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_HOSTNAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
# Looks like an address or a network: then it must parse as one.
_ADDRESS_LIKE = re.compile(r"[0-9.]+(?:/\d+)?|.*[:/].*")


def is_blocked(ip: IPAddress) -> str | None:
    """Why a crawler must not connect to ``ip`` (e.g. ``"loopback"``); None
    if it is a public address."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            reason = is_blocked(embedded)
            return None if reason is None else f"{reason} (IPv4 {embedded} in IPv6)"
    if ip.is_unspecified or (isinstance(ip, ipaddress.IPv4Address) and ip in THIS_NETWORK):
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if isinstance(ip, ipaddress.IPv4Address) and ip in SHARED:
        return "shared"
    if ip.is_private:
        return "private"
    if ip.is_reserved:
        return "reserved"
    if not ip.is_global:
        return "not global"
    return None


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip.sixtofour


def parse_address(text: str) -> IPAddress | None:
    """``text`` as an IP address (an URL's host: IPv6 with or without
    brackets); None if it is not one (a host name)."""
    try:
        return ipaddress.ip_address(text.removeprefix("[").removesuffix("]"))
    except ValueError:
        return None


def parse_allow(
    allow: list[str] | tuple[str, ...],
) -> tuple[tuple[IPNetwork, ...], frozenset[str], frozenset[str]]:
    """``CRAWL_GUARD_ALLOW`` as (networks, exact names, name suffixes); an
    entry that is none of them is a ConfigError (one line)."""
    networks: list[IPNetwork] = []
    names: set[str] = set()
    suffixes: set[str] = set()
    for raw in allow:
        entry = str(raw).strip().lower()
        if not entry:
            continue
        if entry.startswith("*."):
            suffix = entry[2:].rstrip(".")
            if not _HOSTNAME.fullmatch(suffix):
                raise ConfigError(f"CRAWL_GUARD_ALLOW: {raw!r} is not *.<host name>")
            suffixes.add(suffix)
        elif _ADDRESS_LIKE.fullmatch(entry):
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]")))
            except ValueError as exc:
                raise ConfigError(
                    f"CRAWL_GUARD_ALLOW: {raw!r} is not a network in CIDR form ({exc})"
                ) from None
        elif _HOSTNAME.fullmatch(entry.rstrip(".")):
            names.add(entry.rstrip("."))
        else:
            raise ConfigError(
                f"CRAWL_GUARD_ALLOW: {raw!r} is neither a network (CIDR) nor a host name"
            )
    return tuple(networks), frozenset(names), frozenset(suffixes)


@dataclass(frozen=True)
class GuardPolicy:
    """``CRAWL_GUARD_*``: whether the guard is on and what it lets through."""

    enabled: Annotated[bool, Setting("CRAWL_GUARD_ENABLED")] = True
    # CRAWL_GUARD_ALLOW, parsed by parse_allow:
    networks: tuple[IPNetwork, ...] = ()
    names: frozenset[str] = frozenset()
    suffixes: frozenset[str] = frozenset()  # "corp.example" for "*.corp.example"

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> GuardPolicy:
        networks, names, suffixes = parse_allow(crawl_setting(settings, "CRAWL_GUARD_ALLOW"))
        return read_config(cls, settings, networks=networks, names=names, suffixes=suffixes)

    @classmethod
    def from_values(cls, enabled: bool, allow: list[str] | tuple[str, ...]) -> GuardPolicy:
        """The policy of these setting values (as from_settings reads them)."""
        return cls(bool(enabled), *parse_allow(allow))

    @property
    def allows_anything(self) -> bool:
        return bool(self.networks or self.names or self.suffixes)

    def describe_allow(self) -> str:
        entries = [str(n) for n in self.networks] + sorted(self.names)
        entries += sorted(f"*.{s}" for s in self.suffixes)
        return ", ".join(entries) or "nothing"

    def allows_name(self, name: str) -> bool:
        """Whether host name ``name`` is allowlisted (exactly or by suffix)."""
        key = name.lower().rstrip(".")
        if key in self.names:
            return True
        if self.suffixes:
            parts = key.split(".")
            return any(".".join(parts[i:]) in self.suffixes for i in range(1, len(parts)))
        return False

    def allows_address(self, ip: IPAddress) -> bool:
        if not self.networks:
            return False
        mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
        return any(ip in net or (mapped is not None and mapped in net) for net in self.networks)

    def refuses(self, host: str, address: str | IPAddress) -> str | None:
        """Why connecting to ``address`` for host ``host`` (a name, or the same
        IP literal) is refused; None if it is allowed (or the guard is off)."""
        if not self.enabled:
            return None
        ip = address if not isinstance(address, str) else parse_address(address)
        if ip is None:  # not an address: nothing to judge
            return None
        if host and parse_address(host) is None and self.allows_name(host):
            return None
        if self.allows_address(ip):
            return None
        return is_blocked(ip)

    def refuses_literal(self, host: str) -> str | None:
        """For an URL's host: why it is refused if it is an IP literal; None
        for an allowed literal or a host name (judged once resolved)."""
        if not self.enabled:
            return None
        ip = parse_address(host)
        return None if ip is None else self.refuses(host, ip)
