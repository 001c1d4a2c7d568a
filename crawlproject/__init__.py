"""crawlproject: a polite, distributed web crawler on Scrapy with one shared Redis frontier."""
