"""How much of a near copy's text its own host has not shown before.

A near copy by SimHash is a page whose text is mostly another page's. On the
open web that is a trap's shape (an endless calendar whose months differ by
their title) but also a listing's: page 7 of a listing under a site-wide
template many times longer than its ten entries is within a few bits of page 6,
and it carries entries, and a "next" link, that no other page has. The SimHash
cannot tell them apart; the text can: a calendar's month shows almost nothing
its host has not shown on another page, a listing's page shows its entries.

``HostText`` keeps, per host, a small Bloom filter of the word 4-grams (a
fixed one-in-``SAMPLE`` sample of them, so that the same text samples the
same 4-grams on any page) of the pages judged since the host's first near copy
of its own pages; ``new_shingles`` estimates how many of a page's 4-grams that
filter never held. A listing's ten entries are a hundred or more, however long
its template; a calendar's new month, a session id, a page's own path in its
text, a few. A count, not a share: the share of a listing's entries in its
text is as small as its template is long.

A host is watched from its first near copy on, so hosts without one cost
nothing; a worker keeps ``HOSTS`` hosts (least recently used out) of
``FILTER_CELLS`` bytes each, and a filter is emptied when full (the page after
that counts as new text once). Per worker, not fleet-wide: a worker that
fetched none of the host's earlier pages sees more text as new, which errs
towards following links, never towards losing them.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final

import numpy as np
import numpy.typing as npt

from crawlproject.dedupe.fingerprint import BMP_WORD

WORDS: Final = 4  # words per shingle
SAMPLE: Final = 4  # one shingle in SAMPLE is looked at (by its hash: the same text, the same ones)
# Per host: 65,536 one-byte cells (a bool array: set and tested in one numpy
# step each, where packed bits took a slow unbuffered bitwise_or.at), two per shingle.
FILTER_CELLS: Final = 1 << 16
HOSTS: Final = 128  # hosts a worker watches at once: 8 MiB of filters at most
_FULL: Final = FILTER_CELLS // 8  # shingles held before it is emptied (~5 % false "seen")
# New 4-grams (estimated) that make a near copy new text: about 40 words of
# text no page of its host showed (a title, a date, an id are a few).
NEW_TEXT_SHINGLES: Final = 40

_MUL: Final = tuple(
    np.uint64(k)
    for k in (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93)
)
_MIX1: Final = np.uint64(0xBF58476D1CE4E5B9)
_MIX2: Final = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
_LOW16: Final = np.uint64(FILTER_CELLS - 1)
_S16, _S40 = np.uint64(16), np.uint64(40)
_SAMPLE_MASK: Final = np.uint64(SAMPLE - 1)


def _mix(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """splitmix64's finaliser, in place: every input bit reaches every output bit."""
    x ^= x >> _S30
    x *= _MIX1
    x ^= x >> _S27
    x *= _MIX2
    x ^= x >> _S31
    return x


def _word_hashes(text: str) -> npt.NDArray[np.uint64]:
    """One 64-bit hash per word (a run of word characters, as fingerprint.py's
    regex has them), in order: numpy over the code points, no Python loop."""
    cps = np.frombuffer(text.lower().encode("utf-32-le", "surrogatepass"), dtype="<u4")
    at = np.flatnonzero(BMP_WORD[np.minimum(cps, 0xFFFF)])  # astral: not word characters
    if at.size == 0:
        return np.empty(0, dtype=np.uint64)
    starts = np.flatnonzero(np.diff(at, prepend=-2) != 1)  # a word's first character in `at`
    offset = np.arange(at.size) - np.repeat(starts, np.diff(starts, append=at.size))
    chars = _mix(cps[at].astype(np.uint64) + offset.astype(np.uint64) * _MUL[1])
    return _mix(np.add.reduceat(chars, starts))


def sampled_shingles(text: str) -> npt.NDArray[np.uint64]:
    """The 64-bit hashes of the text's word 4-grams that the sample keeps."""
    words = _word_hashes(text)
    n = words.size - WORDS + 1
    if n <= 0:
        return np.empty(0, dtype=np.uint64)
    x = words[:n] * _MUL[0]
    for j in range(1, WORDS):
        x += words[j : j + n] * _MUL[j]
    _mix(x)
    return x[(x & _SAMPLE_MASK) == 0]


class HostText:
    """Per host, the sampled word 4-grams of the pages judged since its first
    near copy of its own pages (see the module docstring)."""

    def __init__(self, hosts: int = HOSTS) -> None:
        self._hosts = hosts
        self._filters: OrderedDict[str, tuple[npt.NDArray[np.bool_], list[int]]] = OrderedDict()

    def watching(self, host: str) -> bool:
        return host in self._filters

    def new_shingles(self, host: str, text: str, *, watch: bool) -> int | None:
        """How many of ``text``'s word 4-grams the host's filter never held
        (estimated from the sample), then adds them. A host not watched yet is
        watched from now when ``watch`` (all of its text is then new), else
        None is returned and nothing kept."""
        entry = self._filters.get(host)
        if entry is None:
            if not watch:
                return None
            entry = self._filters[host] = (np.zeros(FILTER_CELLS, dtype=np.bool_), [0])
            if len(self._filters) > self._hosts:
                self._filters.popitem(last=False)
        else:
            self._filters.move_to_end(host)
        cells, held = entry
        shingles = sampled_shingles(text)
        first = ((shingles >> _S16) & _LOW16).astype(np.intp)
        second = ((shingles >> _S40) & _LOW16).astype(np.intp)
        new = int(shingles.size - np.count_nonzero(cells[first] & cells[second]))
        if held[0] + new > _FULL:
            cells[:] = False
            held[0] = 0
        cells[first] = True
        cells[second] = True
        held[0] += new
        return new * SAMPLE
