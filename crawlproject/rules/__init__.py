"""URL rules: which URLs may enter the frontier at all (see url_rules.py)."""
