"""The first-spider path of docs/extending.md, run as printed (issue 41, item 8).

The guide's first section takes a Scrapy user from ``scrapy startproject``
habits to a running spider of their own: the tutorial spider dropped into
``spiders/``, testing on loopback, politeness, ``status`` for its crawl, what
happens to its items, running again and starting over. This test reads that
section itself: its code block goes to the file the text names, in a scratch
copy of the project, and each of its commands runs there exactly as printed
(``.venv/bin/`` is this interpreter's own bin folder), on the embedded default
(no ``REDIS_URL``: the private Redis in ``crawl-data/redis``), against a
loopback quotes site that stands for ``https://quotes.example/``. The README's
commands for a spider of one's own are the guide's.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path

from testkit.own_web import OwnSitesWeb
from testkit.quotes_site import PER_PAGE, QuotesSite
from testkit.scratch import scratch_project

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "extending.md"
README = ROOT / "README.md"
SITE = "https://quotes.example/"
SITE_IP = "127.0.43.1"
# Listing pages: more than a chain of near copies that web follows (NEAR_COPY_HOPS,
# crawlproject/dedupe/verdict.py): a spider's own pagination is never cut.
LISTINGS = 30
FENCE = re.compile(r"^(?P<indent> *)```python\n(?P<code>.*?)^(?P=indent)```$", re.S | re.M)
COMMAND = re.compile(r"`(\.venv/bin/(?:scrapy|crawlproject) [^`]+)`")
BIN = Path(sys.executable).parent
# The environment a user's shell has: none of the tests' own Redis or crawl.
CLEARED = ("REDIS_URL", "REDIS_HOST", "REDIS_PORT", "CRAWL_NAME", "CRAWL_DATA_DIR")


def first_section() -> str:
    text = GUIDE.read_text(encoding="utf-8")
    [section] = [
        s for s in re.split(r"^## ", text, flags=re.M) if s.startswith("Your first spider")
    ]
    return section


def printed_commands(text: str) -> list[str]:
    return [" ".join(c.split()) for c in COMMAND.findall(text)]


def run_printed(command: str, project: Path, site: str) -> subprocess.CompletedProcess[str]:
    """``command`` as the guide prints it, in the scratch project."""
    words = shlex.split(command.replace(SITE, site))
    program = BIN / Path(words[0]).name
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env.update(PYTHONPATH=str(project), PYTHONUNBUFFERED="1")
    return subprocess.run(
        [str(program), *words[1:]], cwd=project, env=env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip


def test_the_readme_prints_the_guides_commands() -> None:
    blocks = re.findall(r"^```sh\n(.*?)^```$", README.read_text(encoding="utf-8"), re.S | re.M)
    lines = [line.split("  #")[0].strip() for block in blocks for line in block.splitlines()]
    readme = [" ".join(line.split()) for line in lines if line.startswith(".venv/bin/")]
    guide = printed_commands(first_section())
    own = [c for c in readme if "quotes" in c]
    assert own, "the README shows no command for a spider of one's own"
    assert set(own) <= set(guide)


def test_the_first_spider_path_runs_as_printed(tmp_path: Path) -> None:
    section = first_section()
    [block] = FENCE.findall(section)
    assert "`spiders/quotes.py`" in section[: section.index(block[1])]
    crawl, status, reset = printed_commands(section)
    assert crawl.startswith(".venv/bin/scrapy crawl quotes ") and "CRAWL_GUARD_ALLOW" in crawl
    assert status == ".venv/bin/crawlproject status --crawl quotes"
    assert reset == ".venv/bin/crawlproject reset --crawl quotes --yes"

    site = QuotesSite(listings=LISTINGS)
    with OwnSitesWeb({SITE_IP: site}) as web:
        base = web.base_url(SITE_IP)
        project = scratch_project(tmp_path)
        (project / "spiders" / "quotes.py").write_text(block[1].replace(SITE, base + "/"))
        feed = project / "quotes.jsonl"

        def fetched() -> Counter[str]:
            return Counter(r.path for r in web.log if r.host_ip == SITE_IP)

        # Without the allowance: the loopback site is refused in one WARNING
        # that names the setting, nothing is fetched, and nothing is marked done.
        without = re.sub(r" -s CRAWL_GUARD_ALLOW=\S+", "", crawl)
        first = run_printed(without, project, base)
        assert first.returncode == 0, first.stderr[-3000:]
        refused = [ln for ln in first.stderr.splitlines() if "CRAWL_GUARD_ALLOW" in ln]
        assert refused and all(" WARNING: " in ln for ln in refused), first.stderr[-3000:]
        assert not [p for p in fetched() if p != "/robots.txt"]

        # As printed: every quote, with only the spider's fields.
        ran = run_printed(crawl, project, base)
        assert ran.returncode == 0, ran.stderr[-3000:]
        items = [json.loads(line) for line in feed.read_text().splitlines()]
        assert all(set(i) == {"text", "author", "tags"} for i in items), items[:1]
        expected = Counter(json.dumps(q, sort_keys=True) for q in site.quotes)
        assert Counter(json.dumps(i, sort_keys=True) for i in items) == expected
        assert len(items) == LISTINGS * PER_PAGE
        # `/` is the first listing; the spider follows "Next" links only.
        listings = [p for p in site.listing_paths() if p != "/page/1/"]
        once = fetched()
        assert {p: once[p] for p in listings} == dict.fromkeys(listings, 1), once
        assert "dedupe/items_dropped" not in ran.stderr  # near copies keep their items
        assert "'dedupe/checked/near'" in ran.stderr  # the listings were near copies
        assert "dedupe/near_hops_exceeded" not in ran.stderr  # and never cut

        # status, for the spider's crawl; and alone, when it is the only crawl.
        shown = run_printed(status, project, base)
        assert shown.returncode == 0 and shown.stderr == "", shown.stderr
        assert "quotes" in shown.stdout
        alone = run_printed(".venv/bin/crawlproject status", project, base)
        assert alone.returncode == 0 and "quotes" in alone.stdout, alone.stdout + alone.stderr

        # Again: nothing fetched, and one INFO line says why and what to do.
        again = run_printed(crawl, project, base)
        assert again.returncode == 0, again.stderr[-3000:]
        finished = [ln for ln in again.stderr.splitlines() if "was already finished" in ln]
        assert len(finished) == 1 and " INFO: " in finished[0]
        assert "crawlproject reset --crawl quotes" in finished[0]
        assert fetched() == once

        # Starting over: the next run fetches every page again.
        wiped = run_printed(reset, project, base)
        assert wiped.returncode == 0, wiped.stderr
        assert re.search(r"deleted [1-9]\d* key", wiped.stdout + wiped.stderr)
        over = run_printed(crawl, project, base)
        assert over.returncode == 0, over.stderr[-3000:]
        twice = fetched()
        assert {p: twice[p] for p in listings} == dict.fromkeys(listings, 2), twice
        items = [json.loads(line) for line in feed.read_text().splitlines()]
        assert len(items) == LISTINGS * PER_PAGE  # -O wrote the feed anew
