"""Content processors by MIME type."""

# Content processors (crawlproject/content/; the classes live in pipelines/content/).
# Each fetched answer goes, by its MIME type (Content-Type without parameters,
# lowercased), to one processor, which adds fields to its fetch record and names
# the links to follow (the spider's scope still applies); a type without one
# keeps the fetch record only (stat content/unprocessed/<type>). A processor
# that fails on a body is counted (content/error/<name>); the record is kept.
# CRAWL_CONTENT_PROCESSORS is the project's: merged over the _BASE, so one line
# adds or replaces a type, {"application/json": "pipelines.json.JsonProcessor"},
# and None turns one off, {"application/pdf": None}.
CRAWL_CONTENT_PROCESSORS_BASE: dict[str, str] = {
    "text/html": "pipelines.content.html.HtmlProcessor",
    "application/xhtml+xml": "pipelines.content.html.HtmlProcessor",
    "text/plain": "pipelines.content.text.PlainTextProcessor",
    "application/pdf": "pipelines.content.pdf.PdfProcessor",
    "application/rss+xml": "pipelines.content.feeds.FeedProcessor",
    "application/atom+xml": "pipelines.content.feeds.FeedProcessor",
    # Many feeds are served as plain XML; other XML documents are left alone.
    "application/xml": "pipelines.content.feeds.FeedProcessor",
    "text/xml": "pipelines.content.feeds.FeedProcessor",
}
CRAWL_CONTENT_PROCESSORS: dict[str, str | None] = {}
# Characters of a document's extracted text kept in its record ("text", PDF).
CRAWL_CONTENT_MAX_TEXT_CHARS = 20_000
# Pages of a PDF whose text is extracted, at most: extraction runs on the
# worker's reactor thread, so this bounds what one large PDF costs it.
CRAWL_CONTENT_PDF_MAX_PAGES = 50
