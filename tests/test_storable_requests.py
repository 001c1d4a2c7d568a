"""What Scrapy can serialize, the frontier stores (crawlproject/frontier/store/codec.py,
storable.py): a property test of the round trip against Scrapy's own
Request.to_dict rule, and what is refused, with its kind."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scrapy import Request, Spider
from scrapy.http import FormRequest, JsonRequest

from crawlproject import default_settings
from crawlproject.frontier.store.codec import (
    RequestCodec,
    RequestDecodeError,
    RequestEncodeError,
    stored_form,
    whole_form,
)
from tests.spiders_for_tests.own_spiders import TaggedRequest

CODEC = RequestCodec(default_settings.CRAWL_REQUEST_CLASSES)


class Base(Spider):
    name = "base"

    def parse(self, response: Any) -> None: ...

    def on_error(self, failure: Any) -> None: ...

    def _private(self, response: Any) -> None: ...

    def __mangled(self, response: Any) -> None: ...

    def mangled(self) -> Any:
        return self.__mangled


class Child(Base):
    name = "child"
    alias = Base._private

    def __mangled(self, response: Any) -> None: ...  # another function than Base's

    def child_mangled(self) -> Any:
        return self.__mangled


class Other(Spider):
    name = "other"

    def parse(self, response: Any) -> None: ...


class Boom(Child):
    name = "boom"

    @property
    def boom(self) -> Any:
        raise RuntimeError("a property is never run to find or check a callback")


SPIDER = Child()

CALLBACKS = [
    None,
    SPIDER.parse,
    SPIDER.on_error,
    SPIDER._private,
    SPIDER.mangled(),
    SPIDER.child_mangled(),
]

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
latin1 = st.characters(min_codepoint=0x20, max_codepoint=0xFF)
header_text = st.text(latin1, min_size=1, max_size=12)
header_bytes = header_text.map(lambda t: t.encode("latin-1"))
header_name = st.from_regex(r"X-[A-Za-z][A-Za-z0-9-]{0,10}", fullmatch=True)
path = st.from_regex(r"(/[a-z0-9._~-]{0,8}){0,3}(\?[a-z]=[a-z0-9]{0,5})?", fullmatch=True)


@st.composite
def requests(draw: st.DrawFn) -> Request:
    host = draw(st.sampled_from(["e.com", "a.example:8080", "127.0.0.3:9"]))
    url = f"{draw(st.sampled_from(['http', 'https']))}://{host}{draw(path) or '/'}"
    meta = draw(st.dictionaries(st.text(min_size=1, max_size=10), json_value, max_size=4))
    meta.pop("crawl_lease", None)  # the frontier's own, never stored
    if draw(st.booleans()):
        meta["depth"] = draw(st.integers(min_value=-2, max_value=500))
    if draw(st.booleans()):
        meta["crawl_scope"] = draw(st.sampled_from([host, "other.example", None]))
    kwargs: dict[str, Any] = {
        "meta": meta,
        "callback": draw(st.sampled_from(CALLBACKS)),
        "errback": draw(st.sampled_from([*CALLBACKS[1:4], None])),
        "cb_kwargs": draw(st.dictionaries(st.text(min_size=1, max_size=8), json_value, max_size=3)),
        "flags": draw(st.lists(st.text(max_size=8), max_size=3)),
        "priority": draw(st.integers(min_value=-1000, max_value=1000)),
        "dont_filter": draw(st.booleans()),
        "headers": draw(st.dictionaries(header_name, header_bytes, max_size=3)),
        "cookies": draw(st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=8))),
        "encoding": draw(st.sampled_from(["utf-8", "latin-1", "cp1252"])),
    }
    cls = draw(st.sampled_from([Request, TaggedRequest, FormRequest, JsonRequest]))
    if cls is JsonRequest:
        kwargs["data"] = draw(json_value)
    elif cls is FormRequest and draw(st.booleans()):
        kwargs["formdata"] = {"q": draw(st.text(st.characters(max_codepoint=0x7F), max_size=10))}
    else:
        kwargs["method"] = draw(st.sampled_from(["GET", "POST", "PUT"]))
        kwargs["body"] = draw(st.binary(max_size=40))
    return cls(url, **kwargs)


def scrapy_view(request: Request, spider: Spider) -> dict[str, Any]:
    """Scrapy's own dict of a request (headers as a plain dict)."""
    d = request.to_dict(spider=spider)
    d["headers"] = {k: list(v) for k, v in d["headers"].items()}
    return d


