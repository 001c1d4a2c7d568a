"""Politeness per server: the address settings, read once, and the caps they give.

Every name of one machine counts against it (docs/frontier.md, "Politeness per
server"). A claimed URL needs its host slot *and* a place at the IP address its
host resolves to: ``CRAWL_ADDRESS_CONCURRENCY`` places per address, fleet-wide
(0: no address cap), or, with ``CRAWL_POLITENESS_KEY = "address"``, the
politeness slot itself kept per address (``CRAWL_HOST_CONCURRENCY`` places,
``CRAWL_HOST_DELAY`` between requests, the adaptive delay and the 429/503
back-off; ``CRAWL_ADDRESS_CONCURRENCY`` is then not used, and refused if
set). ``CRAWL_ADDRESS_OVERRIDES`` gives networks (CIDR) their own cap, or
none: a CDN or a large hoster answers for much of the web from a few
addresses, and one cap for all of it would crawl the web through four
sockets.

This module is pure (no Redis, no DNS): the settings and :meth:`AddressConfig.cap_of`.
The scripts are ``lua/address_*.lua`` (crawlproject/frontier/claims/address_scripts.py
runs them); the worker's side is crawlproject/frontier/claims/address_gate.py.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from crawlproject.given import is_given
from crawlproject.setting_values import ConfigError, Setting, crawl_setting, read_config

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
NO_CAP_WORDS = frozenset({"none", "no cap", "off"})
POLITENESS_KEYS = ("host", "domain", "address")


def normal_address(text: str) -> str | None:
    """The canonical text of an IP address (IPv4 inside IPv6 as IPv4); None
    if ``text`` is not one."""
    try:
        ip = ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def read_address_overrides(raw: Mapping[str, Any]) -> tuple[tuple[IPNetwork, int | None], ...]:
    """``CRAWL_ADDRESS_OVERRIDES`` as (network, places or None for no cap),
    most specific network first; ConfigError (one line) for a bad entry."""
    out: list[tuple[IPNetwork, int | None]] = []
    for key, value in raw.items():
        try:
            network = ipaddress.ip_network(str(key).strip(), strict=True)
        except ValueError as exc:
            raise ConfigError(
                f"CRAWL_ADDRESS_OVERRIDES: {key!r} is not a network in CIDR form "
                f"(e.g. '104.16.0.0/13', '2606:4700::/32', '192.0.2.7'): {exc}"
            ) from None
        out.append((network, _places(key, value)))
    # Longest prefix first, so the most specific network decides.
    out.sort(key=lambda entry: -entry[0].prefixlen)
    return tuple(out)


def _places(key: object, value: object) -> int | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in NO_CAP_WORDS):
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigError(
            f"CRAWL_ADDRESS_OVERRIDES[{key!r}] must be a number of places or 'none' "
            f"(no cap), got {value!r}"
        )
    try:
        places = int(value)
    except ValueError:
        raise ConfigError(
            f"CRAWL_ADDRESS_OVERRIDES[{key!r}] must be a number of places or 'none' "
            f"(no cap), got {value!r}"
        ) from None
    if places < 0:
        raise ConfigError(f"CRAWL_ADDRESS_OVERRIDES[{key!r}] must be >= 0 (0 or 'none': no cap)")
    return places or None


@dataclass(frozen=True)
class AddressConfig:
    """The address settings, checked together (ConfigError: one line)."""

    # Places per address, 0 = no cap.
    concurrency: Annotated[int, Setting("CRAWL_ADDRESS_CONCURRENCY")]
    # The slot's places in address mode.
    slot_places: Annotated[int, Setting("CRAWL_HOST_CONCURRENCY")]
    by_address: bool  # CRAWL_POLITENESS_KEY == "address": the slot itself per address
    overrides: tuple[tuple[IPNetwork, int | None], ...]  # CRAWL_ADDRESS_OVERRIDES

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> AddressConfig:
        politeness = crawl_setting(settings, "CRAWL_POLITENESS_KEY")
        if politeness not in POLITENESS_KEYS:
            raise ConfigError("CRAWL_POLITENESS_KEY must be 'host', 'domain' or 'address'")
        if politeness == "address" and is_given(settings, "CRAWL_ADDRESS_CONCURRENCY"):
            raise ConfigError(
                "CRAWL_POLITENESS_KEY='address' makes each address one politeness slot of "
                "CRAWL_HOST_CONCURRENCY places: CRAWL_ADDRESS_CONCURRENCY would not be used, "
                "leave it unset"
            )
        return read_config(
            cls,
            settings,
            by_address=politeness == "address",
            overrides=read_address_overrides(settings.getdict("CRAWL_ADDRESS_OVERRIDES") or {}),
        )

    def validate(self) -> None:
        if self.concurrency < 0:
            raise ConfigError("CRAWL_ADDRESS_CONCURRENCY must be >= 0 (0: no address cap)")
        if not self.by_address and 0 < self.concurrency < self.slot_places:
            raise ConfigError(
                f"CRAWL_ADDRESS_CONCURRENCY ({self.concurrency}) is below "
                f"CRAWL_HOST_CONCURRENCY ({self.slot_places}): a host alone could never "
                "use its slots"
            )

    @property
    def enabled(self) -> bool:
        """Whether any address is capped (else claims skip the address step)."""
        return self.base_cap is not None or any(p is not None for _, p in self.overrides)

    @property
    def base_cap(self) -> int | None:
        """Places of an address no override names (None: no cap)."""
        if self.by_address:
            return self.slot_places
        return self.concurrency or None

    def cap_of(self, address: str) -> int | None:
        """Places at ``address`` (canonical text, see normal_address); None: no cap."""
        if self.overrides:
            ip = ipaddress.ip_address(address)
            for network, places in self.overrides:
                if ip.version == network.version and ip in network:
                    return places
        return self.base_cap
