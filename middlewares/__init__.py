"""middlewares of crawlproject: see README."""
