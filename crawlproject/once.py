"""Bounded memories of keys (bottom-layer utilities used by the frontier, the
rules, the spider and the middlewares): OncePerKey, "log this once per host",
an LRU; Generations, a set of hashable keys in two generations, cheaper per key
for the worker's large caches."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class OncePerKey:
    """``first(key)`` is True the first time a key is seen, then False.

    Bounded: it remembers the ``size`` most recently seen keys (LRU), so a key
    forgotten after ``size`` others can be "first" again; a whole-web crawl's
    memory stays bounded (about 100 bytes per key plus the key itself).
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("OncePerKey size must be >= 1")
        self.size = size
        self._seen: OrderedDict[str, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen)

    def first(self, key: str) -> bool:
        if key in self._seen:
            self._seen.move_to_end(key)
            return False
        self._seen[key] = None
        if len(self._seen) > self.size:
            self._seen.popitem(last=False)
        return True


class Generations(Generic[K]):
    """A bounded set in two generations of ``size`` keys each: when the young one
    is full it becomes the old one and the oldest generation is dropped, so it
    holds at most 2 x ``size`` keys (``size`` <= 0: it holds none). Cheaper per
    key than an LRU (no order kept). :meth:`first` moves a key it finds in the
    old generation to the young one, so keys in steady use are kept;
    ``in`` and :meth:`add` leave the old generation as it is."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._young: set[K] = set()
        self._old: set[K] = set()

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    def __contains__(self, key: K) -> bool:
        return key in self._young or key in self._old

    def add(self, key: K) -> None:
        if self.size <= 0:
            return
        if len(self._young) >= self.size:
            self._old, self._young = self._young, set()
        self._young.add(key)

    def first(self, key: K) -> bool:
        """True if ``key`` was not held (it is now); a key found in the old
        generation moves to the young one."""
        if key in self._young:
            return False
        if key in self._old:
            self._old.discard(key)
            self.add(key)
            return False
        self.add(key)
        return True
