"""spiders of crawlproject: see README."""
