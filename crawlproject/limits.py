"""Limits and hostile pages: what each outcome is called, decided without I/O.

Every limit a fetch can hit, and every kind of hostile body, ends in one stat
(``limits/...`` or ``content/...``) and one log line, never in a crash nor a
held lease. Scrapy enforces the download limits (DOWNLOAD_MAXSIZE,
DOWNLOAD_TIMEOUT, REDIRECT_MAX_TIMES); the failure it raises reaches the
spider's errback, where :func:`limit_of_failure` names it. The body checks run
in the spider's callback, before the content processor:

================================  ===============================================
stat                              outcome
================================  ===============================================
limits/body_too_large             larger than DOWNLOAD_MAXSIZE as sent (the
                                  download is cancelled; Scrapy also warns)
limits/decompressed_too_large     larger than DOWNLOAD_MAXSIZE once decompressed
                                  (a gzip bomb: decompression stops at the limit)
limits/timeout                    no answer in DOWNLOAD_TIMEOUT, retries included
                                  (Scrapy: ``retry/max_reached``)
limits/redirects_exhausted        more than REDIRECT_MAX_TIMES redirects
limits/redirect_loop              a redirect back to a URL of its own chain
limits/links_truncated            a page had more than CRAWL_MAX_LINKS_PER_PAGE
                                  links: the rest were not taken
content/empty_body                a 2xx answer with no body
content/binary_as_text            a binary body served as text (HTML, XML, ...)
content/bad_charset               a charset Python does not know, or a body that
                                  is not valid in the charset it was decoded with
content/no_charset                no charset in the header, BOM or ``<meta>``:
                                  Scrapy guessed it
================================  ===============================================

Counted by Scrapy and not repeated here: ``retry/max_reached`` (a 5xx storm or
a timeout that outlived its retries), ``downloader/response_status_count/5xx``,
``downloader/exception_type_count/...``, and ``rules/url_too_long`` (the
frontier's CRAWL_MAX_URL_LENGTH, for every URL it is given; Scrapy's
UrlLengthMiddleware is off: URLLENGTH_LIMIT = 0). Malformed HTML is the web's normal case: lxml
recovers and the page counts as ``content/processed/html``; a page it cannot
read at all counts as ``content/error/html``.
"""

from __future__ import annotations

import codecs
from urllib.parse import urljoin

from scrapy.exceptions import DownloadCancelledError, DownloadTimeoutError, IgnoreRequest

# Private, no public name: the gzip bomb's cause (checked: tests/test_scrapy_private_api.py)
from scrapy.utils._compression import _DecompressionMaxSizeExceeded
from twisted.internet.defer import CancelledError
from twisted.internet.error import TimeoutError as TwistedTimeoutError
from w3lib.encoding import html_body_declared_encoding, http_content_type_encoding, read_bom
from w3lib.url import canonicalize_url

BODY_TOO_LARGE = "limits/body_too_large"
DECOMPRESSED_TOO_LARGE = "limits/decompressed_too_large"
TIMEOUT = "limits/timeout"
REDIRECTS_EXHAUSTED = "limits/redirects_exhausted"
REDIRECT_LOOP = "limits/redirect_loop"
LINKS_TRUNCATED = "limits/links_truncated"
EMPTY_BODY = "content/empty_body"
BINARY_AS_TEXT = "content/binary_as_text"
BAD_CHARSET = "content/bad_charset"
NO_CHARSET = "content/no_charset"

# RedirectMiddleware's message when REDIRECT_MAX_TIMES is used up (a constant
# in Scrapy; tests/test_hostile_pages.py checks it against the real middleware).
MAX_REDIRECTS_MESSAGE = "max redirections reached"
# Bytes looked at to tell a binary body from text: enough for any file magic
# and a few lines of markup, and cheap on every page.
SNIFF_BYTES = 1024
# Leading bytes of binary formats that may carry no NUL byte early on (most
# other binary data has one in its first SNIFF_BYTES). Only unmistakable ones:
# a false match costs a page its links.
BINARY_MAGICS = (
    b"\x89PNG\r\n",
    b"GIF87a",
    b"GIF89a",
    b"\xff\xd8\xff",  # JPEG
    b"%PDF-",
    b"PK\x03\x04",  # ZIP (and docx, jar, ...)
    b"\x1f\x8b\x08",  # gzip
    b"\xfd7zXZ\x00",
    b"7z\xbc\xaf\x27\x1c",
    b"Rar!\x1a\x07",
    b"\x7fELF",
)
# Charsets whose text has NUL bytes (UTF-16/32 without a BOM).
WIDE_CHARSET_PREFIXES = ("utf-16", "utf16", "utf-32", "utf32", "ucs-2", "ucs2", "ucs-4")
# MIME types whose body must be text (anything else may be binary by nature).
TEXT_MIME_PREFIXES = ("text/",)
TEXT_MIME_SUFFIXES = ("+xml", "/xml", "/json", "+json", "/javascript", "/xhtml+xml")
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# Sitemap files' own size limit (sitemaps.org: 50 MB uncompressed), applied
# as DOWNLOAD_MAXSIZE to their requests when that is smaller.
SITEMAP_MAX_BYTES = 50 * 1024 * 1024
# Request meta key of a sitemap file's request (set by the spider and the robots
# middleware; middlewares/limits.py gives it SITEMAP_MAX_BYTES).
SITEMAP_META_KEY = "crawl_sitemap"


