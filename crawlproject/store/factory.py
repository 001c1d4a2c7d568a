"""Opens the body store ``CRAWL_STORE_URI`` names (config.py's :class:`StoreConfig`):
a directory (local.py) or an S3 bucket (s3.py; boto3 is imported only then)."""

from __future__ import annotations

import logging

from crawlproject.store.base import BodyStore
from crawlproject.store.config import StoreConfig
from crawlproject.store.local import LocalStore

logger = logging.getLogger(__name__)


def open_store(config: StoreConfig) -> BodyStore:
    """The store ``config`` names; for S3, its boto3 client (no request yet)."""
    if config.local_root is not None:
        logger.info("Body store: %s", config.uri)
        return LocalStore(config.local_root)
    from crawlproject.store.s3 import open_s3_store

    return open_s3_store(config)
