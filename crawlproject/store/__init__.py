"""Page bodies: WARC files and the stores they go to."""