class RedirectLoop(IgnoreRequest):
    """A redirect points back to a URL its chain already passed through."""


def limit_of_failure(exc: BaseException | None) -> str | None:
    """The ``limits/...`` stat a download failure is, or None (another failure)."""
    if isinstance(exc, RedirectLoop):
        return REDIRECT_LOOP
    if isinstance(exc, IgnoreRequest):
        if isinstance(exc.__cause__, _DecompressionMaxSizeExceeded):
            return DECOMPRESSED_TOO_LARGE  # HttpCompressionMiddleware's, `from` its cause
        if str(exc) == MAX_REDIRECTS_MESSAGE:
            return REDIRECTS_EXHAUSTED
        return None
    if isinstance(exc, DownloadTimeoutError | TwistedTimeoutError):
        return TIMEOUT
    # Scrapy raises DownloadCancelledError when Content-Length is over the
    # limit and cancels the body's Deferred (CancelledError) when the bytes
    # received pass it; its timeout cancels too but turns that into a timeout.
    if isinstance(exc, DownloadCancelledError | CancelledError):
        return BODY_TOO_LARGE
    return None


def is_text_mime(mime: str) -> bool:
    return mime.startswith(TEXT_MIME_PREFIXES) or mime.endswith(TEXT_MIME_SUFFIXES)


def looks_binary(body: bytes) -> bool:
    """Whether a body served as text is really binary: a binary format's magic
    bytes, or a NUL byte near the start (text in UTF-16/32 starts with a BOM)."""
    head = body[:SNIFF_BYTES]
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return False  # UTF-16 and UTF-32 (whose BOMs begin like these) text
    return head.startswith(BINARY_MAGICS) or b"\x00" in head


def body_problem(body: bytes, mime: str, content_type: str = "") -> str | None:
    """EMPTY_BODY or BINARY_AS_TEXT for a body not worth processing, else None."""
    if not body:
        return EMPTY_BODY
    if not is_text_mime(mime):
        return None
    charset = (_header_charset(content_type) or "").lower()
    if charset.startswith(WIDE_CHARSET_PREFIXES):
        return None
    return BINARY_AS_TEXT if looks_binary(body) else None


def charset_problem(content_type: str, body: bytes, used_encoding: str | None) -> str | None:
    """BAD_CHARSET, NO_CHARSET or None for a text body.

    ``used_encoding`` is the one Scrapy decoded the body with (its
    ``TextResponse.encoding``: header, BOM, ``<meta>``, then a guess). Scrapy
    never fails on a wrong charset (it decodes with replacement characters),
    so this only names what happened.
    """
    declared = _header_charset(content_type)
    if declared is not None and not _known_codec(declared):
        return BAD_CHARSET
    if used_encoding and _known_codec(used_encoding):
        try:
            body.decode(used_encoding)
        except UnicodeDecodeError:
            return BAD_CHARSET
    if declared is None and read_bom(body)[0] is None and html_body_declared_encoding(body) is None:
        return NO_CHARSET
    return None


def _header_charset(content_type: str) -> str | None:
    """The ``charset=`` of a Content-Type as written (even an unknown one)."""
    for param in content_type.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip("\"'") or None
    # w3lib's parser for the odd forms (it drops unknown names: checked above)
    return http_content_type_encoding(content_type)


def _known_codec(name: str) -> bool:
    try:
        codecs.lookup(name)
    except LookupError:
        return False
    return True


def redirect_loop_target(
    request_url: str, redirect_urls: list[str], location: str | None
) -> str | None:
    """The URL a redirect to ``location`` goes back to, if its chain (the
    earlier URLs and ``request_url``) already had it; None if it goes on."""
    if not location:
        return None
    try:
        target = canonicalize_url(urljoin(request_url, location))
        chain = {canonicalize_url(u) for u in [*redirect_urls, request_url]}
    except ValueError:
        return None  # an unparsable Location: RedirectMiddleware's business
    return target if target in chain else None
