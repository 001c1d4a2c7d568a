"""The fleet status: worker reports in Redis, the status view, metrics."""
