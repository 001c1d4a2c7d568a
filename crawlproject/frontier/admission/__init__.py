"""Admission: whether a request the engine hands over goes to the frontier,
and as what: seeds and their check, canonical URL, URL rules, depth and the
chains of pages that bring nothing new, crawl order (``priority``), the votes
and token evidence a link carries for the trap guards.

May use: ``crawl``, ``store``, ``connection`` and ``basics``.
"""
