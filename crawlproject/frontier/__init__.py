"""The Redis frontier: per-host queues, politeness slots, leases (keys in keys.py)."""
