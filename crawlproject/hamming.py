"""The Hamming distance of two fingerprints: the one routine of the Python side
(issue 42, item 5). The Lua scripts that compare SimHashes inside Redis
(crawlproject/dedupe/lua/) share theirs: lua/_prelude.lua, prepended by
crawlproject/dedupe/calls.py load_script.

A bottom-layer module: the duplicate index, the soft-404 test and the recrawl
schedule (which sits below the dedupe package) all ask it."""

from __future__ import annotations


def hamming(a: int, b: int) -> int:
    """Number of differing bits between two fingerprints."""
    return (a ^ b).bit_count()
