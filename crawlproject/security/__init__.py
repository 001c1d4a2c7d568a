"""Secure defaults that are not a crawl rule: keeping secrets out of logs."""
