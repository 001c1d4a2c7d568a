"""Settings of the body storage pipeline (``CRAWL_STORE_*``), read once and checked.

Where files go (``CRAWL_STORE_URI``, ``AWS_*``) is :class:`~crawlproject.store.
backends.StoreConfig`; this is what is written and when.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scrapy.settings import BaseSettings

from crawlproject.content.registry import processor_paths
from crawlproject.frontier.config import ConfigError
from crawlproject.setting_values import crawl_setting

# Item key under which the spider hands the page's Response to the storage
# pipeline, which removes it (feeds never see it).
RESPONSE_ITEM_KEY = "crawl_response"
# Request meta key: the response's Content-Encoding as sent, before Scrapy
# decoded the body (middlewares/wire_encoding.py).
WIRE_ENCODING_META_KEY = "crawl_wire_encoding"

STORE_FORMAT_WARC = "warc"
STORE_FORMAT_OBJECT = "object"
STORE_FORMATS = (STORE_FORMAT_WARC, STORE_FORMAT_OBJECT)


@dataclass(frozen=True)
class BodyStoreConfig:
    enabled: bool
    content_types: frozenset[str]
    rotate_bytes: int
    rotate_seconds: float
    close_timeout_seconds: float
    data_dir: Path
    store_format: str = STORE_FORMAT_WARC
    spool_max_bytes: int = 0  # 0: no cap
    spool_min_free_bytes: int = 0  # 0: no floor
    spool_check_seconds: float = 1.0

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> BodyStoreConfig:
        config = cls(
            enabled=crawl_setting(settings, "CRAWL_STORE_ENABLED"),
            content_types=_content_types(settings),
            rotate_bytes=crawl_setting(settings, "CRAWL_STORE_ROTATE_BYTES"),
            rotate_seconds=crawl_setting(settings, "CRAWL_STORE_ROTATE_SECONDS"),
            close_timeout_seconds=crawl_setting(settings, "CRAWL_STORE_CLOSE_TIMEOUT_SECONDS"),
            data_dir=Path(crawl_setting(settings, "CRAWL_DATA_DIR")),
            store_format=str(crawl_setting(settings, "CRAWL_STORE_FORMAT")).strip().lower(),
            spool_max_bytes=crawl_setting(settings, "CRAWL_STORE_SPOOL_MAX_BYTES"),
            spool_min_free_bytes=crawl_setting(settings, "CRAWL_STORE_SPOOL_MIN_FREE_BYTES"),
            spool_check_seconds=crawl_setting(settings, "CRAWL_STORE_SPOOL_CHECK_SECONDS"),
        )
        if config.store_format not in STORE_FORMATS:
            raise ConfigError(
                f"CRAWL_STORE_FORMAT must be one of {', '.join(map(repr, STORE_FORMATS))}, "
                f"got {crawl_setting(settings, 'CRAWL_STORE_FORMAT')!r}"
            )
        if config.rotate_bytes < 1 or config.rotate_seconds <= 0:
            raise ConfigError("CRAWL_STORE_ROTATE_BYTES and _SECONDS must be > 0")
        if config.close_timeout_seconds < 0:
            raise ConfigError("CRAWL_STORE_CLOSE_TIMEOUT_SECONDS must be >= 0")
        if config.spool_max_bytes < 0 or config.spool_min_free_bytes < 0:
            raise ConfigError(
                "CRAWL_STORE_SPOOL_MAX_BYTES and _MIN_FREE_BYTES must be >= 0 (0: no limit)"
            )
        if config.spool_check_seconds <= 0:
            raise ConfigError("CRAWL_STORE_SPOOL_CHECK_SECONDS must be > 0")
        return config

    def spool_dir(self, crawl: str) -> Path:
        return self.data_dir / "spool" / crawl

    def object_spool_dir(self, crawl: str) -> Path:
        """The object format's spool: apart, so the WARC spool's sweep never sees it."""
        return self.spool_dir(crawl) / "objects"


def _content_types(settings: BaseSettings) -> frozenset[str]:
    """CRAWL_STORE_CONTENT_TYPES, or (None) the types a content processor reads."""
    if crawl_setting(settings, "CRAWL_STORE_CONTENT_TYPES") is None:
        return frozenset(processor_paths(settings))
    return frozenset(
        t.strip().lower() for t in settings.getlist("CRAWL_STORE_CONTENT_TYPES") if t.strip()
    )
