"""What a stored request may name, and how it is found again: spider methods
(callbacks, errbacks) and Request classes (crawlproject/frontier/store/codec.py's
rule, the same as Scrapy's ``request_to_dict`` / ``request_from_dict``).

Whoever can write to Redis can queue URLs, not run code on workers: a name
read back resolves only to a bound method of the spider (never a dunder) or
to a ``scrapy.Request`` subclass from a module this worker imported already
or listed in ``CRAWL_REQUEST_CLASSES``.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Iterable
from types import FunctionType
from typing import Any

from scrapy import Request, Spider


class RequestDecodeError(ValueError):
    """A stored request could not be turned back into a Request."""


class RequestEncodeError(ValueError):
    """A request the frontier cannot store: ``reason`` is its kind
    (``callback``, ``errback``, ``request_class``, or the field JSON cannot
    carry: ``meta``, ``cb_kwargs``, ``cookies`` ...)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class RequestClasses:
    """The Request subclasses a stored ``_class`` may name.

    ``allowed``: ``CRAWL_REQUEST_CLASSES``, class paths or ``package.*`` (any
    class in that package or below): the only modules a stored request may
    make a worker import. A class of a module the worker imported already
    (the spider's own module, Scrapy, its plugins) needs no entry."""

    def __init__(self, allowed: Iterable[str]) -> None:
        entries = [c.strip() for c in allowed if c.strip()]
        self._paths = frozenset(c for c in entries if not c.endswith(".*"))
        self._packages = tuple(c[:-1] for c in entries if c.endswith(".*"))
        self._found: dict[str, type[Request]] = {}

    def resolve(self, path: object) -> type[Request]:
        """The class ``path`` names; RequestDecodeError if it may not be used."""
        if not isinstance(path, str):
            raise RequestDecodeError(f"request class {path!r} is not a class path")
        found = self._found.get(path)
        if found is not None:
            return found
        module_name, _, name = path.rpartition(".")
        if not module_name or not all(part.isidentifier() for part in path.split(".")):
            raise RequestDecodeError(f"request class {path!r} is not a class path")
        module = sys.modules.get(module_name)
        if module is None:
            if path not in self._paths and not (module_name + ".").startswith(self._packages):
                raise RequestDecodeError(
                    f"request class {path!r}: its module is not loaded by this worker "
                    "and not listed in CRAWL_REQUEST_CLASSES"
                )
            try:
                module = importlib.import_module(module_name)
            except Exception as exc:  # whatever the import raised: not usable
                raise RequestDecodeError(
                    f"request class {path!r} cannot be imported: {exc}"
                ) from None
        cls = getattr(module, name, None)
        if not (isinstance(cls, type) and issubclass(cls, Request)):
            raise RequestDecodeError(f"request class {path!r} is not a scrapy.Request subclass")
        self._found[path] = cls
        return cls


class SpiderMethods:
    """The names under which spiders hold the functions used as callbacks
    (remembered per spider class and function)."""

    def __init__(self) -> None:
        self._names: dict[tuple[type, Any], str] = {}

    def name_of(self, spider: Spider | None, func: Any, field: str) -> str | None:
        """The name under which ``spider`` holds method ``func`` (Scrapy's
        ``_find_method`` rule: the same function under any name, private ones
        too); RequestEncodeError(reason ``field``) when it holds none."""
        if func is None or isinstance(func, str):
            return func
        target = getattr(func, "__func__", None)
        if spider is None or target is None:
            raise RequestEncodeError(f"{field} {func!r} is not a method of the spider", field)
        key = (type(spider), target)
        name = self._names.get(key)
        if name is None:
            name = _find_method_name(spider, target)
            if name is None:
                raise RequestEncodeError(
                    f"{field} {func!r} is not a method of the spider {spider!r}", field
                )
            if len(self._names) < 10_000:  # bounded: functions, not requests
                self._names[key] = name
        return name


def spider_method(spider: Spider, name: object, field: str = "callback") -> Any:
    """``spider``'s method ``name``: private names accepted; dunders and
    anything that is not a bound method refused (RequestDecodeError)."""
    if not isinstance(name, str) or not name or (name.startswith("__") and name.endswith("__")):
        raise RequestDecodeError(f"{field} {name!r} is not a spider method name")
    if not _method_like(inspect.getattr_static(spider, name, None)):
        raise RequestDecodeError(f"{field} {name!r} is not a method of spider {spider.name!r}")
    method = getattr(spider, name, None)
    if not inspect.ismethod(method):
        raise RequestDecodeError(f"{field} {name!r} is not a method of spider {spider.name!r}")
    return method


def _method_like(raw: object) -> bool:
    """Whether an attribute, read without running it (no property runs), is
    a function, a class method or a bound method."""
    return isinstance(raw, (FunctionType, classmethod)) or inspect.ismethod(raw)


def _find_method_name(spider: Spider, target: Any) -> str | None:
    """The attribute of ``spider`` that gives a bound method of ``target``: its
    own name, its name-mangled one (``__x`` in class C: ``_C__x``), or any
    alias in the class hierarchy or on the instance."""
    own = getattr(target, "__name__", "")
    names = [own]
    if own.startswith("__") and not own.endswith("__"):
        names += [f"_{klass.__name__.lstrip('_')}{own}" for klass in type(spider).__mro__]
    names += [n for klass in type(spider).__mro__ for n in vars(klass)]
    names += list(vars(spider))
    for name in names:
        if name.startswith("__") and name.endswith("__"):
            continue
        if not _method_like(inspect.getattr_static(spider, name, None)):
            continue
        bound = getattr(spider, name, None)
        if inspect.ismethod(bound) and bound.__func__ is target:
            return name
    return None
