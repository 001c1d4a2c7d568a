"""Near-duplicate detection: SimHash fingerprints and the fleet's shared index."""
