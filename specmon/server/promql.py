"""A fleet's server counters from a Prometheus-compatible query API (`/api/v1/query`).

Prometheus, Thanos Query and VictoriaMetrics all answer instant queries on
`GET /api/v1/query?query=Q&time=T`; specmon asks every query of one tick at the same
evaluation time `T`, so the figures of a tick describe one instant (docs/fleet.md has the
exact PromQL, to paste into Grafana).

The fleet's rules (vLLM's `SpecDecodingProm` docstring; docs/fleet.md):
* counters are summed before any ratio: per replica `sum by (BY)(increase(C[R]))`, summed
  over replicas for the fleet (the sum over `engine` under data parallelism comes with the
  `sum by`), then acceptance = accepted / draft tokens, AL = 1 + accepted / drafts, per
  position = P_i / drafts;
* counter resets are the query functions' business (`increase`/`rate` never go negative);
* both spellings are read: `vllm:spec_decode_*` and Ray Serve's `ray_vllm_spec_decode_*`
  (one regex on `__name__`); which one was found is reported;
* SGLang's counter (verify calls) sums like the others; its acceptance gauges are last
  values, so they are shown per replica and never summed or averaged into the fleet.

A missing series is missing, never zero: a replica without a figure has None for it.
Every query is bounded in time (QUERY_TIMEOUT_S) and size (MAX_RESPONSE_BYTES), as a
/metrics scrape is (server/scrape.py); every failure is a `QueryFailed` with one line.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from specmon.errors import UserError
from specmon.server.httpx_lean import httpx
from specmon.server.scrape import tls_context

QUERY_TIMEOUT_S = 5.0  # one query, connect to last byte
MAX_RESPONSE_BYTES = 16 * 2**20  # a 1000-pod fleet's per-position answer is well under 1 MiB
OFFSET_PROBE_S = 120.0  # an empty answer: is there data this far back (a latency offset)?
RANGES_PER_SCRAPE = 4  # a rate's range spans at least this many scrapes (Prometheus' advice)
SCRAPE_PROBE_S = 60.0  # the store's scrape interval: samples of the drafts counter over this
STALE_AFTER_S = 15.0  # the newest sample older than this (and 3 intervals): say so

# field -> the counter's name after the spelling prefix (vLLM's exposed names carry _total)
VLLM_COUNTERS = {
    "drafts": "spec_decode_num_drafts_total",
    "draft_tokens": "spec_decode_num_draft_tokens_total",
    "accepted": "spec_decode_num_accepted_tokens_total",
    "per_pos": "spec_decode_num_accepted_tokens_per_pos_total",
    "generation_tokens": "generation_tokens_total",
    "preemptions": "num_preemptions_total",
}
VLLM_GAUGES = {  # field -> (name after the prefix, how replicas' engines combine)
    "running": ("num_requests_running", "sum"),
    "waiting": ("num_requests_waiting", "sum"),
    "kv_cache_usage": ("kv_cache_usage_perc", "avg"),
}
SPELLINGS = ("vllm:", "ray_vllm_")  # vLLM's own, Ray Serve's (neutree PR #565)
SGLANG_COUNTERS = {"drafts": "sglang:spec_verify_calls_total"}
SGLANG_GAUGES = ("sglang:spec_accept_length", "sglang:spec_accept_rate")
SPEC_FIELDS = ("drafts", "draft_tokens", "accepted")


class QueryFailed(Exception):
    """A query that gave no answer (unreachable, slow, oversized, not the query API)."""


class QueryError(QueryFailed):
    """The store answered with an error: a bad selector or query (a user error)."""


def api_url(url: str) -> str:
    """`http://prom:9090` (or a path prefix, e.g. VictoriaMetrics cluster's
    `/select/0/prometheus`) -> its `/api/v1/query`."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UserError(f"--prometheus {url!r}: not an http(s) URL (e.g. http://127.0.0.1:9090)")
    path = parts.path.rstrip("/")
    if not path.endswith("/api/v1/query"):
        path += "/api/v1/query"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


_MATCHER = re.compile(r'\s*[A-Za-z_][A-Za-z0-9_]*\s*(=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*')
_LABEL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_selector(selector: str) -> str:
    """The inside of `{...}` (label matchers only); a UserError naming the form otherwise."""
    text = selector.strip()
    if not text:
        return ""
    if not (text.startswith("{") and text.endswith("}")):
        raise UserError(
            f"--selector {selector!r}: give label matchers in braces, e.g. '{{job=\"vllm\"}}'"
        )
    inner = text[1:-1].strip().rstrip(",")
    for part in _split_matchers(inner):
        if not _MATCHER.fullmatch(part):
            raise UserError(f'--selector {selector!r}: {part.strip()!r} is not label="value"')
    return inner


def _split_matchers(inner: str) -> list[str]:
    """Commas outside quotes split matchers."""
    parts, current, quoted, escaped = [], "", False, False
    for ch in inner:
        if ch == "," and not quoted:
            parts.append(current)
            current = ""
            continue
        current += ch
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == '"':
            quoted = not quoted
    if current.strip():
        parts.append(current)
    return parts


def check_label(label: str) -> str:
    if not _LABEL.match(label):
        raise UserError(f"--by {label!r}: not a label name (e.g. instance, pod, model_name)")
    return label


@dataclass(frozen=True)
class FleetQuery:
    """The PromQL of one fleet: selector (inside the braces) and the per-replica label."""

    selector: str = ""
    by: str = "instance"

    def series(self, names: list[str]) -> str:
        """`{__name__=~"a|b", <selector>}`: every spelling of a series in one selector."""
        alternatives = "|".join(re.escape(n) for n in names)
        rest = f", {self.selector}" if self.selector else ""
        return f'{{__name__=~"{alternatives}"{rest}}}'

    def counter(self, fld: str) -> str:
        names = [prefix + VLLM_COUNTERS[fld] for prefix in SPELLINGS]
        if fld in SGLANG_COUNTERS:
            names.append(SGLANG_COUNTERS[fld])
        return self.series(names)

    def increase(self, fld: str, range_s: float) -> str:
        extra = ", position" if fld == "per_pos" else ""
        return f"sum by ({self.by}{extra}) (increase({self.counter(fld)}[{_range(range_s)}]))"

    def rate(self, fld: str, range_s: float) -> str:
        return f"sum by ({self.by}) (rate({self.counter(fld)}[{_range(range_s)}]))"

    def gauge(self, fld: str) -> str:
        name, how = VLLM_GAUGES[fld]
        return f"{how} by ({self.by}) ({self.series([p + name for p in SPELLINGS])})"

    def sglang_gauge(self, name: str) -> str:
        return f"avg by ({self.by}) ({self.series([name])})"

    def names_found(self) -> str:
        """Which spelling answers: the drafts counter's names present."""
        return f"count by ({self.by}, __name__) ({self.counter('drafts')})"

    def samples_per_series(self) -> str:
        """Samples per drafts series over SCRAPE_PROBE_S: the store's scrape interval."""
        probe = _range(SCRAPE_PROBE_S)
        return f"max(count_over_time({self.counter('drafts')}[{probe}]))"

    def newest(self) -> str:
        """The newest sample's time per replica (a latency offset or a stopped scrape)."""
        return f"max by ({self.by}) (timestamp({self.counter('drafts')}))"


def _range(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"


@dataclass(frozen=True)
class Sample:
    labels: dict[str, str]
    value: float


def parse_answer(body: bytes) -> list[Sample]:
    """The vector of an instant query's JSON answer; QueryError for the store's error."""
    try:
        doc = json.loads(body)
    except ValueError:
        raise QueryFailed("the answer is not JSON (not a Prometheus query API?)") from None
    if not isinstance(doc, dict):
        raise QueryFailed("the answer is not a query API object")
    if doc.get("status") != "success":
        raise QueryError(f"query error: {doc.get('errorType', '?')}: {doc.get('error', '?')}")
    data = doc.get("data") or {}
    if data.get("resultType") != "vector":
        raise QueryFailed(f"expected a vector, got {data.get('resultType')!r}")
    out = []
    for item in data.get("result") or []:
        try:
            value = float(item["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue  # a malformed sample is missing, never zero
        if value == value and abs(value) != float("inf"):  # NaN / Inf: missing
            out.append(Sample(dict(item.get("metric") or {}), value))
    return out


class QueryClient:
    """Bounded instant queries against one store (an httpx client of its own)."""

    def __init__(
        self, url: str, timeout_s: float = QUERY_TIMEOUT_S, client: httpx.AsyncClient | None = None
    ) -> None:
        self.url = api_url(url)
        self.timeout_s = timeout_s
        self._client = client  # a caller's client (it closes it), else opened by `async with`

    async def __aenter__(self) -> QueryClient:
        self._client = httpx.AsyncClient(timeout=self.timeout_s, verify=tls_context())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def query(self, promql: str, at: float) -> list[Sample]:
        assert self._client is not None, "QueryClient used outside `async with`"
        try:
            async with asyncio.timeout(self.timeout_s):
                body = await self._read(promql, at)
        except TimeoutError:
            raise QueryFailed(f"no answer from {self.url} within {self.timeout_s:g} s") from None
        except httpx.HTTPError as exc:
            raise QueryFailed(f"{self.url}: {type(exc).__name__}: {exc or 'no answer'}") from None
        return parse_answer(body)

    async def _read(self, promql: str, at: float) -> bytes:
        assert self._client is not None
        params = {"query": promql, "time": f"{at:.3f}"}
        async with self._client.stream("GET", self.url, params=params) as response:
            chunks, size = [], 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > MAX_RESPONSE_BYTES:
                    raise QueryFailed(
                        f"{self.url}: answer larger than {MAX_RESPONSE_BYTES // 2**20} MiB"
                    )
                chunks.append(chunk)
        body = b"".join(chunks)
        if response.status_code >= 400 and not body.startswith(b"{"):
            raise QueryFailed(f"{self.url}: HTTP {response.status_code}")
        return body


@dataclass
class Counts:
    """Counter increases of one replica (or the fleet) over one range; None: no series."""

    drafts: float | None = None
    draft_tokens: float | None = None
    accepted: float | None = None
    per_pos: dict[int, float] = field(default_factory=dict)

    def add(self, other: Counts) -> None:
        for name in SPEC_FIELDS:
            mine, theirs = getattr(self, name), getattr(other, name)
            if theirs is not None:
                setattr(self, name, (mine or 0.0) + theirs)
        for pos, value in other.per_pos.items():
            self.per_pos[pos] = self.per_pos.get(pos, 0.0) + value


@dataclass
class ReplicaFigures:
    """One replica's (or the fleet's) figures at one tick."""

    interval: Counts = field(default_factory=Counts)
    window: Counts = field(default_factory=Counts)
    generation_tokens_per_s: float | None = None
    preemptions_per_s: float | None = None
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None
    gauges: dict[str, float] = field(default_factory=dict)  # SGLang's, last values
    spellings: list[str] = field(default_factory=list)  # the drafts counter names found
    newest_s: float | None = None  # the newest sample's time (Unix s)


@dataclass
class FleetTick:
    """Every replica's figures at `at` (Unix s), the fleet's, and what was found."""

    at: float
    replicas: dict[str, ReplicaFigures]
    fleet: ReplicaFigures
    spellings: list[str]  # the drafts counter names that answered


async def fleet_tick(
    client: QueryClient, query: FleetQuery, at: float, interval_s: float, window_s: float
) -> FleetTick:
    """All queries of one tick, at one evaluation time, concurrently."""
    plan: list[tuple[str, str, str]] = []  # (kind, field, promql)
    for fld in (*SPEC_FIELDS, "per_pos"):
        plan.append(("interval", fld, query.increase(fld, interval_s)))
        plan.append(("window", fld, query.increase(fld, window_s)))
    plan += [("rate", f, query.rate(f, interval_s)) for f in ("generation_tokens", "preemptions")]
    plan += [("gauge", f, query.gauge(f)) for f in VLLM_GAUGES]
    plan += [("sglang", name, query.sglang_gauge(name)) for name in SGLANG_GAUGES]
    plan += [("names", "", query.names_found()), ("newest", "", query.newest())]
    answers = await asyncio.gather(*(client.query(q, at) for _, _, q in plan))
    replicas: dict[str, ReplicaFigures] = {}
    for (kind, fld, _), samples in zip(plan, answers):
        for sample in samples:
            key = sample.labels.get(query.by) or f"(no {query.by})"
            _store(replicas.setdefault(key, ReplicaFigures()), kind, fld, sample)
    spellings = sorted({name for fig in replicas.values() for name in fig.spellings})
    return FleetTick(at, dict(sorted(replicas.items())), fleet_of(replicas.values()), spellings)


def _store(fig: ReplicaFigures, kind: str, fld: str, sample: Sample) -> None:
    if kind in ("interval", "window"):
        counts = fig.interval if kind == "interval" else fig.window
        if fld == "per_pos":
            pos = sample.labels.get("position", "")
            if pos.isdigit():
                counts.per_pos[int(pos)] = sample.value
        else:
            setattr(counts, fld, sample.value)
    elif kind == "rate":
        name = "generation_tokens_per_s" if fld == "generation_tokens" else "preemptions_per_s"
        setattr(fig, name, sample.value)
    elif kind == "gauge":
        setattr(fig, fld, sample.value)
    elif kind == "sglang":
        fig.gauges[fld] = sample.value
    elif kind == "names":
        fig.spellings.append(sample.labels.get("__name__", "?"))
    elif kind == "newest":
        fig.newest_s = sample.value


def fleet_of(replicas: Any) -> ReplicaFigures:
    """Counters and rates summed, running / waiting summed, KV usage the replicas' mean;
    SGLang's gauges are last values and stay per replica. A figure no replica has stays None."""
    fleet = ReplicaFigures()
    kv: list[float] = []
    for fig in replicas:
        fleet.interval.add(fig.interval)
        fleet.window.add(fig.window)
        for name in ("generation_tokens_per_s", "preemptions_per_s", "running", "waiting"):
            value = getattr(fig, name)
            if value is not None:
                setattr(fleet, name, (getattr(fleet, name) or 0.0) + value)
        if fig.kv_cache_usage is not None:
            kv.append(fig.kv_cache_usage)
        if fig.newest_s is not None:
            fleet.newest_s = max(fleet.newest_s or 0.0, fig.newest_s)
    fleet.kv_cache_usage = sum(kv) / len(kv) if kv else None
    return fleet


async def scrape_interval(client: QueryClient, query: FleetQuery, at: float) -> float | None:
    """The store's scrape interval as seen in its data (None: too few samples yet)."""
    answer = await client.query(query.samples_per_series(), at)
    if not answer or answer[0].value < 3:
        return None
    return SCRAPE_PROBE_S / answer[0].value


def rate_range(interval_s: float, scrape_s: float | None) -> float:
    """The interval figures' range: the interval, or RANGES_PER_SCRAPE scrapes if longer (a
    range shorter than two scrapes holds fewer than two samples: no increase at all)."""
    return max(interval_s, RANGES_PER_SCRAPE * (scrape_s or 0.0))


async def explain_empty(client: QueryClient, query: FleetQuery, at: float) -> str:
    """Why a tick found no series: a latency offset (data further back) or no match."""
    probe = f"max(timestamp({query.counter('drafts')}))"
    try:
        back = await client.query(probe, at - OFFSET_PROBE_S)
    except QueryFailed:
        back = []
    if back:
        age = at - back[0].value
        return (
            f"no data in the newest {age:.0f} s at {client.url}, older data present: a latency "
            "offset (VictoriaMetrics hides the newest 30 s by default: start it with "
            "-search.latencyOffset=1s) or a scrape that stopped"
        )
    return (
        f"no series match {{{query.selector}}} at {client.url} "
        f"(looked for {', '.join(p + VLLM_COUNTERS['drafts'] for p in SPELLINGS)}, "
        f"{SGLANG_COUNTERS['drafts']})"
    )


def staleness(tick: FleetTick, interval_s: float) -> str | None:
    """A line when the newest sample is older than the store's scrapes should allow."""
    newest = tick.fleet.newest_s
    if newest is None:
        return None
    age = tick.at - newest
    if age <= max(STALE_AFTER_S, 3 * interval_s):
        return None
    return (
        f"the newest sample is {age:.0f} s old: no data in the newest {age:.0f} s "
        "(a latency offset such as VictoriaMetrics' -search.latencyOffset, or a stopped scrape)"
    )


def now() -> float:
    """The evaluation time of a tick (Unix s)."""
    return time.time()
