"""What storing page bodies costs in S3 requests and bytes: WARC files vs one object per page.

Real ``scrapy crawl web`` workers (bench/crawl_rate.py's ``run_crawl``: a fresh
synthetic loopback web and a fresh redis-server per run) store into a real
``moto_server`` over HTTP (boto3 with ``endpoint_url``), one fresh server per
run. Every request figure comes from moto's own access log (the SERVER side):
``PUT`` (an object, or a multipart part) and ``POST`` (multipart create and
complete); the bucket's listing gives the stored objects and their bytes.

The web: realistic pages (``--realistic`` in testkit/testweb.py: a site
template, words, a banner, ~10 KB of HTML), 50 hosts x 40 pages, latency
0-2 ms, one worker, no host delay, the duplicate filter on (project defaults).

Runs (``--repeats`` has no use here: the counts are exact, not timings):

* ``warc-default``: ``CRAWL_STORE_FORMAT=warc`` with the defaults (a file is
  finished at 1 GB or an hour, or when the worker stops: here, at the end).
* ``warc-1mb``: WARC files finished every 1 MB (``CRAWL_STORE_ROTATE_BYTES``),
  so that the crawl makes many files: requests per file as in steady state.
* ``warc-multipart``: one file at the end, sent as a multipart upload in
  5 MiB parts (S3's smallest), to count what a multipart file costs.
* ``object``: ``CRAWL_STORE_FORMAT=object``: one gzip object per distinct body.

Per run: pages stored (the worker's ``store/pages``), write requests to S3
(PUT + POST) per 1,000 stored pages, stored bytes per page (everything the
crawl put in the bucket, data and indexes apart) and the body bytes per page
(uncompressed, as served). From the warc runs the script also derives, and
labels as derived, the requests per 1,000 pages of a crawl with the default
1 GB files: one file holds 1 GB / (stored WARC bytes per page) pages and costs
1 + ceil(1 GB / 64 MiB) + 1 multipart requests plus 1 PUT for its index.

    .venv/bin/python bench/store_puts.py            # ~2 min
    .venv/bin/python bench/store_puts.py --quick    # smoke test

Writes bench/results/store_puts.json (-quick.json) and prints a Markdown summary.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import shlex
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchlib import REPO, RESULTS  # also puts the repository on sys.path

from bench import crawl_rate
from testkit.s3_server import (
    TEST_ACCESS_KEY_ID,
    TEST_REGION,
    TEST_SECRET_ACCESS_KEY,
    MotoServer,
)

BUCKET = "bench-bodies"
PREFIX = "bodies"
GB = 1_000_000_000
MULTIPART_CHUNK_BYTES = 64 * 1024 * 1024  # CRAWL_STORE_MULTIPART_CHUNK_BYTES default


def web_config(quick: bool) -> dict[str, Any]:
    web: dict[str, Any] = dict(hosts=10, pages=10) if quick else dict(hosts=50, pages=40)
    web.update(latency_ms=(0, 2), realistic=True, seed=4)
    return web


RUNS: dict[str, dict[str, Any]] = {
    "warc-default": {"CRAWL_STORE_FORMAT": "warc"},
    "warc-1mb": {"CRAWL_STORE_FORMAT": "warc", "CRAWL_STORE_ROTATE_BYTES": 1_000_000},
    # Multipart at S3's smallest part size: the requests a file costs when it
    # is sent in parts (create + parts + complete), as a 1 GB file is.
    "warc-multipart": {
        "CRAWL_STORE_FORMAT": "warc",
        "CRAWL_STORE_MULTIPART_THRESHOLD_BYTES": 5 * 1024 * 1024,
        "CRAWL_STORE_MULTIPART_CHUNK_BYTES": 5 * 1024 * 1024,
    },
    "object": {"CRAWL_STORE_FORMAT": "object"},
}


def settings_for(moto: MotoServer, extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "CONCURRENT_REQUESTS": 32,
        "CRAWL_HOST_DELAY": 0,
        "CRAWL_IDLE_CLOSE_SECONDS": 2.0,
        "LOG_LEVEL": "INFO",
        "CRAWL_DATA_DIR": "{dir}/data-{i}",
        "CRAWL_STORE_URI": f"s3://{BUCKET}/{PREFIX}",
        "AWS_ENDPOINT_URL": moto.endpoint_url,
        "AWS_ACCESS_KEY_ID": TEST_ACCESS_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": TEST_SECRET_ACCESS_KEY,
        "AWS_REGION_NAME": TEST_REGION,
        **extra,
    }


def bucket_objects(moto: MotoServer) -> Iterator[tuple[str, int]]:
    client = moto.client()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for obj in page.get("Contents", ()):
            yield obj["Key"], int(obj["Size"])


def is_index(key: str) -> bool:
    return key.endswith(".cdxj")


def measure(name: str, web: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    crawl = f"store-{name}-{uuid.uuid4().hex[:8]}"
    print(f"[store_puts] {name} ({extra}) crawl {crawl} ...", flush=True)
    with MotoServer() as moto:
        moto.client().create_bucket(Bucket=BUCKET)
        before = {m: moto.request_count(m) for m in ("PUT", "POST")}
        with _crawl_named(crawl):
            run = crawl_rate.run_crawl(
                RESULTS / "store_puts" / name, web, "frontier", 1, settings_for(moto, extra),
                timeout=600,
            )  # fmt: skip
        puts = moto.request_count("PUT") - before["PUT"]
        posts = moto.request_count("POST") - before["POST"]
        objects = list(bucket_objects(moto))
    stats = run["worker_stats"][0]
    pages = stats.get("store/pages", 0)
    data = [(k, n) for k, n in objects if not is_index(k)]
    index = [(k, n) for k, n in objects if is_index(k)]
    data_bytes = sum(n for _, n in data)
    index_bytes = sum(n for _, n in index)
    res = {
        "name": name,
        "crawl": crawl,
        "settings": extra,
        "pages_stored": pages,
        "body_bytes_per_page": stats.get("store/bytes", 0) / pages if pages else None,
        "put_requests": puts,
        "post_requests": posts,
        "write_requests_per_1000_pages": 1000 * (puts + posts) / pages if pages else None,
        "data_objects": len(data),
        "index_objects": len(index),
        "stored_data_bytes_per_page": data_bytes / pages if pages else None,
        "stored_index_bytes_per_page": index_bytes / pages if pages else None,
        "worker_stats": {k: v for k, v in stats.items() if k.startswith(("store/", "dedupe/"))},
        "workdir": run["workdir"],
    }
    print(f"    {pages} pages stored: {puts} PUT + {posts} POST = "
          f"{res['write_requests_per_1000_pages']:.1f} per 1,000 pages; {len(data)} data + "
          f"{len(index)} index objects; {res['stored_data_bytes_per_page']:.0f} B/page stored "
          f"(+{res['stored_index_bytes_per_page']:.0f} index), body "
          f"{res['body_bytes_per_page']:.0f} B/page", flush=True)  # fmt: skip
    return res


class _crawl_named:
    """run_crawl names every crawl "bench": give this run's worker its own name."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.saved = crawl_rate.start_worker

    def __enter__(self) -> None:
        start, name = self.saved, self.name

        def start_named(root: Any, url: str, _crawl: str, *args: Any, **kwargs: Any) -> Any:
            return start(root, url, name, *args, **kwargs)

        crawl_rate.start_worker = start_named  # type: ignore[assignment]

    def __exit__(self, *exc: object) -> None:
        crawl_rate.start_worker = self.saved  # type: ignore[assignment]


