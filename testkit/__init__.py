"""testkit: test and benchmark infrastructure: a synthetic loopback web, real servers
(redis-server, Redis Cluster, TLS, moto's S3, Scrapyd, proxies), crawl
subprocesses.

A top-level package so that tests/ and bench/ both import it and neither
imports the other (benchmarks import no test module: issue 17). It is not part
of the project's distribution (pyproject.toml packages only crawlproject,
spiders, middlewares and pipelines), so it never reaches an egg or a wheel.
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]  # the repository: crawls run there
