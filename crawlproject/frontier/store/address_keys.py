"""The key names of politeness per server: an IP address's keys, in its home
shard (``al:``, ``aq:``, ``ar:``, ``a:``, ``afull``, ``aqd`` in keys.py's
table, which documents them). A base of :class:`CrawlKeys`, apart so that
keys.py stays one screenful of names."""

from __future__ import annotations

import zlib


class AddressKeys:
    """An address's keys, in the shard prefixes of :class:`CrawlKeys`."""

    shards: int
    shard_prefixes: list[str]

    def address_shard(self, address: str) -> int:
        """The home shard of an IP address's places (its canonical text)."""
        return zlib.crc32(address.encode("ascii")) % self.shards

    def address_places(self, shard: int, address: str) -> str:
        return self.shard_prefixes[shard] + "al:" + address

    def address_waiting(self, shard: int, address: str) -> str:
        return self.shard_prefixes[shard] + "aq:" + address

    def address_state(self, shard: int, address: str) -> str:
        return self.shard_prefixes[shard] + "a:" + address

    def addresses_full(self, shard: int) -> str:
        return self.shard_prefixes[shard] + "afull"

    def addresses_waited_on(self, shard: int) -> str:
        return self.shard_prefixes[shard] + "aqd"