def derived_default_rotation(warc: dict[str, Any]) -> dict[str, Any]:
    """Requests per 1,000 pages with 1 GB files, from the measured bytes per page."""
    per_page = warc["stored_data_bytes_per_page"]
    pages_per_file = GB / per_page
    requests_per_file = 1 + math.ceil(GB / MULTIPART_CHUNK_BYTES) + 1 + 1
    return {
        "from_run": warc["name"],
        "pages_per_1gb_file": pages_per_file,
        "requests_per_file": requests_per_file,
        "write_requests_per_1000_pages": 1000 * requests_per_file / pages_per_file,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a small web: check the script works")
    ap.add_argument("--rev", default="HEAD", help="git revision the workers run (default HEAD)")
    args = ap.parse_args(argv)
    crawl_rate.snapshot_code(args.rev)
    web = web_config(args.quick)
    out: dict[str, Any] = {
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "web": web,
        "runs": [measure(name, web, extra) for name, extra in RUNS.items()],
    }
    warc_1mb = next(r for r in out["runs"] if r["name"] == "warc-1mb")
    out["derived_1gb_files"] = derived_default_rotation(warc_1mb)
    path = RESULTS / ("store_puts-quick.json" if args.quick else "store_puts.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1, default=str))
    print(f"\n`{out['command']}` ({out['started']}, web {web})\n")
    print("| run | pages stored | PUT | POST | requests / 1,000 pages | stored B/page "
          "(data + index) | body B/page |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for r in out["runs"]:
        stored = f"{r['stored_data_bytes_per_page']:.0f} + {r['stored_index_bytes_per_page']:.0f}"
        print(f"| {r['name']} | {r['pages_stored']} | {r['put_requests']} | {r['post_requests']} "
              f"| {r['write_requests_per_1000_pages']:.2f} | {stored} "
              f"| {r['body_bytes_per_page']:.0f} |")  # fmt: skip
    d = out["derived_1gb_files"]
    print(f"\nDerived (not measured): 1 GB files hold {d['pages_per_1gb_file']:,.0f} pages "
          f"at {d['requests_per_file']} requests each: "
          f"{d['write_requests_per_1000_pages']:.3f} write requests per 1,000 pages.")  # fmt: skip
    print(f"Results: {path.relative_to(REPO)}")


if __name__ == "__main__":
    main()
