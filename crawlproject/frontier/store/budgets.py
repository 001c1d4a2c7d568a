"""URLs waiting over their host's budget, and releasing them. Part of
:class:`crawlproject.frontier.store.redis_frontier.RedisFrontier`, which supplies the
connection, the keys, the budget and the script runner.

A host's budget (add.lua, lua/_budget.lua's ``host_budget``) holds its new URLs
past ``CRAWL_HOST_BUDGET`` x votes in its overflow list ``ob:<host>``; the
shard's ``tr`` hash counts them (``host \\t budget``). They go into the host's
queue when votes raise its budget (add.lua), and here: by the operator's
command (``crawlproject budget --release``), and at a worker's start or when
the crawl's scope grows (:meth:`OverBudget.sweep_budgets`): a raised
``CRAWL_HOST_BUDGET``, a host that became a seed's or one of the crawl's
scope, lets in what now fits, so a finished crawl leaves none behind.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

from crawlproject.frontier.store.frontier_part import FrontierPart
from crawlproject.frontier.store.operation_values import HostBudget
from crawlproject.frontier.store.script_replies import reply_text

RELEASE_BATCH = 1000  # URLs per budget_release call: bounds one script's run time
BUDGET_REASON = "\tbudget"  # a `tr` field's suffix: URLs over the host's budget

# How budget_release.lua treats a host: room in its budget, in the crawl's
# scope (all), or all by the operator's word.
BY_BUDGET, IN_SCOPE, ALL = "b", "s", "a"


def waiting_over_budget(counters: dict[str, int]) -> int:
    """URLs waiting in their hosts' overflows now, from the frontier counters:
    every URL held over budget (``over_budget``) leaves its overflow only
    through a counted release (``budget_released``: votes, a raised budget,
    the command)."""
    return counters.get("over_budget", 0) - counters.get("budget_released", 0)


class OverBudget(FrontierPart):
    """The frontier's operations on URLs over budget (a part of RedisFrontier)."""

    budget: HostBudget

    async def over_budget_by_host(self) -> dict[str, int]:
        """Host (politeness key) -> URLs waiting over its budget, all shards."""
        out: dict[str, int] = {}
        for shard in range(self.keys.shards):
            for field_, value in (await self.redis.hgetall(self.keys.trap_reasons(shard))).items():
                name = reply_text(field_)
                if name.endswith(BUDGET_REASON) and int(value) > 0:
                    out[name[: -len(BUDGET_REASON)]] = int(value)
        return out

    async def release_over_budget(self, hosts: Iterable[str] | None = None, how: str = ALL) -> int:
        """Moves the URLs waiting over budget of ``hosts`` (None: every host
        with some) into their queues, each host in order; ``how``: ALL, or
        BY_BUDGET (what the budget has room for). Returns how many left the
        overflows."""
        if hosts is None:
            hosts = await self.over_budget_by_host()
        return await self._release({host: how for host in hosts})

    async def sweep_budgets(self, in_scope: Callable[[str], bool]) -> int:
        """Lets in what the hosts' budgets now have room for: all of a host
        ``in_scope`` says the operator put in the crawl's scope (it is marked
        so), and of a seed's; what a raised CRAWL_HOST_BUDGET makes room for.
        Costs a read of each shard's ``tr`` and a call per shard with hosts
        waiting; nothing per page. Returns how many left the overflows."""
        waiting = await self.over_budget_by_host()
        return await self._release(
            {host: IN_SCOPE if in_scope(host) else BY_BUDGET for host in waiting}
        )

    async def _release(self, hows: dict[str, str]) -> int:
        by_shard: dict[int, list[str]] = defaultdict(list)
        for host, how in hows.items():
            by_shard[self.keys.shard_of(host)] += [host, how]
        total = 0
        for shard, args in by_shard.items():
            while True:
                taken, _ = await self._run(
                    "budget_release",
                    shard,
                    self.default_delay_ms,
                    self.default_concurrency,
                    self.budget.base,
                    self.budget.seed_votes,
                    RELEASE_BATCH,
                    *args,
                )
                total += int(taken)
                if int(taken) < RELEASE_BATCH:
                    break
        return total
