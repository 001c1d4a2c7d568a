"""64-bit SimHash fingerprints of pages' own text, vectorised with numpy.

Pipeline (``page_fingerprint``)::

    html --visible_text--> text --normalise--> normalised --simhash64--> int in [0, 2**64)

Features, version 2 (``FEATURES_VERSION``)
------------------------------------------
Character 4-grams weighted by count (below) of the page's visible text *without
its boilerplate*: ``visible_text`` leaves out navigation (``<nav>``, ``<menu>``,
ARIA roles navigation/banner/contentinfo/complementary/menu/menubar/search, and
elements whose id or class names a nav, navbar, navigation, menu, header,
footer, sidebar, breadcrumb(s) or masthead) and the site's ``<header>``,
``<footer>`` and ``<aside>`` (those not inside an ``<article>``); when nothing
of the body is left, it keeps them all (a page that is all template).

Why: every page of a site repeats its template, so with the template counted
two distinct pages of one site are as close as their template is large against
their own text, and a copy whose menu, date line or sidebar changed looks
edited. On 4,000 distinct short pages of one template and 300 common words
(bench/neardup_quality.py, BENCHMARKS.md), version 1: mean distance 19.6, 144
pairs within 5 bits, 7 within 3; version 2: mean 27.2, none within 5 (min 9),
and a shuffled navigation bar or a new date in the footer moves no bit.
Word 1-, 2- and 3-shingles, set or sqrt-capped weights and character 5- and
6-grams were measured too: those that keep distinct pages as far apart lose
a fifth to a half of the copies with 1-2 % of their words changed (a 64-bit
SimHash at k = 3 tolerates only a few % of a page's feature weight changing,
so features that distinct pages do not share make every edit count more);
those that keep more copies (word unigrams, alone or with 2-shingles) bring
distinct pages of one vocabulary within 4-5 bits. Version 1 was the same
4-grams of all the visible text. The version is recorded in the crawl's
dedupe index (``cfg``), which refuses a worker of another version.

Why not the ``simhash`` package (1e0ng, 2.1.2) itself
-----------------------------------------------------
* Speed: it hashes every distinct feature with md5 in Python and sums bit
  arrays in batches: ~155 fingerprints/s per core on 10 KB pages (measured,
  /work/shared/notes/packages-measured.md; ~100/s on bench/simhash_rate.py's
  synthetic pages, which have more distinct 4-grams), far too slow for a
  per-page cost. This module: ~6,700/s on those same texts (~70x).
* It crashes under numpy 2: a feature whose weight is > 255 overflows
  (``OverflowError``, upstream issue #74; 2 of 234 real pages hit it). Here the
  votes are counted in int64 and no weight is ever packed into a byte.

What is kept of its conventions
-------------------------------
* Normalisation: lowercase, then keep only the matches of
  ``[\\w\\u4e00-\\u9fcc]+`` joined with "" (``normalise``; identical output).
* Features: overlapping character 4-grams of the normalised text
  (``text[i:i+4]`` for i in range(max(len - 3, 1))), so a text of 1-3
  characters is one feature, the whole text. Weights: the feature's count.
* Bit rule: v[i] = sum over features of +weight if bit i of its hash is set
  else -weight; fingerprint bit i = v[i] > 0 (the package's
  ``sums > count / 2``). Since a feature's weight is its number of
  occurrences, this equals one +-1 vote per 4-gram *occurrence*, which is how
  it is computed here (no sort, no ``np.unique`` (measured ~30x slower than
  the whole vote), no Python-level loop over features).

What differs
------------
* The feature hash: instead of the last 8 bytes of md5 of the UTF-8 feature,
  the 4-gram's code points c0..c3 (each < 2**21) are packed into one uint64
  with a multiply-add by distinct odd 64-bit constants, then mixed with
  splitmix64 (wrapping uint64 arithmetic in numpy; the packing is not
  injective in theory, but two distinct 4-grams collide with probability
  ~2**-64). Fingerprints are therefore
  NOT bit-identical to the package's, but both are SimHashes of the same
  weighted feature set with a well-mixed 64-bit hash, so Hamming distances
  behave alike (near-duplicates close, distinct pages far; see
  tests/test_fingerprint.py).
* The empty text fingerprints to 0 (the package hashes the empty feature "").

All functions are pure; the module holds only read-only constants.
"""

from __future__ import annotations

import re
from typing import Final

import lxml.html
import numpy as np
import numpy.typing as npt
from lxml import etree

from crawlproject.hamming import hamming

