"""The shipped content processors (crawlproject/content/ says what one is):
HTML, plain text, PDF and feeds, routed by ``CRAWL_CONTENT_PROCESSORS_BASE``."""
