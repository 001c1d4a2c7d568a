"""The resolver's caches (crawlproject/dns/resolver.py): an LRU whose entries expire."""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

V = TypeVar("V")


class TtlLru(Generic[V]):
    """At most ``size`` entries, each valid for ``ttl_seconds`` after it was
    stored; when full, the least recently used goes first. Off if either is 0.

    Times are the caller's (monotonic) clock, so tests need no sleeping."""

    def __init__(self, size: int, ttl_seconds: float) -> None:
        self.size = size
        self.ttl_seconds = ttl_seconds
        self._entries: OrderedDict[str, tuple[float, V]] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.size > 0 and self.ttl_seconds > 0

    def get(self, key: str, now: float) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, value = entry
        if expires <= now:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    def put(self, key: str, value: V, now: float) -> None:
        if not self.enabled:
            return
        self._entries[key] = (now + self.ttl_seconds, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def discard(self, key: str) -> None:
        self._entries.pop(key, None)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries
