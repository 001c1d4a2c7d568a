"""The sites docs/extending.md's examples crawl, as ``special`` routes of a
:class:`~testkit.testweb.TestWeb` (exact paths, served before its own pages):

* :func:`shop_routes`: ``https://shop.example/`` of the spider example: a home
  page linking categories (``a.category``), each category a chain of listing
  pages (``a.product`` links, ``li.next a`` to the next page), and product
  pages (``h1`` name, ``p.price``). One listing also links a product that
  answers 404, which a spider as Scrapy's tutorial writes never sees;
* :func:`json_api_routes`: ``https://example.com/api/`` of the content-type
  processor example: JSON documents with a ``name`` and ``links``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

Route = dict[str, object]

CATEGORIES = {"Books": 3, "Games": 2}  # name -> listing pages
PRODUCTS_PER_LISTING = 4
MISSING_PRODUCT = "/books/sold-out.html"  # linked from the first Books listing: 404


@dataclass(frozen=True, slots=True)
class Product:
    path: str
    name: str
    price: str
    category: str


def products() -> list[Product]:
    """Every product the shop lists (the 404 one is not a product)."""
    found = []
    for category, pages in CATEGORIES.items():
        slug = category.lower()
        for page in range(1, pages + 1):
            for i in range(PRODUCTS_PER_LISTING):
                n = (page - 1) * PRODUCTS_PER_LISTING + i + 1
                found.append(
                    Product(f"/{slug}/item-{n}.html", f"{category} item {n}", f"{n}.99", category)
                )
    return found


def _html(body: str) -> Route:
    return {"body": f"<html><body>{body}</body></html>", "content_type": "text/html"}


def _listing_path(slug: str, page: int) -> str:
    return f"/{slug}/" if page == 1 else f"/{slug}/page-{page}.html"


def shop_routes() -> dict[str, Route]:
    routes: dict[str, Route] = {}
    links = "".join(
        f'<a class="category" href="{_listing_path(c.lower(), 1)}">{c}</a>' for c in CATEGORIES
    )
    routes["/"] = _html(f"<h1>The shop</h1><nav>{links}</nav>")
    listed: dict[tuple[str, int], list[Product]] = {}
    for product in products():
        n = int(product.path.rsplit("-", 1)[1].split(".")[0])
        listed.setdefault((product.category, (n - 1) // PRODUCTS_PER_LISTING + 1), []).append(
            product
        )
        routes[product.path] = _html(f'<h1>{product.name}</h1><p class="price">{product.price}</p>')
    for category, pages in CATEGORIES.items():
        slug = category.lower()
        for page in range(1, pages + 1):
            items = "".join(
                f'<li><a class="product" href="{p.path}">{p.name}</a></li>'
                for p in listed[category, page]
            )
            if (slug, page) == ("books", 1):
                items += f'<li><a class="product" href="{MISSING_PRODUCT}">Sold out</a></li>'
            nxt = (
                f'<li class="next"><a href="{_listing_path(slug, page + 1)}">Next</a></li>'
                if page < pages
                else ""
            )
            routes[_listing_path(slug, page)] = _html(
                f"<h1>{category}, page {page}</h1><ul>{items}</ul><ul>{nxt}</ul>"
            )
    routes[MISSING_PRODUCT] = {**_html("<h1>Not found</h1>"), "status": 404}
    return routes


# path -> (name, links as written in the document)
JSON_DOCUMENTS: dict[str, tuple[str, list[str]]] = {
    "/api/index.json": ("Catalog API", ["/api/books.json", "games.json"]),
    "/api/books.json": ("Books", ["https://example.com/api/index.json"]),
    "/api/games.json": ("Games", []),
}


def json_api_routes() -> dict[str, Route]:
    """The JSON documents; the test web serves the guide's
    ``https://example.com`` in absolute links as its own origin (``{base}``)."""
    return {
        path: {
            "body": json.dumps(
                {"name": name, "links": [u.replace("https://example.com", "{base}") for u in links]}
            ),
            "content_type": "application/json",
        }
        for path, (name, links) in JSON_DOCUMENTS.items()
    }
