"""The body store: where bodies go, as WARC or objects, and the spool's backpressure."""

# Body store (crawlproject/store/: local.py, s3.py; config.py): where finished files go.
# None: the directory <CRAWL_DATA_DIR>/bodies; else file:///abs/dir (or a plain
# path) or s3://bucket/prefix. S3 takes Scrapy's AWS_* settings (AWS_ENDPOINT_URL
# for MinIO and other S3-compatible stores, AWS_REGION_NAME, keys, AWS_USE_SSL,
# AWS_VERIFY) and, for those unset, boto3's usual chain (environment, ~/.aws,
# instance roles). Never put keys in the URI: it is logged (and refused).
CRAWL_STORE_URI: str | None = None
# Files from this size go to S3 as multipart uploads, in parts of this size
# (S3: 5 MiB to 5 GiB a part, at most 10,000 parts; boto3 grows the part for
# larger files). 64 MiB parts: a 1 GB WARC file is 16 part PUTs + 2 requests.
CRAWL_STORE_MULTIPART_THRESHOLD_BYTES = 8 * 1024 * 1024
CRAWL_STORE_MULTIPART_CHUNK_BYTES = 64 * 1024 * 1024
# S3 unreachable (connection errors, timeouts, 5xx, throttling) after botocore's
# own retries (AWS_MAX_ATTEMPTS, 3 by default): retried this many more times,
# waiting CRAWL_STORE_RETRY_BASE_SECONDS x 2**n (x 0.5-1, at most 60 s), then
# the caller keeps the file spooled on local disk and tries again later.
CRAWL_STORE_RETRY_ATTEMPTS = 5
CRAWL_STORE_RETRY_BASE_SECONDS = 1.0

# Page bodies as WARC (pipelines/store.py). Each answer kept after the
# duplicate filter (4xx and 5xx too: CRAWL_STORE_STATUSES) whose content type
# is listed becomes a response record (with its
# request record) in this worker's rolling WARC file, written under
# CRAWL_DATA_DIR/spool/<crawl>/ and moved to CRAWL_STORE_URI (key
# <crawl>/warc/<file>) when the file is finished: at CRAWL_STORE_ROTATE_BYTES,
# after CRAWL_STORE_ROTATE_SECONDS, or when the worker stops. The item gets
# the record's place (warc_file, warc_offset, warc_length) and payload_digest.
CRAWL_STORE_ENABLED = True
# How bodies are stored. "warc": rolling WARC files as above, about one store
# PUT per thousands of pages. "object": one gzip object per distinct body,
# keyed by its SHA-1 (<crawl>/objects/<BASE32>.gz), so a body served under many
# URLs is stored once, plus rolling CDXJ index files (<crawl>/index/) that
# `crawlproject body` reads; the cost is one PUT per distinct body, and only
# status and Content-Type are kept of the headers. The item gets body_key.
CRAWL_STORE_FORMAT = "warc"
# Content types whose bodies are stored; None: every type a content processor
# reads (CRAWL_CONTENT_PROCESSORS below: HTML, plain text, PDF, feeds).
CRAWL_STORE_CONTENT_TYPES: list[str] | None = None
# HTTP statuses whose responses are stored; None: every response that came
# back (4xx and 5xx too, as Heritrix and wget keep them; the redirects' 3xx as
# they are followed). Codes, ranges and classes, as a comma-separated string
# or a list: "200-299,404", ["2xx", 404], "all" (crawlproject/store/statuses.py).
# A value that names no status clearly refuses the start.
CRAWL_STORE_STATUSES: str | int | list[str | int] | None = None
# A body the fleet has stored already (the same URL unchanged, or another URL
# serving the same bytes; crawlproject/store/revisits.py) and a recrawl's 304
# (WARC format). "revisit": a small revisit record naming the stored original
# (profiles identical-payload-digest and server-not-modified), which replay
# tools serve with the original's body; the index of stored payloads lives in
# the crawl's Redis (key ``wd`` per shard). A page the duplicate filter judged
# a copy is archived too: a near copy whole, an exact copy as a revisit.
# "none": nothing is written for them, nor for the filter's copies. "full":
# every body stored whole, no index, a 304 writes nothing.
CRAWL_STORE_DUPLICATES = "revisit"
CRAWL_STORE_ROTATE_BYTES = 1_000_000_000
CRAWL_STORE_ROTATE_SECONDS = 3600.0
# A stopping worker waits this long for its files to reach the store; what is
# left stays spooled and the next worker started on this machine uploads it.
CRAWL_STORE_CLOSE_TIMEOUT_SECONDS = 30.0
# Backpressure: while the store is unreachable, finished files wait in the
# spool. When the spool directory (CRAWL_DATA_DIR/spool/<crawl>/: every file,
# open ones too, of every worker sharing it) holds more than
# CRAWL_STORE_SPOOL_MAX_BYTES, or its filesystem has less than
# CRAWL_STORE_SPOOL_MIN_FREE_BYTES free, the worker stops taking new pages
# (it finishes the pages in flight, hands back what it claimed but had not
# started, so that other workers fetch those hosts) and resumes by itself
# below 80 % of the cap and above 1.25 x the floor. 8 GiB: 7 finished files of
# the default 1 GB plus the open one, hours of a busy worker's output (~1 MB/s);
# 1 GiB free leaves room for the pages in flight and the rest of the machine.
# Checked every CRAWL_STORE_SPOOL_CHECK_SECONDS (a directory scan in a thread);
# the spool may pass the cap by what the worker writes in that time. 0: no limit.
CRAWL_STORE_SPOOL_MAX_BYTES = 8 * 1024**3
CRAWL_STORE_SPOOL_MIN_FREE_BYTES = 1024**3
CRAWL_STORE_SPOOL_CHECK_SECONDS = 1.0