__all__ = [
    "BMP_WORD",
    "FEATURES_VERSION",
    "FINGERPRINT_BITS",
    "NGRAM_CHARS",
    "hamming",
    "normalise",
    "page_fingerprint",
    "simhash64",
    "visible_text",
    "visible_text_of_tree",
]

# What a fingerprint is made of (see the module docstring): two fingerprints of
# different versions are not comparable. Bump it with any change to the text,
# the normalisation, the features, their weights or the hash.
FEATURES_VERSION: Final = 2
FINGERPRINT_BITS: Final = 64
NGRAM_CHARS: Final = 4

U64Array = npt.NDArray[np.uint64]

# --- visible text -------------------------------------------------------------

# Comments and processing instructions are dropped by the parser itself. The
# input is always handed over as UTF-8 bytes with the encoding forced, so a
# page's <meta charset> or an XML declaration cannot make libxml2 re-decode
# text that is already decoded. huge_tree lifts libxml2's 10 MB text-node and
# 256-deep nesting limits (beyond which it silently drops the rest of the page);
# nesting deeper than ~2,000 still ends the text there.
_HTML_PARSER: Final = lxml.html.HTMLParser(
    encoding="utf-8",
    remove_comments=True,
    remove_pis=True,
    huge_tree=True,
    no_network=True,
)
_INVISIBLE_TAGS: Final = ("script", "style", "noscript", "template", "svg", "head")
_TITLE_TEXT: Final = etree.XPath("string(/html/head/title)", smart_strings=False)
_TEXT_NODES: Final = etree.XPath("//text()", smart_strings=False)  # 2x faster than itertext()


# Boilerplate (see the module docstring). Found in C (a tag iteration and one
# XPath with a substring pre-filter on id/class); the few candidates are then
# decided in Python. The spider's tree is never copied: each boilerplate element
# is swapped for an empty placeholder holding its tail text while the text is
# read, then put back.
_NAV_TAGS: Final = frozenset({"nav", "menu"})
_SITE_TAGS: Final = frozenset({"header", "footer", "aside"})  # unless inside an <article>
_BOILERPLATE_TAGS: Final = tuple(sorted(_NAV_TAGS | _SITE_TAGS))
_CONTENT_TAGS: Final = frozenset({"main", "article", "body", "html"})  # never by attribute
_BOILERPLATE_ROLES: Final = frozenset(
    {"navigation", "banner", "contentinfo", "complementary", "menu", "menubar", "search"}
)
_BOILERPLATE_NAME: Final = re.compile(
    r"(?:^|[\s_-])(?:nav|navbar|navigation|menu|header|footer|sidebar|breadcrumbs?|masthead)"
    r"(?:$|[\s_-])",
    re.IGNORECASE,
)
_NAME_HINTS: Final = ("nav", "menu", "head", "foot", "sidebar", "breadcrumb")
# The id, class and role attributes worth a look (a substring pre-filter in C,
# over attribute nodes: 2.5x faster than testing every element's).
_ATTRIBUTE_CANDIDATES: Final = etree.XPath(
    "//@*[(name() = 'id' or name() = 'class') and ("
    + " or ".join(f"contains(., '{h}')" for h in _NAME_HINTS)
    + ")] | //@role"
)
_PLACEHOLDER: Final = "cp-boilerplate"


def _is_boilerplate(el: etree._Element) -> bool:
    tag = el.tag if isinstance(el.tag, str) else ""
    if tag in _NAV_TAGS:
        return True
    if tag in _SITE_TAGS:
        return next(el.iterancestors("article"), None) is None
    if tag in _CONTENT_TAGS:
        return False
    if (el.get("role") or "").strip().lower() in _BOILERPLATE_ROLES:
        return True
    return bool(_BOILERPLATE_NAME.search(f"{el.get('id') or ''} {el.get('class') or ''}"))


def _boilerplate(root: etree._Element) -> list[etree._Element]:
    """The page's boilerplate elements (nested ones included)."""
    found = [el for el in root.iter(*_BOILERPLATE_TAGS) if _is_boilerplate(el)]
    seen: set[etree._Element] = set()
    for attribute in _ATTRIBUTE_CANDIDATES(root):  # type: ignore[union-attr]
        el = attribute.getparent()
        if el in seen or el.tag in _BOILERPLATE_TAGS:
            continue
        seen.add(el)
        if _is_boilerplate(el):
            found.append(el)
    return found


Swapped = list[tuple[etree._Element, etree._Element, etree._Element]]


