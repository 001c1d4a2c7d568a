"""No credential in the logs (crawlproject/security/redaction.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from scrapy.settings import Settings

from crawlproject.security.redaction import MASK, redact, secret_values
from testkit.crawlproc import REPO_ROOT, start_worker, wait_all
from testkit.redis_server import RedisServer
from testkit.testweb import TestWeb

SECRET_KEY = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
KEY_ID = "AKIAIOSFODNN7EXAMPLE"


def test_secret_settings_and_url_passwords_are_masked() -> None:
    settings = Settings({"FTP_PASSWORD": "guest"}, priority="default")
    settings.setdict({"AWS_SECRET_ACCESS_KEY": SECRET_KEY, "MY_TOKEN": "abc"}, "cmdline")
    # Scrapy's own default is no secret; too-short values are not masked by value.
    assert secret_values(settings) == [SECRET_KEY]
    line = f"key {SECRET_KEY} at redis://:s3cret@10.0.0.5:6379/0 and http://u:p@h/ and ftp://h/"
    assert redact(line, [SECRET_KEY]) == (
        f"key {MASK} at redis://:{MASK}@10.0.0.5:6379/0 and http://u:{MASK}@h/ and ftp://h/"
    )
    # A TLS key's passphrase in the URL's query; the file paths stay readable,
    # and a crawled page's ?token= is no credential of ours.
    url = "rediss://h:6380/0?ssl_keyfile=/etc/w.key&ssl_password=hunter22&ssl_cert_reqs=required"
    assert redact(f"Cannot open the frontier (at {url})", []) == (
        "Cannot open the frontier (at rediss://h:6380/0?ssl_keyfile=/etc/w.key"
        f"&ssl_password={MASK}&ssl_cert_reqs=required)"
    )
    assert redact("Crawled <GET http://h/p?token=abc&page=2>", []) == (
        "Crawled <GET http://h/p?token=abc&page=2>"
    )


def test_a_worker_log_holds_no_credential(
    redis_server: RedisServer, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    web = testweb_factory(hosts=1, pages=2, latency_ms=0, links=1, cross_links=0)
    proc = start_worker(
        REPO_ROOT, redis_server.url, "secrets", web.seeds,
        {"CRAWL_HOST_DELAY": 0.05, "CRAWL_IDLE_CLOSE_SECONDS": 1.0,
         "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_ACCESS_KEY_ID": KEY_ID},
        tmp_path / "worker.log",
    )  # fmt: skip
    wait_all([proc], timeout=60)
    log = proc.log_path.read_text()
    assert "Overridden settings" in log and "'AWS_SECRET_ACCESS_KEY': '***'" in log
    assert SECRET_KEY not in log and KEY_ID not in log


def test_a_password_protected_redis_and_no_password_in_the_log(
    redis_server_factory: Callable[..., RedisServer],
    testweb_factory: Callable[..., TestWeb],
    tmp_path: Path,
) -> None:
    password = "n0t-in-any-log-Zq81"
    protected = redis_server_factory(extra_args=["--requirepass", password])
    url = protected.url.replace("redis://", f"redis://:{password}@")
    web = testweb_factory(hosts=1, pages=3, latency_ms=0, links=2, cross_links=0, query_variants=0)
    out = tmp_path / "items.jsonl"
    proc = start_worker(
        REPO_ROOT, url, "auth", web.seeds, {"CRAWL_HOST_DELAY": 0.05,
        "CRAWL_IDLE_CLOSE_SECONDS": 1.0}, tmp_path / "worker.log", extra_args=["-O", str(out)],
    )  # fmt: skip
    wait_all([proc], timeout=60)
    assert len(out.read_text().splitlines()) == len(web.expected_urls)  # AUTH worked
    log = proc.log_path.read_text()
    assert "Frontier open" in log and password not in log
