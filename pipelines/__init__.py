"""pipelines of crawlproject: see README."""
