"""Settings of the body storage (``CRAWL_STORE_*``, ``AWS_*``), read once and checked.

:class:`BodyStoreConfig`: what the storage pipeline writes and when;
:class:`StoreConfig`: where finished files go (``CRAWL_STORE_URI``, ``AWS_*``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from scrapy.settings import BaseSettings

from crawlproject.content.registry import processor_paths
from crawlproject.setting_values import ConfigError, Setting, crawl_setting, read_config
from crawlproject.store.revisits import DUPLICATES_CHOICES, DUPLICATES_REVISIT
from crawlproject.store.statuses import ALL_STATUSES, StatusSet, parse_statuses
from crawlproject.store.uri import parse_store_uri

# Item key under which the spider hands the page's Response to the storage
# pipeline, which removes it (feeds never see it).
RESPONSE_ITEM_KEY = "crawl_response"
# Request meta key: the response's Content-Encoding as sent, before Scrapy
# decoded the body (middlewares/wire_encoding.py).
WIRE_ENCODING_META_KEY = "crawl_wire_encoding"

STORE_FORMAT_WARC = "warc"
STORE_FORMAT_OBJECT = "object"
STORE_FORMATS = (STORE_FORMAT_WARC, STORE_FORMAT_OBJECT)

MIB = 1024 * 1024
# S3's limits on a multipart upload's parts (all but the last part).
S3_MIN_PART_BYTES = 5 * MIB
S3_MAX_PART_BYTES = 5 * 1024 * MIB


@dataclass(frozen=True)
class BodyStoreConfig:
    enabled: Annotated[bool, Setting("CRAWL_STORE_ENABLED")]
    content_types: frozenset[str]  # CRAWL_STORE_CONTENT_TYPES, or the processors' types
    rotate_bytes: Annotated[int, Setting("CRAWL_STORE_ROTATE_BYTES")]
    rotate_seconds: Annotated[float, Setting("CRAWL_STORE_ROTATE_SECONDS")]
    close_timeout_seconds: Annotated[float, Setting("CRAWL_STORE_CLOSE_TIMEOUT_SECONDS")]
    data_dir: Path  # CRAWL_DATA_DIR
    store_format: str = STORE_FORMAT_WARC  # CRAWL_STORE_FORMAT, lower case
    spool_max_bytes: Annotated[int, Setting("CRAWL_STORE_SPOOL_MAX_BYTES")] = 0  # 0: no cap
    spool_min_free_bytes: Annotated[int, Setting("CRAWL_STORE_SPOOL_MIN_FREE_BYTES")] = 0
    spool_check_seconds: Annotated[float, Setting("CRAWL_STORE_SPOOL_CHECK_SECONDS")] = 1.0
    statuses: StatusSet = ALL_STATUSES  # CRAWL_STORE_STATUSES
    duplicates: str = DUPLICATES_REVISIT  # CRAWL_STORE_DUPLICATES, lower case

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> BodyStoreConfig:
        return read_config(
            cls,
            settings,
            content_types=_content_types(settings),
            data_dir=Path(crawl_setting(settings, "CRAWL_DATA_DIR")),
            store_format=str(crawl_setting(settings, "CRAWL_STORE_FORMAT")).strip().lower(),
            statuses=parse_statuses(settings.get("CRAWL_STORE_STATUSES")),
            duplicates=str(crawl_setting(settings, "CRAWL_STORE_DUPLICATES")).strip().lower(),
        )

    def validate(self) -> None:
        if self.store_format not in STORE_FORMATS:
            raise ConfigError(
                f"CRAWL_STORE_FORMAT must be one of {', '.join(map(repr, STORE_FORMATS))}, "
                f"got {self.store_format!r}"
            )
        if self.duplicates not in DUPLICATES_CHOICES:
            raise ConfigError(
                f"CRAWL_STORE_DUPLICATES must be one of {', '.join(map(repr, DUPLICATES_CHOICES))}"
                f", got {self.duplicates!r}"
            )
        if self.rotate_bytes < 1 or self.rotate_seconds <= 0:
            raise ConfigError("CRAWL_STORE_ROTATE_BYTES and _SECONDS must be > 0")
        if self.close_timeout_seconds < 0:
            raise ConfigError("CRAWL_STORE_CLOSE_TIMEOUT_SECONDS must be >= 0")
        if self.spool_max_bytes < 0 or self.spool_min_free_bytes < 0:
            raise ConfigError(
                "CRAWL_STORE_SPOOL_MAX_BYTES and _MIN_FREE_BYTES must be >= 0 (0: no limit)"
            )
        if self.spool_check_seconds <= 0:
            raise ConfigError("CRAWL_STORE_SPOOL_CHECK_SECONDS must be > 0")

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


@dataclass(frozen=True)
class StoreConfig:
    """The body store settings (``CRAWL_STORE_*`` and Scrapy's ``AWS_*``),
    read once and checked together. Credentials are kept out of ``repr``."""

    uri: str
    local_root: Path | None
    bucket: str
    prefix: str
    multipart_threshold_bytes: Annotated[int, Setting("CRAWL_STORE_MULTIPART_THRESHOLD_BYTES")]
    multipart_chunk_bytes: Annotated[int, Setting("CRAWL_STORE_MULTIPART_CHUNK_BYTES")]
    retry_attempts: Annotated[int, Setting("CRAWL_STORE_RETRY_ATTEMPTS")]
    retry_base_seconds: Annotated[float, Setting("CRAWL_STORE_RETRY_BASE_SECONDS")]
    endpoint_url: str | None = None
    region_name: str | None = None
    use_ssl: bool | None = None
    verify: bool | str | None = None
    max_pool_connections: int = 10
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> StoreConfig:
        uri = crawl_setting(settings, "CRAWL_STORE_URI")
        if not uri:
            root = Path(crawl_setting(settings, "CRAWL_DATA_DIR"), "bodies").absolute()
            uri = root.as_uri()
        local_root, bucket, prefix = parse_store_uri(str(uri))
        return read_config(
            cls,
            settings,
            uri=str(uri),
            local_root=local_root,
            bucket=bucket,
            prefix=prefix,
            endpoint_url=settings.get("AWS_ENDPOINT_URL") or None,
            region_name=settings.get("AWS_REGION_NAME") or None,
            use_ssl=_optional_bool(settings, "AWS_USE_SSL"),
            verify=_verify(settings.get("AWS_VERIFY")),
            max_pool_connections=(
                settings.getint("AWS_MAX_POOL_CONNECTIONS")
                or settings.getint("REACTOR_THREADPOOL_MAXSIZE", 10)
            ),
            access_key_id=settings.get("AWS_ACCESS_KEY_ID") or None,
            secret_access_key=settings.get("AWS_SECRET_ACCESS_KEY") or None,
            session_token=settings.get("AWS_SESSION_TOKEN") or None,
        )

    def validate(self) -> None:
        if self.multipart_threshold_bytes < 1:
            raise ConfigError("CRAWL_STORE_MULTIPART_THRESHOLD_BYTES must be >= 1")
        if not S3_MIN_PART_BYTES <= self.multipart_chunk_bytes <= S3_MAX_PART_BYTES:
            raise ConfigError(
                f"CRAWL_STORE_MULTIPART_CHUNK_BYTES must be between {S3_MIN_PART_BYTES} (5 MiB) "
                f"and {S3_MAX_PART_BYTES} (5 GiB): S3's limits on a part"
            )
        if self.retry_attempts < 0:
            raise ConfigError("CRAWL_STORE_RETRY_ATTEMPTS must be >= 0 (0: no outer retries)")
        if self.retry_base_seconds < 0:
            raise ConfigError("CRAWL_STORE_RETRY_BASE_SECONDS must be >= 0")
        if (self.access_key_id is None) != (self.secret_access_key is None):
            raise ConfigError(
                "set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or neither "
                "(boto3's credential chain)"
            )
        if self.session_token and not self.access_key_id:
            raise ConfigError("AWS_SESSION_TOKEN needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
        if self.max_pool_connections < 1:
            raise ConfigError("AWS_MAX_POOL_CONNECTIONS must be >= 1")


def _optional_bool(settings: BaseSettings, name: str) -> bool | None:
    if settings.get(name) is None:
        return None
    try:
        return settings.getbool(name)
    except ValueError:
        raise ConfigError(f"{name} must be a boolean, got {settings.get(name)!r}") from None


def _verify(value: object) -> bool | str | None:
    """AWS_VERIFY: unset, a boolean (also as text) or the path of a CA bundle."""
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip()
    if text.lower() in {"1", "true", "yes", "on"}:
        return True
    if text.lower() in {"0", "false", "no", "off"}:
        return False
    return text or None
