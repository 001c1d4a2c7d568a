"""Defaults of every ``CRAWL_*`` setting, declared once, grouped by concern.

Each ``CRAWL_*`` setting is declared, with the comment that explains it, in
exactly one module of this package: ``frontier`` (Redis, the crawl,
politeness per host, leases, the seen set, crawl order), ``urls`` (traps,
budgets, URL rules, links per page), ``robots``, ``dedupe``, ``network``
(DNS, the address guard, politeness per server), ``store``, ``recrawl``,
``status``, ``content`` and ``render``. This module gathers them: every setting's
default is ``crawlproject.default_settings.CRAWL_...``.

Components read their settings through a dataclass (``FrontierConfig`` and
friends, :func:`crawlproject.setting_values.read_config`) that takes its
fallbacks from here, and the project settings (``crawlproject.settings``)
import them, so a value changes in one place. Names are fixed: scripts and
operators depend on them. tests/test_docs.py checks that each is declared in
one module only and documented on docs/settings.md.
"""

from crawlproject.default_settings.content import *  # noqa: F403
from crawlproject.default_settings.dedupe import *  # noqa: F403
from crawlproject.default_settings.frontier import *  # noqa: F403
from crawlproject.default_settings.network import *  # noqa: F403
from crawlproject.default_settings.recrawl import *  # noqa: F403
from crawlproject.default_settings.render import *  # noqa: F403
from crawlproject.default_settings.robots import *  # noqa: F403
from crawlproject.default_settings.status import *  # noqa: F403
from crawlproject.default_settings.store import *  # noqa: F403
from crawlproject.default_settings.urls import *  # noqa: F403

# `from crawlproject.default_settings import *` (crawlproject/settings.py)
# copies the settings only, not the submodules' names.
__all__ = sorted(name for name in dict(globals()) if name.startswith("CRAWL_"))
