"""OncePerKey: "log this once per host", bounded (a bottom-layer utility used
by the frontier, the rules, the spider and the middlewares)."""

from __future__ import annotations

from collections import OrderedDict


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
