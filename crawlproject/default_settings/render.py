"""Rendering pages in a browser (crawlproject/render/, docs/rendering.md)."""

# "auto": a page is rendered only where its raw HTML lacks what the rendered
# page has (links, text), learned per host and page template and shared by the
# fleet in Redis; "never": no page is rendered (a request's meta render /
# playwright is ignored, counted in render/skipped); "always": every HTML page.
CRAWL_RENDER = "auto"
# The browser (Chromium): a path, or a command name looked up on PATH. Empty:
# the first of chromium, chromium-browser, google-chrome found on PATH. None
# found: nothing is rendered, said once at start.
CRAWL_BROWSER_PATH = ""
# Browser pages rendering at once in one worker (the page pool's size).
CRAWL_RENDER_CONCURRENCY = 2
# One render's time limit. A render is done once the page is quiet after its
# load event (no request for 500 ms: content often arrives by fetch() after
# it); one still busy at the limit is taken as it stands (render/timeouts).
CRAWL_RENDER_TIMEOUT_SECONDS = 15.0
# A page template learned static is still rendered once in this many of its
# pages, so that a site that changes is noticed; 0: never re-checked.
CRAWL_RENDER_SAMPLE_EVERY = 50
# A worker without a browser gives a page that must be rendered (its request
# asks, or its template was learned to need it) back to the frontier, for a
# worker with a browser, at most this many times; then, or when no worker of
# the fleet has a browser, it fetches the page raw (render/unrendered).
# 0: never hands back.
CRAWL_RENDER_MAX_HANDBACKS = 20
# The browser is restarted, between renders, once the resident memory of its
# processes passes this many MB (0: no limit) ...
CRAWL_RENDER_BROWSER_MAX_MB = 2048
# ... or after this many renders (0: no limit).
CRAWL_RENDER_BROWSER_MAX_RENDERS = 0