def _swap_out(elements: list[etree._Element]) -> Swapped:
    """Replaces each element by an empty placeholder that keeps its tail text
    (nested ones too: put back in reverse order, the tree is exactly as it was)."""
    swapped = []
    for el in elements:
        parent = el.getparent()
        if parent is None:
            continue
        hole = etree.Element(_PLACEHOLDER)
        hole.tail = el.tail
        parent.replace(el, hole)
        swapped.append((parent, hole, el))
    return swapped


def _swap_back(swapped: Swapped) -> None:
    for parent, hole, el in reversed(swapped):
        parent.replace(hole, el)


def _text_without(root: etree._Element, elements: list[etree._Element]) -> str:
    """The tree's text nodes, one space apart, but those within ``elements``;
    the tree is left as it was."""
    swapped = _swap_out(elements)
    try:
        return " ".join(_TEXT_NODES(root))  # type: ignore[arg-type]
    finally:
        _swap_back(swapped)


def _body_text(root: etree._Element, keep_boilerplate: bool) -> str:
    """The tree's visible text (title excluded), boilerplate left out unless
    ``keep_boilerplate`` or unless nothing else is left, whitespace as found.
    Invisible elements are swapped out rather than tested per text node (an
    ``ancestor::`` XPath costs 2-3x more); the tree is left as it was."""
    invisible = list(root.iter(*_INVISIBLE_TAGS))
    if keep_boilerplate:
        return _text_without(root, invisible)
    body = _text_without(root, [*invisible, *_boilerplate(root)])
    if not body or body.isspace():  # all template (or no text): keep it
        return _text_without(root, invisible)
    return body


def _raw_visible_text(html: str, keep_boilerplate: bool) -> str:
    """``visible_text`` with whitespace as found: what the fingerprint reads (its
    normalisation drops whitespace; collapsing it costs ~20 % of a fingerprint)."""
    if not html or html.isspace():
        return ""
    try:
        root = etree.fromstring(html.encode("utf-8", "replace"), _HTML_PARSER)
        if root is None:
            return ""
        return f"{_TITLE_TEXT(root)} {_body_text(root, keep_boilerplate)}"
    except (etree.LxmlError, ValueError):
        return ""


def visible_text(html: str, *, keep_boilerplate: bool = False) -> str:
    """The page's visible text: the <title> text, then the text of everything
    but script/style/noscript/template/svg/head and, unless ``keep_boilerplate``,
    but the site's navigation, header, footer and sidebars (see the module
    docstring; all of it when nothing else is left), whitespace-collapsed, one
    space between text nodes. Never raises; "" when there is no text."""
    return " ".join(_raw_visible_text(html, keep_boilerplate).split())


def visible_text_of_tree(
    root: etree._Element, *, keep_boilerplate: bool = False, collapse: bool = True
) -> str:
    """``visible_text`` of an already parsed HTML tree (e.g. parsel's
    ``response.selector.root``), which is left as it was (``_swap_out``):
    spares a second parse. ``collapse=False`` keeps whitespace as found: what
    the fingerprint reads (``normalise`` drops whitespace; collapsing costs
    ~10 us a page)."""
    try:
        text = f"{_TITLE_TEXT(root)} {_body_text(root, keep_boilerplate)}"
    except (etree.LxmlError, ValueError, TypeError):
        return ""
    return " ".join(text.split()) if collapse else text


# --- normalisation --------------------------------------------------------------

_WORD_RE: Final = re.compile(r"[\w\u4e00-\u9fcc]+")  # the simhash package's default `reg`
_ASCII_NON_WORD: Final = bytes(b for b in range(128) if not _WORD_RE.fullmatch(chr(b)))


def _bmp_word_table() -> npt.NDArray[np.bool_]:
    """table[cp]: whether chr(cp) matches the word regex, for the whole BMP."""
    table = np.zeros(0x10000, dtype=np.bool_)
    for match in _WORD_RE.finditer("".join(map(chr, range(0x10000)))):
        table[match.start() : match.end()] = True
    table.flags.writeable = False
    return table


BMP_WORD: Final = _bmp_word_table()


