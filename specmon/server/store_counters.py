"""A run's server counters from a Prometheus-compatible store instead of the URL's /metrics:
`specmon --url http://service:8000 --server-metrics-from prometheus:URL --selector '{...}'`.

Behind a load balancer each /metrics scrape is answered by whichever replica the balancer
picks (server/replicas.py names that case); the store scrapes every replica by its own
address, so its series keep them apart. Each sample here is one instant query of the raw
series (`{__name__=~"<the counters specmon reads>", <selector>}`: every replica's and
engine's series, by their labels), written back as Prometheus text and read by the same
parser as a scrape (server/scrape.py `parse_counters`), so the window is the same per-series
difference: a replica that appears counts from zero, one that restarted from its new value,
and the counts are exact integers that reconcile with the run's per-request totals
(`increase()` would extrapolate). Ray Serve's `ray_vllm_` names are read as vLLM's.

The store holds what its last scrape saw: the window's start and end wait (bounded) until
every replica's newest sample is at least as new as the moment asked, so the counters of the
last responses are in (a few of the store's scrape intervals; the clocks of this machine
and the store's are taken to agree). A query is bounded in time and size
(server/promql.py); no live verdict is judged (the store lags by a scrape interval).
"""

from __future__ import annotations

import asyncio
import time

from specmon.errors import UserError
from specmon.server.health import COUNTERS, GAUGES
from specmon.server.promql import (
    FleetQuery,
    QueryClient,
    QueryFailed,
    Sample,
    api_url,
    check_selector,
    scrape_interval,
)
from specmon.server.scrape import (
    ENGINE_COUNTERS,
    ENGINE_GAUGES,
    CounterSample,
    MetricsUnavailable,
    ServerCounterPoller,
    ServerCounterView,
    parse_counters,
)

SCHEME = "prometheus:"
RAY_PREFIX, VLLM_PREFIX = "ray_vllm_", "vllm:"
FRESH_SCRAPES = 3  # the window's ends wait up to this many of the store's scrape intervals
FRESH_DEFAULT_S = 60.0  # ... or this long when its interval is not known yet
FRESH_POLL_S = 0.25


def store_url(value: str) -> str:
    """`prometheus:http://prom:9090` -> the store's base URL; a UserError naming the form."""
    text = value.strip()
    if not text.startswith(SCHEME):
        raise UserError(
            f"--server-metrics-from {value!r}: give prometheus:URL "
            "(e.g. prometheus:http://127.0.0.1:9090)"
        )
    base = text[len(SCHEME) :]
    try:
        api_url(base)
    except UserError:
        raise UserError(
            f"--server-metrics-from {value!r}: not an http(s) URL after prometheus: "
            "(e.g. prometheus:http://127.0.0.1:9090)"
        ) from None
    return base


def series_names() -> list[str]:
    """Every series name parse_counters reads, as a store holds it (counters with `_total`),
    in vLLM's and Ray Serve's spellings."""
    names: set[str] = set(GAUGES) | set(COUNTERS) | set(ENGINE_GAUGES)
    for base in ENGINE_COUNTERS:
        names.update((base, base + "_total"))
    names.update(
        RAY_PREFIX + n[len(VLLM_PREFIX) :] for n in list(names) if n.startswith(VLLM_PREFIX)
    )
    return sorted(names)


def page_of(samples: list[Sample]) -> bytes:
    """The answer's series as Prometheus text (Ray Serve's names as vLLM's), for
    parse_counters."""
    lines = []
    for sample in samples:
        name = sample.labels.get("__name__", "")
        if name.startswith(RAY_PREFIX):
            name = VLLM_PREFIX + name[len(RAY_PREFIX) :]
        labels = ",".join(
            f'{key}="{_escaped(value)}"'
            for key, value in sorted(sample.labels.items())
            if key != "__name__"
        )
        lines.append(f"{name}{{{labels}}} {sample.value!r}")
    return "\n".join(lines).encode()


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class StoreCounterPoller(ServerCounterPoller):
    """A ServerCounterPoller whose samples are instant queries of a store."""

    def __init__(self, store: str, selector: str, interval_s: float = 1.0) -> None:
        super().__init__(store, interval_s)
        self.query = FleetQuery(check_selector(selector))
        self.api = api_url(store)
        self.url = f"{SCHEME}{self.api} {{{self.query.selector}}}"
        self._view = ServerCounterView(self.url, None, None, None, 0, None)
        self.wait_s = FRESH_DEFAULT_S  # until start() has read the store's scrape interval
        self._selector = self.query.series(series_names())

    def _queries(self) -> QueryClient:
        assert self._client is not None
        return QueryClient(self.api, client=self._client)

    async def _fetch(self) -> CounterSample:
        try:
            samples = await self._queries().query(self._selector, time.time())
        except QueryFailed as exc:
            raise MetricsUnavailable(str(exc)) from None
        if not samples:
            raise MetricsUnavailable(
                f"no series match {{{self.query.selector}}} at {self.api} "
                f"(looked for vLLM's spec-decode counters and health series)"
            )
        return parse_counters(page_of(samples))

    async def start(self) -> None:
        await super().start()
        if self._client is None or self._view.error is not None:
            return
        try:
            scrape_s = await scrape_interval(self._queries(), self.query, time.time())
        except QueryFailed:
            scrape_s = None
        if scrape_s is not None:
            self.wait_s = FRESH_SCRAPES * scrape_s + 2.0

    async def rebaseline(self) -> ServerCounterView:
        """The new window starts with a sample the store took after now (the warmup's
        counters in)."""
        await self._wait_fresh(time.time())
        return await super().rebaseline()

    async def stop(self, settle_s: float = 0.0) -> ServerCounterView:
        """The last sample once the store has scraped every replica after now."""
        await self._cancel_polling()
        sampled = self._client is not None and self._view.last is not None
        why = await self._wait_fresh(time.time()) if sampled else None
        view = await super().stop(0.0)
        if why is not None:  # the window ends at the store's newest samples: say so
            self._failed(MetricsUnavailable(why))
            view = self._view
        return view

    async def _wait_fresh(self, since: float) -> str | None:
        """Until every drafts series' newest sample is from `since` or later (bounded by
        wait_s); why not, or None."""
        promql = f"min(timestamp({self.query.counter('drafts')}))"
        deadline = time.monotonic() + self.wait_s
        newest: float | None = None
        while True:
            try:
                answer = await self._queries().query(promql, time.time())
            except QueryFailed as exc:
                return str(exc)
            newest = answer[0].value if answer else None
            if newest is not None and newest >= since:
                return None
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(FRESH_POLL_S)
        behind = (
            "no sample"
            if newest is None
            else f"one replica's newest sample is {since - newest:.1f} s older"
        )
        return (
            f"the store had not scraped every replica after the window's end within "
            f"{self.wait_s:.0f} s ({behind}): the window ends at its newest samples"
        )
