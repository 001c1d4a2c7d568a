"""scrapy-redis baseline for bench/crawl_rate.py (stock scheduler and dupefilter)."""
