"""Near-duplicates judged at k = 3: precision and recall of SimHash features on a
labelled corpus of pages that share a vocabulary and a template.

Corpus (testkit/neardup.py): ``real``, standard library documentation
pages (~120, this interpreter's docstrings) and ``synthetic``, 200 pages of
sentences of 300 common English words, each wrapped in one documentation-site
template (header, 24-label navigation bar, breadcrumb, footer, "Last updated"
date); plus an edited copy of every page per edit kind (date, banner, nav
shuffle, mirror = banner + date, 1/2/5/10 % of words replaced, a paragraph
added, a paragraph removed). And ``scale``: ``--scale-pages`` (4,000) distinct
short synthetic pages (300-3,000 characters of text in the same template),
distinct only, to see the false-positive tail that a few hundred pages hide.

Labels: a page and its edited copy are a near-duplicate pair (positive); two
distinct pages (every pair) are a negative. At k = 3 (CRAWL_SIMHASH_K):

* recall of an edit kind: share of its copies within 3 bits of their page;
* false positives: distinct pairs within 3 bits (and their rate), and "pages
  dropped": pages with an earlier distinct page within 3 bits, as a crawl
  fetching them in order would drop;
* precision of an edit kind: TP / (TP + FP), TP its copies within 3, FP the
  distinct pairs of that corpus within 3 (so precision is 1.0 when no
  distinct pair is within 3).

Candidates: ``v1`` (the features before version 2: character 4-grams by count of
all the visible text), ``v2`` (crawlproject.dedupe.fingerprint: the same of the
text without boilerplate) and, unless ``--no-prototypes``, the prototypes
measured to choose v2 (word unigrams, 2- and 3-shingles, mixed, capped weights,
longer character n-grams; plain Python with a blake2b feature hash: their
quality, not their speed, is the point), on every set.

    .venv/bin/python bench/neardup_quality.py
    .venv/bin/python bench/neardup_quality.py --quick   # 40 + 60 pages, 1,000 at scale, v1/v2

Writes bench/results/neardup_quality.json (-quick.json with --quick) and prints
Markdown tables with the command that produced them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import math
import platform
import random
import re
import shlex
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
from benchlib import REPO, write_result  # also puts the repository on sys.path

from crawlproject.dedupe.fingerprint import (
    FEATURES_VERSION,
    normalise,
    page_fingerprint,
    simhash64,
    visible_text,
)
from crawlproject.hamming import hamming
from testkit.neardup import (
    EDITS,
    DocPage,
    edited_copies,
    real_pages,
    synthetic_pages,
)
from testkit.testweb import _sentence

K = 3

Fingerprint = Callable[[str], int]  # HTML -> 64-bit SimHash


# --- candidates ------------------------------------------------------------------------


def v1(html: str) -> int:
    """Features version 1: character 4-grams by count of all the visible text."""
    return simhash64(normalise(visible_text(html, keep_boilerplate=True)))


def v2(html: str) -> int:
    return page_fingerprint(html)[0]


_BITS = np.arange(64, dtype=np.uint64)
_WORD = re.compile(r"\w+")
_hashes: dict[str, int] = {}


def _hash(feature: str) -> int:
    h = _hashes.get(feature)
    if h is None:
        h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
        _hashes[feature] = h
    return h


def _simhash(weights: dict[str, float]) -> int:
    """SimHash of weighted features: bit i set iff the weights of the features
    with bit i set outweigh the others."""
    if not weights:
        return 0
    hashes = np.array([_hash(f) for f in weights], dtype=np.uint64)
    signs = ((hashes[:, None] >> _BITS) & np.uint64(1)).astype(np.float64) * 2 - 1
    votes = np.array(list(weights.values())) @ signs
    return sum(1 << i for i in range(64) if votes[i] > 0)


WEIGHTS: dict[str, Callable[[int], float]] = {
    "count": float,
    "sqrt": math.sqrt,
    "set": lambda _: 1.0,
}


def _words(n: int, weight: str, tag: str = "") -> Callable[[str], dict[str, float]]:
    def features(text: str) -> dict[str, float]:
        words = _WORD.findall(text.lower())
        grams = Counter(" ".join(words[i : i + n]) for i in range(max(len(words) - n + 1, 1)))
        return {tag + g: WEIGHTS[weight](c) for g, c in grams.items()}

    return features


def _chars(n: int, weight: str) -> Callable[[str], dict[str, float]]:
    def features(text: str) -> dict[str, float]:
        s = normalise(text)
        grams = Counter(s[i : i + n] for i in range(max(len(s) - n + 1, 1)))
        return {g: WEIGHTS[weight](c) for g, c in grams.items()}

    return features


def prototype(
    *families: Callable[[str], dict[str, float]], boilerplate: bool = False
) -> Fingerprint:
    def fingerprint(html: str) -> int:
        text = visible_text(html, keep_boilerplate=boilerplate)
        weights: dict[str, float] = {}
        for family in families:
            weights.update(family(text))
        return _simhash(weights)

    return fingerprint


CANDIDATES: dict[str, Fingerprint] = {
    "v1 (old): char 4-grams by count, all visible text": v1,
    f"v{FEATURES_VERSION} (new): char 4-grams by count, boilerplate removed": v2,
}
PROTOTYPES: dict[str, Fingerprint] = {
    "word 2-shingles by count, all visible text": prototype(_words(2, "count"), boilerplate=True),
    "word unigrams by count, boilerplate removed": prototype(_words(1, "count")),
    "word unigrams, set (weight 1), boilerplate removed": prototype(_words(1, "set")),
    "word 2-shingles by count, boilerplate removed": prototype(_words(2, "count")),
    "word 2-shingles, set, boilerplate removed": prototype(_words(2, "set")),
    "word 3-shingles by count, boilerplate removed": prototype(_words(3, "count")),
    "word unigrams + 2-shingles by count, boilerplate removed": prototype(
        _words(1, "count", "1:"), _words(2, "count", "2:")
    ),
    "word unigrams (sqrt) + 2-shingles, boilerplate removed": prototype(
        _words(1, "sqrt", "1:"), _words(2, "count", "2:")
    ),
    "char 4-grams, sqrt-capped weights, boilerplate removed": prototype(_chars(4, "sqrt")),
    "char 5-grams by count, boilerplate removed": prototype(_chars(5, "count")),
    "char 6-grams by count, boilerplate removed": prototype(_chars(6, "count")),
}


# --- measuring ---------------------------------------------------------------------------


def distances(fps: list[int]) -> np.ndarray:
    """Hamming distance matrix (uint8), the diagonal set to 64."""
    a = np.array(fps, dtype=np.uint64)
    d = np.bitwise_count(a[:, None] ^ a[None, :]).astype(np.uint8)
    np.fill_diagonal(d, 64)
    return d


def distinct_stats(fps: list[int]) -> dict[str, Any]:
    d = distances(fps)
    upper = d[np.triu_indices(len(fps), k=1)]
    earlier = np.tril(d <= K, k=-1)
    return {
        "pages": len(fps),
        "distinct_pairs": int(upper.size),
        "fp_pairs": int((upper <= K).sum()),
        "fp_rate": float((upper <= K).mean()),
        "pairs_within_5": int((upper <= 5).sum()),
        "pages_dropped": int(earlier.any(axis=1).sum()),
        "min_distance": int(upper.min()),
        "mean_distance": round(float(upper.mean()), 1),
    }


def labelled(
    pages: tuple[DocPage, ...], copies: dict[str, list[DocPage]], fingerprint: Fingerprint
) -> dict[str, Any]:
    start = time.perf_counter()
    fps = [fingerprint(p.html()) for p in pages]
    out = distinct_stats(fps)
    fp = out["fp_pairs"]
    edits, tp_all, n_all = {}, 0, 0
    for name, edited in copies.items():
        dist = [hamming(a, fingerprint(c.html())) for a, c in zip(fps, edited, strict=True)]
        tp = sum(x <= K for x in dist)
        edits[name] = {
            "recall": round(tp / len(dist), 3),
            "precision": round(tp / (tp + fp), 3) if tp + fp else None,
            "mean_distance": round(sum(dist) / len(dist), 2),
        }
        tp_all, n_all = tp_all + tp, n_all + len(dist)
    out["edits"] = edits
    out["recall"] = round(tp_all / n_all, 3)
    out["precision"] = round(tp_all / (tp_all + fp), 4) if tp_all + fp else None
    out["seconds"] = round(time.perf_counter() - start, 1)
    return out


def scale_pages(count: int, seed: int = 20261126) -> list[DocPage]:
    """Distinct short pages of the 300 common words in the site template."""
    rng = random.Random(seed)
    pages = []
    for i in range(count):
        target, size, paragraphs = rng.randint(300, 3000), 0, []
        while size < target:
            para = " ".join(_sentence(rng, rng.randint(8, 20)) for _ in range(rng.randint(2, 5)))
            paragraphs.append(para)
            size += len(para) + 1
        pages.append(DocPage(f"Notes {i}", tuple(paragraphs)))
    return pages


def run(args: argparse.Namespace) -> dict[str, Any]:
    candidates = dict(CANDIDATES)
    if not args.no_prototypes:
        candidates.update(PROTOTYPES)
    corpora = {
        "real": real_pages(args.real),
        "synthetic": synthetic_pages(args.synthetic),
    }
    report: dict[str, Any] = {"k": K, "corpora": {}, "scale": {}}
    for corpus, pages in corpora.items():
        copies = edited_copies(pages)
        report["corpora"][corpus] = {
            "pages": len(pages),
            "mean_html_bytes": round(sum(len(p.html()) for p in pages) / len(pages)),
            "mean_body_words": round(sum(p.body_words() for p in pages) / len(pages)),
            "candidates": {},
        }
        for name, fingerprint in candidates.items():
            result = labelled(pages, copies, fingerprint)
            report["corpora"][corpus]["candidates"][name] = result
            print(f"{corpus} | {name}: recall {result['recall']}, FP pairs "
                  f"{result['fp_pairs']}, {result['seconds']} s", flush=True)  # fmt: skip
    htmls = [p.html() for p in scale_pages(args.scale_pages)]
    for name, fingerprint in candidates.items():
        report["scale"][name] = distinct_stats([fingerprint(h) for h in htmls])
        print(f"scale | {name}: {report['scale'][name]['fp_pairs']} FP pairs", flush=True)
    return report


# --- report ------------------------------------------------------------------------------


def markdown(report: dict[str, Any]) -> str:
    edits = list(EDITS)
    lines = []
    for corpus, data in report["corpora"].items():
        lines += [
            f"**{corpus}**: {data['pages']} distinct pages (mean {data['mean_body_words']} "
            f"words of own text, {data['mean_html_bytes']:,} B of HTML), "
            f"{data['pages'] * (data['pages'] - 1) // 2:,} distinct pairs, "
            f"{data['pages']} copies per edit kind. Recall at k = {report['k']} per edit kind:",
            "",
            "| features | FP pairs (rate) | min / mean distance, distinct | "
            + " | ".join(edits)
            + " | all edits: recall / precision |",
            "|---|---|---|" + "---:|" * len(edits) + "---|",
        ]
        for name, r in data["candidates"].items():
            cells = " | ".join(f"{r['edits'][e]['recall']:.2f}" for e in edits)
            lines.append(
                f"| {name} | {r['fp_pairs']} ({r['fp_rate']:.4f}) | {r['min_distance']} / "
                f"{r['mean_distance']} | {cells} | {r['recall']:.3f} / {r['precision']} |"
            )
        lines.append("")
    lines += [
        f"**scale**: distinct short pages of the 300 common words in the template "
        f"(300-3,000 characters of own text); pages dropped = pages with an earlier "
        f"distinct page within {report['k']} bits:",
        "",
        "| features | pages | FP pairs (rate) | pairs within 5 | pages dropped | "
        "min / mean distance |",
        "|---|---:|---|---:|---:|---|",
    ]
    for name, r in report["scale"].items():
        lines.append(
            f"| {name} | {r['pages']:,} | {r['fp_pairs']} ({r['fp_rate']:.2e}) | "
            f"{r['pairs_within_5']} | {r['pages_dropped']} ({r['pages_dropped'] / r['pages']:.2%})"
            f" | {r['min_distance']} / {r['mean_distance']} |"
        )
    lines += ["", f"- {report['date']}; Python {report['python']}, numpy {report['numpy']}"]
    lines.append(f"- command: `{report['command']}`")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--real", type=int, default=200, help="at most this many real pages")
    parser.add_argument("--synthetic", type=int, default=200)
    parser.add_argument("--scale-pages", type=int, default=4000)
    parser.add_argument("--no-prototypes", action="store_true", help="v1 and v2 only")
    parser.add_argument("--quick", action="store_true", help="40 + 60 pages, 1,000 at scale")
    args = parser.parse_args()
    if args.quick:
        args.real, args.synthetic, args.scale_pages, args.no_prototypes = 40, 60, 1000, True
    command = shlex.join([".venv/bin/python", "bench/neardup_quality.py", *sys.argv[1:]])
    report = run(args)
    report.update(
        {
            "command": command,
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "features_version": FEATURES_VERSION,
        }
    )
    out = write_result(
        "neardup_quality-quick.json" if args.quick else "neardup_quality.json", report
    )
    print(markdown(report))
    print(f"\nwrote {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