def normalise(text: str) -> str:
    """The simhash package's normalisation: ``"".join(re.findall(r"[\\w\\u4e00-\\u9fcc]+",
    text.lower()))``, i.e. the lowercased text with every non-word character removed.

    The regex costs ~30 us/KB; this gives the same string with a byte-level
    delete for ASCII text and a code-point lookup table otherwise."""
    lowered = text.lower()
    if lowered.isascii():
        return lowered.encode("ascii").translate(None, _ASCII_NON_WORD).decode("ascii")
    cps = np.frombuffer(lowered.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    keep = BMP_WORD[np.minimum(cps, 0xFFFF)]  # U+FFFF is not a word character
    astral = cps > 0xFFFF
    if astral.any():  # rare: decide each distinct astral code point with the regex
        words = [cp for cp in np.unique(cps[astral]).tolist() if _WORD_RE.match(chr(cp))]
        if words:
            keep |= np.isin(cps, words)
    return cps[keep].tobytes().decode("utf-32-le", "surrogatepass")


# --- SimHash ------------------------------------------------------------------------

# Distinct odd multipliers packing a 4-gram's code points into one uint64.
_PACK: Final = tuple(
    np.uint64(k)
    for k in (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93)
)
# splitmix64 (Steele, Lea & Flood 2014; Vigna's constants).
_SM_GAMMA: Final = np.uint64(0x9E3779B97F4A7C15)
_SM_MUL1: Final = np.uint64(0xBF58476D1CE4E5B9)
_SM_MUL2: Final = np.uint64(0x94D049BB133111EB)
_SM_SHIFTS: Final = (np.uint64(30), np.uint64(27), np.uint64(31))

# Bit counting: one byte-lane counter per bit; 255 additions of 0/1 fit a byte.
_LANE_ROWS: Final = 255
_BYTE_LSBS: Final = np.uint64(0x0101010101010101)
_LANE_SHIFTS: Final = tuple(np.uint64(k) for k in range(8))


def _feature_hashes(cps: U64Array) -> U64Array:
    """splitmix64 of each packed 4-gram (cps holds >= 4 code points)."""
    n = cps.size - NGRAM_CHARS + 1
    x = cps[:n] * _PACK[0]
    tmp = np.empty_like(x)
    for j in range(1, NGRAM_CHARS):
        np.multiply(cps[j : j + n], _PACK[j], out=tmp)
        x += tmp
    x += _SM_GAMMA
    np.right_shift(x, _SM_SHIFTS[0], out=tmp)
    x ^= tmp
    x *= _SM_MUL1
    np.right_shift(x, _SM_SHIFTS[1], out=tmp)
    x ^= tmp
    x *= _SM_MUL2
    np.right_shift(x, _SM_SHIFTS[2], out=tmp)
    x ^= tmp
    return x


def _set_bit_counts(hashes: U64Array) -> npt.NDArray[np.int64]:
    """counts[i]: how many of the hashes have bit i set (SWAR: for each k < 8,
    (h >> k) & 0x0101..01 puts bit 8j+k in byte j; 255 rows sum without carry)."""
    n = hashes.size
    blocks = -(-n // _LANE_ROWS)
    padded = np.zeros(blocks * _LANE_ROWS, dtype="<u8")  # zero padding sets no bits
    padded[:n] = hashes
    grid = padded.reshape(blocks, _LANE_ROWS)
    tmp = np.empty_like(grid)
    lanes = np.empty((8, blocks), dtype="<u8")
    for k in range(8):
        np.right_shift(grid, _LANE_SHIFTS[k], out=tmp)
        tmp &= _BYTE_LSBS
        np.add.reduce(tmp, axis=1, out=lanes[k])
    per_kj = lanes.view(np.uint8).reshape(8, blocks, 8).sum(axis=1, dtype=np.int64)
    return per_kj.T.reshape(FINGERPRINT_BITS)  # index 8j + k


def simhash64(normalised: str) -> int:
    """Unsigned 64-bit SimHash of the text's character 4-grams weighted by count
    (see the module docstring); 0 for the empty text."""
    if not normalised:
        return 0
    cps = np.frombuffer(normalised.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    cps64 = cps.astype(np.uint64)
    if cps64.size < NGRAM_CHARS:  # one feature, the whole text (0 never occurs in text)
        cps64 = np.concatenate([cps64, np.zeros(NGRAM_CHARS - cps64.size, dtype=np.uint64)])
    hashes = _feature_hashes(cps64)
    # v[i] = set[i] - (n - set[i]) > 0: one +-1 vote per 4-gram occurrence (= weight)
    bits = _set_bit_counts(hashes) * 2 > hashes.size
    return int.from_bytes(np.packbits(bits, bitorder="little").tobytes(), "little")


def page_fingerprint(html: str) -> tuple[int, int]:
    """(simhash64 of the page's normalised visible text without boilerplate, that
    text's length): features version ``FEATURES_VERSION``."""
    return text_fingerprint(_raw_visible_text(html, keep_boilerplate=False))


def text_fingerprint(text: str) -> tuple[int, int]:
    """(simhash64 of the normalised text, its length)."""
    normalised = normalise(text)
    return simhash64(normalised), len(normalised)
