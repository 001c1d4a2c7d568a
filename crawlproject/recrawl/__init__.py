"""Freshness: per-URL fetch state, adaptive recrawl intervals and their settings."""