@settings(max_examples=200, deadline=None)
@given(requests())
def test_what_scrapy_serializes_round_trips(request: Request) -> None:
    data = CODEC.encode(request, SPIDER)
    out = CODEC.decode(data, SPIDER)
    assert type(out) is type(request)
    assert scrapy_view(out, SPIDER) == scrapy_view(request, SPIDER)
    # And as a host queue stores it (the URL after its politeness key).
    host = request.url.split("://", 1)[1].split("/", 1)[0]
    assert whole_form(stored_form(data, host), host) == data


def test_private_and_mangled_callbacks_are_stored_by_their_attribute_name() -> None:
    for func, name in [
        (SPIDER._private, "_private"),
        (SPIDER.mangled(), "_Base__mangled"),
        (SPIDER.child_mangled(), "_Child__mangled"),
    ]:
        data = CODEC.encode(Request("http://e.com/", callback=func), SPIDER)
        assert json.loads(data.split(b"\n", 1)[1])["callback"] == name
        assert CODEC.decode(data, SPIDER).callback == func


@pytest.mark.parametrize(
    ("request_", "reason"),
    [
        (Request("http://e.com/", callback=lambda r: None), "callback"),
        (Request("http://e.com/", errback=print), "errback"),
        (Request("http://e.com/", callback=Other().parse), "callback"),  # another spider's
        (Request("http://e.com/", callback=Child.alias), "callback"),  # unbound
        (Request("http://e.com/", meta={"obj": object()}), "meta"),
        (Request("http://e.com/", meta={"s": "\udcff"}), "meta"),  # not UTF-8
        (Request("http://e.com/", cb_kwargs={"when": {1, 2}}), "cb_kwargs"),
        (type("Local", (Request,), {})("http://e.com/"), "request_class"),
    ],
)
def test_what_cannot_be_stored_is_refused_with_its_kind(request_: Request, reason: str) -> None:
    with pytest.raises(RequestEncodeError) as caught:
        CODEC.encode(request_, Boom())
    assert caught.value.reason == reason


@pytest.mark.parametrize(
    "extra",
    [
        {"_class": "os.system"},  # imported, not a Request subclass
        {"_class": "subprocess.Popen"},
        {"_class": "antigravity.Nothing"},  # never imported: importing it would run code
        {"_class": "no.such.module.Request"},
        {"_class": "scrapy.Request; import os"},
        {"callback": "__init__"},  # a dunder is never a callback
        {"callback": "__class__"},
        {"callback": "name"},  # an attribute, not a method
        {"callback": "boom"},  # a property is not run
        {"callback": "no_such_method"},
    ],
)
def test_decode_refuses_what_is_not_a_request_class_or_spider_method(
    extra: dict[str, str],
) -> None:
    data = json.dumps({"url": "http://e.com/", **extra}).encode()
    with pytest.raises(RequestDecodeError):
        CODEC.decode(data, Boom())


def test_request_classes_setting_lets_a_listed_module_be_imported() -> None:
    import sys

    sys.modules.pop("tests.spiders_for_tests.lazy_request", None)
    path = "tests.spiders_for_tests.lazy_request.LazyRequest"
    data = json.dumps({"url": "http://e.com/", "_class": path}).encode()
    with pytest.raises(RequestDecodeError, match="CRAWL_REQUEST_CLASSES"):
        RequestCodec([]).decode(data, None)
    assert "tests.spiders_for_tests.lazy_request" not in sys.modules  # nothing was imported
    for allowed in ([path], ["tests.spiders_for_tests.*"]):
        sys.modules.pop("tests.spiders_for_tests.lazy_request", None)
        out = RequestCodec(allowed).decode(data, None)
        assert type(out).__name__ == "LazyRequest"
