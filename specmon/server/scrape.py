"""The server's own view: vLLM's spec-decode counters from /metrics, over the run's window.

vLLM exposes four counters (docs/metrics.md §11), one series per engine / data-parallel
rank: `vllm:spec_decode_num_drafts_total` (verify steps), `..._num_draft_tokens_total`,
`..._num_accepted_tokens_total` and `..._num_accepted_tokens_per_pos_total{position="i"}`
(steps that accepted position i, i = 0..k-1). specmon sums every label set (AIPerf's own
report reads only the first series) and ignores the `_created` timestamps.

Over a window (the first sample is taken before the run starts): acceptance rate =
Δaccepted / Δdraft_tokens, acceptance length = 1 + Δaccepted / Δdrafts, per-position rate
= ΔP[i] / Δdrafts. P is a survival function, so the server-wide histogram is
H[0] = D − P[0], H[j] = P[j−1] − P[j], H[k] = P[k−1].

Other engines' series come from the engine registry (specmon/specdecode/engines.py):
TensorRT-LLM's released counters (draft and accepted tokens: a rate, no verify steps, so no
acceptance length from counters) are read into the same fields; gauges (SGLang's
`sglang:spec_accept_length` / `spec_accept_rate`, TensorRT-LLM's acceptance length and
draft overhead) are kept as the last value of the latest scrape, never reconciled or taken
as a window. Each sample says which engine's counters it read.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from prometheus_client.parser import text_string_to_metric_families

from specmon.accumulator import RunSnapshot
from specmon.errors import UserError
from specmon.server.health import (
    COUNTERS,
    GAUGES,
    HealthDelta,
    HealthSample,
    health_from_families,
)
from specmon.server.httpx_lean import httpx
from specmon.server.replicas import ReplicaTracker, several_replicas_text
from specmon.specdecode.engines import metrics_counters, metrics_gauges
from specmon.stats import Rows, row_value, summary_rows

# counter name without `_total` -> (engine, field); gauge name -> engine
ENGINE_COUNTERS = metrics_counters()
ENGINE_GAUGES = metrics_gauges()
SeriesKey = tuple[str, tuple[tuple[str, str], ...]]  # (field, sorted labels incl. position)
HEALTH_SERIES = frozenset(GAUGES) | frozenset(COUNTERS)  # the health series parse_counters reads


def metrics_url(url: str) -> str:
    """`http://host:8000`, `.../v1` or `.../metrics` -> `http://host:8000/metrics`."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UserError(f"not an http(s) URL: {url!r} (expected e.g. http://127.0.0.1:8000)")
    path = parts.path.rstrip("/")
    if not path.endswith("/metrics"):
        if path.endswith("/v1"):
            path = path[: -len("/v1")]
        path += "/metrics"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


@dataclass(frozen=True)
class CounterSample:
    """One scrape: every spec-decode counter series, by field and label set, and the
    server's health series of the same page (server/health.py; None when not parsed)."""

    series: dict[SeriesKey, float]
    taken_s: float  # time.monotonic() when the response arrived
    health: HealthSample | None = field(default=None, compare=False)
    # reason -> series (or lines) of the page rejected as absurd or malformed (parse_counters)
    rejected: Mapping[str, int] = field(default_factory=dict, compare=False)
    engine: str | None = field(default=None, compare=False)  # whose counters these are
    # gauge -> its last value (the mean over label sets): never a window
    gauges: Mapping[str, float] = field(default_factory=dict, compare=False)
    # counter field ("accepted", "drafts", ...) -> why a line of it was rejected on this
    # page: its value here is missing (or held from the page before), never a zero to read
    missing: Mapping[str, str] = field(default_factory=dict, compare=False)
    # the process that answered (process start time, the counters' creation time, an
    # instance / pod label; None: the page names none): server/replicas.py reads it
    identity: str | None = field(default=None, compare=False)

    @property
    def present(self) -> bool:
        """Spec-decode counters at all: verify steps (vLLM) or draft tokens (TensorRT-LLM)."""
        return any(f in ("drafts", "draft_tokens") for f, _ in self.series)

    @property
    def steps_total(self) -> float | None:
        """Verify steps (or draft tokens, for an engine without a step counter) summed over
        label sets; None without spec-decode counters."""
        fields = {f for f, _ in self.series}
        counted = "drafts" if "drafts" in fields else "draft_tokens"
        if counted not in fields:
            return None
        return sum(value for (f, _), value in self.series.items() if f == counted)

    @property
    def label_sets(self) -> int:
        """Engines / data-parallel ranks seen (label sets of the drafts counter, or of the
        draft-token counter where the engine has no verify-step counter)."""
        fields = [f for f, _ in self.series]
        counted = "drafts" if "drafts" in fields else "draft_tokens"
        return fields.count(counted)

    def totals(self) -> dict[str, Any]:
        """Counters summed over label sets; per_pos as {position: count}."""
        out: dict[str, Any] = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "per_pos": {}}
        for (fld, labels), value in self.series.items():
            _add(out, fld, labels, int(round(value)))
        return out


def _add(out: dict[str, Any], fld: str, labels: tuple[tuple[str, str], ...], value: int) -> None:
    if fld == "per_pos":
        pos = _position(labels)
        if pos is not None:
            out["per_pos"][pos] = out["per_pos"].get(pos, 0) + value
    else:
        out[fld] += value


def _position(labels: tuple[tuple[str, str], ...]) -> int | None:
    for name, value in labels:
        if name == "position":
            try:
                return int(value)
            except ValueError:
                return None
    return None


# Hard bounds on one scrape: /metrics is the server's page, not ours, and a slow, trickled,
# endless or absurd page must never hold up or take down a run (docs/monitoring.md, "Server metrics").
SCRAPE_TIMEOUT_S = 5.0  # connect to last byte: a trickle cannot stretch a scrape past this
MAX_PAGE_BYTES = 16 * 2**20  # a vLLM page is tens of KiB; beyond this the scrape fails
MAX_LINE_BYTES = 4096  # a vLLM sample line is under 300 bytes; longer ones are rejected
MAX_POSITION = 1024  # no drafter proposes this many tokens: a larger `position` is absurd
MAX_VALUE = float(2**63 - 1)  # a counter past int64 is absurd (and breaks every total)


class MetricsUnavailable(Exception):
    """A scrape that gave no usable page (too slow, too large, not Prometheus text)."""


def parse_counters(page: str | bytes, taken_s: float | None = None) -> CounterSample:
    """Parse a Prometheus text page, linearly and bounded: only the lines specmon reads (the
    spec-decode counters and server/health.py's series) are parsed, one line at a time, and a
    line or series that is too long, malformed, NaN, infinite, negative, past int64 or with an
    absurd `position` label is rejected with a counted reason (`.rejected`) while the others
    count. A page whose every such line is rejected is a UserError."""
    taken = time.monotonic() if taken_s is None else taken_s
    raw = page.encode("utf-8", "replace") if isinstance(page, str) else page
    rejected: dict[str, int] = {}
    series: dict[SeriesKey, float] = {}
    samples: list[Any] = []
    engines: set[str] = set()
    gauges: dict[str, list[float]] = {}
    missing: dict[str, str] = {}
    identity = _Identity()
    for line in raw.split(b"\n"):
        before = dict(rejected)
        sample = _parse_line(line, rejected)
        if sample is None:
            _note_missing(line, before, rejected, missing)
            continue
        if identity.read(sample):
            continue
        samples.append(sample)
        counter = _counter_of(sample.name)
        if counter is not None:
            engines.add(counter[0])
            key = (counter[1], tuple(sorted(sample.labels.items())))
            series[key] = series.get(key, 0.0) + float(sample.value)
        elif sample.name in ENGINE_GAUGES:
            gauges.setdefault(sample.name, []).append(float(sample.value))
    if rejected and not samples:
        why = ", ".join(f"{n} {reason}" for reason, n in rejected.items())
        raise UserError(f"/metrics is not valid Prometheus text: every line rejected ({why})")
    health = health_from_families([_Family(samples)], taken)
    engine = ", ".join(sorted(engines)) or next(iter(map(ENGINE_GAUGES.get, gauges)), None)
    means = {name: sum(v) / len(v) for name, v in gauges.items()}
    return CounterSample(series, taken, health, rejected, engine, means, missing, identity.text())


IDENTITY_LABELS = ("instance", "pod")  # labels that name a replica, where a page carries them
PROCESS_START = "process_start_time_seconds"  # prometheus_client's process collector (vLLM)
CREATED = "_created"


class _Identity:
    """What names the process behind one page (server/replicas.py)."""

    def __init__(self) -> None:
        self.start: float | None = None
        self.created: float | None = None
        self.labels: set[str] = set()

    def read(self, sample: Any) -> bool:
        """Take what the sample says of the process; True for an identity-only line."""
        if sample.name == PROCESS_START:
            self.start = float(sample.value)
            return True
        if sample.name.endswith(CREATED):
            value = float(sample.value)
            self.created = value if self.created is None else min(self.created, value)
            return True
        if _counter_of(sample.name) is not None:
            self.labels.update(
                f"{name}={sample.labels[name]}" for name in IDENTITY_LABELS if name in sample.labels
            )
        return False

    def text(self) -> str | None:
        parts = sorted(self.labels)
        if self.start is not None:
            parts.append(f"{PROCESS_START}={self.start:.3f}")
        if self.created is not None:
            parts.append(f"counters created {self.created:.6f}")
        return ", ".join(parts) or None


def _note_missing(
    line: bytes, before: dict[str, int], rejected: dict[str, int], missing: dict[str, str]
) -> None:
    """A rejected line of a spec-decode counter makes its field missing, with the reason."""
    reason = next((r for r, n in rejected.items() if n != before.get(r, 0)), None)
    fld = _field_of(_line_name(line)) if reason is not None else None
    if fld is not None:
        missing.setdefault(fld, reason or "")


@dataclass
class _Family:
    """The parsed samples, in the shape health_from_families reads."""

    samples: list[Any]


def _parse_line(line: bytes, rejected: dict[str, int]) -> Any:
    """One sample line specmon reads, parsed and checked; None for any other line (comments,
    series specmon does not read) and for a rejected one (counted in `rejected`)."""
    if not line or line[:1] == b"#" or not _wanted(line):
        return None
    if len(line) > MAX_LINE_BYTES:
        return _reject(rejected, f"lines over {MAX_LINE_BYTES} bytes")
    try:
        families = list(text_string_to_metric_families(line.decode("utf-8") + "\n"))
    except (ValueError, TypeError, UnicodeDecodeError, IndexError):
        return _reject(rejected, "malformed lines")
    sample = families[0].samples[0] if families and families[0].samples else None
    if sample is None:
        return None
    why = _absurd(sample)
    return sample if why is None else _reject(rejected, why)


def _line_name(line: bytes) -> str:
    end = len(line)
    for stop in (b"{", b" "):
        at = line.find(stop, 0, end)
        end = at if at != -1 else end
    return line[:end].decode("utf-8", "replace")


def _wanted(line: bytes) -> bool:
    name = _line_name(line)
    if name == PROCESS_START or (name.endswith(CREATED) and _field_of(name[: -len(CREATED)])):
        return True  # the process that answered (server/replicas.py)
    return _field_of(name) is not None or name in HEALTH_SERIES or name in ENGINE_GAUGES


def _absurd(sample: Any) -> str | None:
    value = float(sample.value)
    if math.isnan(value):
        return "NaN values"
    if math.isinf(value):
        return "infinite values"
    if value < 0:
        return "negative values"
    if value > MAX_VALUE:
        return "values past 2^63"
    position = sample.labels.get("position")
    if position is not None and not (position.isdigit() and int(position) < MAX_POSITION):
        return f"position labels not in 0..{MAX_POSITION - 1}"
    return None


def _reject(rejected: dict[str, int], reason: str) -> None:
    rejected[reason] = rejected.get(reason, 0) + 1
    return None


def _counter_of(sample_name: str) -> tuple[str, str] | None:
    """(engine, field) of a spec-decode counter sample; None for any other series."""
    if sample_name.endswith("_created"):
        return None
    base = sample_name[: -len("_total")] if sample_name.endswith("_total") else sample_name
    return ENGINE_COUNTERS.get(base)


def _field_of(sample_name: str) -> str | None:
    counter = _counter_of(sample_name)
    return counter[1] if counter is not None else None


@dataclass(frozen=True)
class CounterDelta:
    """Counter increase over a window, summed over engine / DP label sets."""

    drafts: int  # D: verify steps
    draft_tokens: int
    accepted: int
    per_pos: list[int]  # P[i], i = 0..k-1
    duration_s: float
    label_sets: int
    present: bool  # the server exposes spec-decode counters at all
    resets: int = 0  # series that went backwards (server restart): counted from zero
    engine: str | None = None  # whose counters (the later sample's)
    gauges: Mapping[str, float] = field(default_factory=dict)  # the later sample's, as read
    # field -> why it is missing at the window's start / end (a rejected line there): its
    # count over the window is unknown, so every figure read from it is None, never 0
    missing_start: Mapping[str, str] = field(default_factory=dict)
    missing_end: Mapping[str, str] = field(default_factory=dict)
    # replicas seen answering the URL (server/replicas.py): above 1, the window mixes their
    # counts and no figure of it is read
    replicas: int = 1

    @property
    def missing(self) -> dict[str, str]:
        """field -> why its count over this window is unknown (a series rejected)."""
        return {**self.missing_start, **self.missing_end}

    def count(self, name: str) -> int | None:
        """The window's count of one field ("drafts", "draft_tokens", "accepted"); None
        when a series of it was rejected at either end."""
        return None if name in self.missing else int(getattr(self, name))

    def missing_text(self, *names: str) -> str | None:
        """'accepted rejected: NaN values' for the first of `names` missing, else None."""
        missing = self.missing
        name = next((n for n in names if n in missing), None)
        return None if name is None else f"{name} rejected: {missing[name]}"

    @property
    def num_spec_tokens(self) -> int:
        return len(self.per_pos)

    @property
    def acceptance_rate(self) -> float | None:
        if self.missing_text("accepted", "draft_tokens"):
            return None
        return self.accepted / self.draft_tokens if self.draft_tokens else None

    @property
    def acceptance_length(self) -> float | None:
        if self.missing_text("accepted", "drafts"):
            return None
        return 1 + self.accepted / self.drafts if self.drafts else None

    @property
    def per_position_rates(self) -> list[float] | None:
        if self.missing_text("per_pos", "drafts"):
            return None
        return [p / self.drafts for p in self.per_pos] if self.drafts else None

    def histogram(self) -> list[int]:
        """Derived H[0..k]; empty when the server has no per-position counters (or one of
        them, or the step counter, was rejected)."""
        k = len(self.per_pos)
        if k == 0 or self.missing_text("per_pos", "drafts"):
            return []
        p = self.per_pos
        return [self.drafts - p[0]] + [p[j - 1] - p[j] for j in range(1, k)] + [p[k - 1]]

    @property
    def consistent(self) -> bool:
        """Σ P[i] == Δaccepted and no negative histogram bucket."""
        if not self.per_pos or self.missing_text("per_pos", "accepted", "drafts"):
            return True  # a rejected series: nothing to hold the others against
        return sum(self.per_pos) == self.accepted and min(self.histogram()) >= 0


def counter_delta(before: CounterSample, after: CounterSample) -> CounterDelta:
    """after − before per series (a series that went backwards restarted: counted from 0)."""
    out: dict[str, Any] = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "per_pos": {}}
    resets = 0
    for key, value in after.series.items():
        diff = value - before.series.get(key, 0.0)
        if diff < 0:
            resets += 1
            diff = value
        _add(out, key[0], key[1], int(round(diff)))
    k = max(out["per_pos"], default=-1) + 1
    return CounterDelta(
        drafts=out["drafts"],
        draft_tokens=out["draft_tokens"],
        accepted=out["accepted"],
        per_pos=[out["per_pos"].get(i, 0) for i in range(k)],
        duration_s=max(0.0, after.taken_s - before.taken_s),
        label_sets=after.label_sets,
        present=after.present,
        resets=resets,
        engine=after.engine,
        gauges=after.gauges,
        missing_start=before.missing,
        missing_end=after.missing,
    )


def add_deltas(first: CounterDelta, then: CounterDelta) -> CounterDelta:
    """Two consecutive windows as one: counts and resets add, the page's shape is the later's."""
    k = max(first.num_spec_tokens, then.num_spec_tokens)
    a, b = (d.per_pos + [0] * (k - len(d.per_pos)) for d in (first, then))
    return CounterDelta(
        drafts=first.drafts + then.drafts,
        draft_tokens=first.draft_tokens + then.draft_tokens,
        accepted=first.accepted + then.accepted,
        per_pos=[x + y for x, y in zip(a, b)],
        duration_s=first.duration_s + then.duration_s,
        label_sets=then.label_sets,
        present=then.present,
        resets=first.resets + then.resets,
        engine=then.engine,
        gauges=then.gauges,
        # counters are cumulative: a series held across a rejected page in between loses
        # nothing, so only the window's own ends decide what is missing
        missing_start=first.missing_start,
        missing_end=then.missing_end,
        replicas=max(first.replicas, then.replicas),
    )


# ---------------------------------------------------------------- reconciliation


@dataclass(frozen=True)
class RunTotals:
    """The run's own per-request totals (what the responses carried)."""

    steps: int
    accepted: int
    drafted: int
    histogram: dict[int, int] | None = None
    spec_reasons: dict[str, int] = field(default_factory=dict)  # why requests had no record
    errors: int = 0
    cancelled: int = 0  # cut short by specmon's own stop: the server may have counted steps


RunCounts = RunTotals | RunSnapshot | Mapping[str, Any]  # what a reconciliation reads


def run_totals_from(source: RunCounts) -> RunTotals:
    """RunTotals from a RunTotals, a RunSnapshot or an export summary (whose totals are
    floats, as AIPerf writes them; its blocks are read as the typed rows they hold)."""
    if isinstance(source, RunTotals):
        return source
    if isinstance(source, RunSnapshot):  # the live run's integer totals, as counted
        pooled = source.pooled_histogram
        return RunTotals(
            steps=source.total_steps,
            accepted=source.total_accepted,
            drafted=source.total_drafted,
            histogram=dict(pooled) if pooled else None,
            spec_reasons=dict(source.spec_reasons),
            errors=source.error_count,
            cancelled=source.cancelled_count,
        )
    rows = summary_rows(source)
    hist = source.get("pooled_spec_decode_acceptance_histogram")
    cancelled = source.get("cancelled_request_count")  # the session's extra: a plain count
    return RunTotals(
        steps=_total(rows, "total_spec_decode_steps"),
        accepted=_total(rows, "total_accepted_draft_tokens"),
        drafted=_total(rows, "total_draft_tokens"),
        histogram={int(j): int(n) for j, n in hist.items()} if hist else None,
        spec_reasons=dict(source.get("spec_reasons") or {}),
        errors=_total(rows, "error_request_count"),
        cancelled=int(cancelled) if isinstance(cancelled, int | float) else 0,
    )


def _total(rows: Rows, tag: str) -> int:
    return int(row_value(rows, tag) or 0)


@dataclass(frozen=True)
class Reconciliation:
    equal: bool
    diffs: dict[str, int]  # server − run, only where they differ
    reasons: list[str]  # likely causes, most likely first
    # equal apart from this many requests specmon itself cancelled at a stop: the server
    # counted the steps they decoded, their responses (and stats) never came (diffs > 0)
    apart_from_cancelled: int = 0
    outage: str | None = None  # "server unreachable 19:25:05-19:26:10": the cause, named


def reconcile(
    server_delta: CounterDelta, run_totals: RunCounts, cancelled_steps_bound: int | None = None
) -> Reconciliation:
    """Compare the server's counter deltas with the per-request totals; name likely causes.

    `cancelled_steps_bound`: the most steps the run's cancelled requests can have decoded
    (the sum of their max_tokens), or None when unknown."""
    run = run_totals_from(run_totals)
    if not server_delta.present:
        return Reconciliation(
            False,
            {},
            [
                "the server exposes no spec-decode counters (speculative decoding off, "
                "--disable-log-stats, or not a vLLM /metrics endpoint)"
            ],
        )
    diffs = _diffs(server_delta, run)
    if server_delta.replicas > 1:  # whatever the sums say, they are not this run's
        return Reconciliation(False, diffs, [several_replicas_text(server_delta.replicas)])
    if not diffs and not server_delta.resets:
        return Reconciliation(True, {}, [])
    if _only_cancellations(server_delta, run, diffs, cancelled_steps_bound):
        return Reconciliation(True, diffs, [], apart_from_cancelled=run.cancelled)
    return Reconciliation(False, diffs, _reasons(server_delta, run, diffs))


def _only_cancellations(
    server: CounterDelta, run: RunTotals, diffs: dict[str, int], steps_bound: int | None
) -> bool:
    """The server counted more, and specmon's own cancelled requests explain it: they decoded
    steps before the stop and never reported them. Only when nothing else can (no reset, no
    response without stats, no failed request) and the extra steps are at most what the
    cancelled requests could decode: each step emits at least one token, so a request
    decodes at most max_tokens steps (docs/metrics.md §11, "Cancelled requests")."""
    if not run.cancelled or server.resets or not server.consistent or run.errors:
        return False
    if run.steps == 0 or any(run.spec_reasons.get(r, 0) for r in ("n_gt_1", "absent")):
        return False
    if steps_bound is None or diffs.get("steps", 0) > steps_bound:
        return False
    return all(d > 0 for d in diffs.values())


def _diffs(server: CounterDelta, run: RunTotals) -> dict[str, int]:
    """server − run per total; a rejected series is compared with nothing (no diff)."""
    pairs = {"steps": ("drafts", run.steps), "accepted": ("accepted", run.accepted)}
    pairs["drafted"] = ("draft_tokens", run.drafted)
    diffs = {
        name: count - ours
        for name, (fld, ours) in pairs.items()
        if (count := server.count(fld)) is not None
    }
    server_hist = server.histogram()
    if run.histogram is not None and server_hist:
        for j in sorted(set(range(len(server_hist))) | set(run.histogram)):
            server_j = server_hist[j] if j < len(server_hist) else 0
            diffs[f"histogram[{j}]"] = server_j - run.histogram.get(j, 0)
    return {name: d for name, d in diffs.items() if d != 0}


def _reasons(server: CounterDelta, run: RunTotals, diffs: dict[str, int]) -> list[str]:
    reasons: list[str] = []
    if server.resets:
        reasons.append(
            f"{server.resets} counter series went backwards during the run "
            "(server restarted?); counted from zero"
        )
    if any(d > 0 for d in diffs.values()):
        reasons += _server_higher(run)
    if any(d < 0 for d in diffs.values()):
        reasons.append(
            "the server counted less than the responses reported: the last scrape "
            "came before the counters caught up (scrape again), several replicas "
            "behind one URL, or a counter reset"
        )
    if not server.consistent:
        reasons.append(
            "the per-position counters do not sum to the accepted-token counter "
            "(a non-upstream vLLM, or a scrape taken mid-update)"
        )
    return reasons


def _server_higher(run: RunTotals) -> list[str]:
    out = []
    if run.steps == 0:
        out.append(
            "no response carried per-request stats (server flag "
            "--per-request-spec-decode-metrics off, streaming without include_usage, "
            "or a proxy stripping the payload): acceptance is from the counters alone"
        )
    n_gt_1 = run.spec_reasons.get("n_gt_1", 0)
    if n_gt_1:
        out.append(
            f"{n_gt_1} request(s) with n > 1: the server counts their steps, "
            "their responses carry no per-request stats"
        )
    absent = run.spec_reasons.get("absent", 0)
    if absent and run.steps:
        out.append(
            f"{absent} response(s) without per-request stats (a proxy stripping the "
            "payload, or the server flag off)"
        )
    if run.errors:
        out.append(f"{run.errors} failed or cancelled request(s) may have decoded steps first")
    out.append("other clients sending requests to the same server during the run")
    return out


# ---------------------------------------------------------------- fetching


async def fetch_counters_async(client: httpx.AsyncClient, url: str) -> CounterSample:
    """One scrape within SCRAPE_TIMEOUT_S and MAX_PAGE_BYTES, whatever the server does."""
    # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancel that
    # lands as the read completes (CPython gh-86296), and the poll task then goes on
    try:
        async with asyncio.timeout(SCRAPE_TIMEOUT_S):
            page = await _read_page(client, url)
    except TimeoutError:
        raise MetricsUnavailable(f"no complete page within {SCRAPE_TIMEOUT_S:g} s") from None
    return parse_counters(page)


async def _read_page(client: httpx.AsyncClient, url: str) -> bytes:
    async with client.stream("GET", url) as response:
        response.raise_for_status()
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > MAX_PAGE_BYTES:
                raise MetricsUnavailable(f"page larger than {MAX_PAGE_BYTES // 2**20} MiB")
            chunks.append(chunk)
    return b"".join(chunks)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The one TLS context of every client here (httpx's default, which each new client would
    build, even for http://): building one loads the CA bundle, tens of ms of CPU, and a
    sweep makes about three clients a repeat (a third of a profiled demo sweep's samples)."""
    return httpx.create_ssl_context()


def fetch_counters(url: str, timeout_s: float = 5.0) -> CounterSample:
    """One synchronous scrape of `url` (base URL or /metrics). One-line UserError on failure."""
    target = metrics_url(url)

    async def once() -> CounterSample:
        async with httpx.AsyncClient(timeout=timeout_s, verify=tls_context()) as client:
            return await fetch_counters_async(client, target)

    try:
        return asyncio.run(once())
    except (httpx.HTTPError, MetricsUnavailable) as exc:
        raise UserError(f"could not read {target}: {type(exc).__name__}: {exc}") from None


@dataclass(frozen=True)
class ClientMark:
    """The client's side at one instant, as a ClientProbe reports it."""

    landed: int  # requests recorded so far (warmup included)
    unlanded: int | None  # sent, not recorded yet (in flight, or done and not yet recorded);
    #                       None when the load's state is not known at this instant
    phase: str
    warmup: int = 0  # warmup requests recorded
    totals: RunTotals | None = None  # per-request totals over the landed requests


class ClientProbe:
    """What the poller asks the client around each scrape (override both; thread-safe)."""

    def mark(self) -> ClientMark:  # cheap: counts only
        raise NotImplementedError

    def totals(self) -> RunTotals:  # the run's per-request totals now
        raise NotImplementedError


@dataclass(frozen=True)
class SteadyScrape:
    """A scrape across which nothing landed at the client: the window and the client's totals
    describe the same instant, so comparing them is like with like."""

    delta: CounterDelta
    client: ClientMark  # with totals
    in_flight: int  # the most requests sent and not landed, just before or after the scrape
    taken_s: float  # time.monotonic() of the scrape
    warmup_in_window: int  # warmup requests the server counted inside the window
    steady_since_s: float | None = None  # the first scrape of a run of steady scrapes with
    #                                       these same client totals (None: this one)

    @property
    def steady_for_s(self) -> float:
        """How long the client's totals have been seen unchanged by scrapes."""
        return 0.0 if self.steady_since_s is None else self.taken_s - self.steady_since_s


@dataclass(frozen=True)
class ServerCounterView:
    """What the poller knows now; `delta` covers baseline -> last sample."""

    url: str
    baseline: CounterSample | None
    last: CounterSample | None
    delta: CounterDelta | None
    samples: int
    error: str | None  # the last scrape's failure, None after a good one
    probed: bool = False  # a ClientProbe marks each scrape (live verdicts need it)
    steady: SteadyScrape | None = None  # the latest steady scrape, with the client's totals
    previous: CounterSample | None = None  # the good sample before `last` (live rates)
    failures: int = 0  # scrapes that failed (timeout, size, HTTP, unparseable page)
    rejected: Mapping[str, int] = field(default_factory=dict)  # reason -> series, all scrapes
    replicas: int = 1  # replicas seen answering the URL (server/replicas.py)

    def health_recent(self) -> HealthDelta | None:
        """The health series over the last scrape interval: previous -> last."""
        return _health_between(self.previous, self.last)


def _merged(a: Mapping[str, int], b: Mapping[str, int]) -> Mapping[str, int]:
    if not b:
        return a
    out = dict(a)
    for reason, n in b.items():
        out[reason] = out.get(reason, 0) + n
    return out


def _health_between(a: CounterSample | None, b: CounterSample | None) -> HealthDelta | None:
    if a is None or b is None or a.health is None or b.health is None or a is b:
        return None
    return HealthDelta.between(a.health, b.health)


class ServerCounterPoller:
    """Polls /metrics on an asyncio loop; `latest()` is safe to call from any thread.

    `await start()` takes the baseline sample before it returns, so start it before the
    load and the window covers the whole run; `await stop()` takes one last sample.
    """

    def __init__(
        self,
        url: str,
        interval_s: float = 1.0,
        timeout_s: float = 2.0,
        probe: ClientProbe | None = None,
    ) -> None:
        self.url = metrics_url(url)
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.probe = probe  # marks each scrape with the client's state (live verdicts)
        self.rebaselined = False  # the window restarted after the warmup requests
        # called on the scrape loop after every scrape, good or failed (specmon watch)
        self.on_sample: Callable[[ServerCounterView], None] | None = None
        self._client: httpx.AsyncClient | None = None
        self._task: asyncio.Task[None] | None = None
        # set before the poll task is cancelled, and read by its loop, so that the loop ends
        # whatever the cancel meets: when a scrape swallowed it (Python 3.11's wait_for,
        # CPython gh-86296, since replaced in fetch_counters_async), the loop polled for
        # ever while stop() awaited it (seen: a test hung 95 min on a busy core)
        self._polling = False
        self._baseline: CounterSample | None = None
        # the window so far as a sum of scrape-to-scrape deltas, so a restart between two
        # scrapes is seen (a series going down) and counted, not hidden behind a total
        # that still exceeds the baseline
        self._previous: CounterSample | None = None
        self._window_delta: CounterDelta | None = None
        # counts rebaselines: a scrape that started before one may have been rendered before
        # the warmup's last counters, so it must not become (or be measured against) the
        # new baseline; sample_now drops it (the poll loop's scrape can overlap rebaseline)
        self._window = 0
        self._view = ServerCounterView(self.url, None, None, None, 0, None, probe is not None)
        self.replicas = ReplicaTracker()  # the URL's answering processes, across windows
        # how long a start, rebaseline or stop may wait on top of its scrape for data to
        # catch up (a store's scrape interval: server/store_counters.py); 0 for /metrics
        self.wait_s = 0.0

    async def start(self) -> None:
        self._client = httpx.AsyncClient(timeout=self.timeout_s, verify=tls_context())
        await self.sample_now()
        self._polling = True
        self._task = asyncio.create_task(self._loop(), name=f"scrape {self.url}")

    async def stop(self, settle_s: float = 0.0) -> ServerCounterView:
        """Stop polling after a last sample; with `settle_s`, keep sampling (bounded) until
        two samples in a row agree, for servers that publish counters a little late."""
        await self._cancel_polling()
        if self._client is not None:
            await self.sample_now()
            await self._settle(settle_s)
            await self._client.aclose()
            self._client = None
        return self._view

    async def close(self) -> None:
        """Stop at once, no last sample (idempotent; after a stop() cut short)."""
        await self._cancel_polling()
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    async def _cancel_polling(self) -> None:
        self._polling = False
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _settle(self, settle_s: float) -> None:
        deadline = time.monotonic() + settle_s
        while time.monotonic() < deadline:
            before = self._view.last
            await asyncio.sleep(min(0.1, self.interval_s))
            await self.sample_now()
            if self._view.error is not None:  # a failing page: no more scrapes at the end
                return
            if (
                before is not None
                and self._view.last is not None
                and before.series == self._view.last.series
            ):
                return

    async def rebaseline(self) -> ServerCounterView:
        """Start the window now (e.g. once warmup requests are done)."""
        self._baseline = None
        self._window += 1
        self.rebaselined = True
        view = self._view  # a steady scrape of the old window compares nothing now
        self._view = replace(view, baseline=None, delta=None, steady=None)
        return await self.sample_now()

    def latest(self) -> ServerCounterView:
        return self._view

    async def sample_now(self) -> ServerCounterView:
        """Scrape once now (also between polls, e.g. right after the last response). Never
        raises for what the server sends: any failure is the view's `error`."""
        if self._client is None:
            raise RuntimeError("ServerCounterPoller.sample_now() before start()")
        before = self._mark()
        window = self._window
        try:
            sample = await self._fetch()
        except Exception as exc:  # whatever the page did, the run goes on without it
            if window == self._window:  # else stale: the window restarted meanwhile
                self._failed(exc)
            return self._view
        self.replicas.observe(sample.identity, sample.steps_total)
        if window != self._window:  # stale: the window restarted meanwhile
            return self._view
        sample = self._held(sample)
        if self._baseline is None:
            self._baseline = self._previous = sample
            self._window_delta = None
        assert self._previous is not None
        step = counter_delta(self._previous, sample)
        delta = step if self._window_delta is None else add_deltas(self._window_delta, step)
        if self.replicas.several:
            delta = replace(delta, replicas=self.replicas.count)
        self._previous, self._window_delta = sample, delta
        steady = self._steady(before, delta, sample.taken_s)
        view = self._view
        self._view = replace(
            view,
            baseline=self._baseline,
            last=sample,
            delta=delta,
            samples=view.samples + 1,
            error=None,
            steady=steady or view.steady,
            previous=view.last,
            rejected=_merged(view.rejected, sample.rejected),
            replicas=self.replicas.count,
        )
        self._notify()
        return self._view

    async def _fetch(self) -> CounterSample:
        """One sample of the counters (here: a scrape of the URL's /metrics)."""
        assert self._client is not None
        return await fetch_counters_async(self._client, self.url)

    def _failed(self, exc: Exception) -> None:
        view = self._view
        why = str(exc) if isinstance(exc, (MetricsUnavailable, UserError)) else ""
        if isinstance(exc, httpx.TimeoutException):  # its text is often empty
            why = f"{type(exc).__name__}: no answer within {self.timeout_s:g} s"
        self._view = replace(
            view,
            error=why or f"{type(exc).__name__}: {exc}",
            failures=view.failures + 1,
        )
        self._notify()

    def _held(self, sample: CounterSample) -> CounterSample:
        """A series rejected on this page keeps its previous value (so it neither vanishes
        nor restarts from zero when it comes back)."""
        if not sample.rejected or self._previous is None:
            return sample  # a field rejected here stays in sample.missing either way
        missing = {k: v for k, v in self._previous.series.items() if k not in sample.series}
        if not missing:
            return sample
        return replace(sample, series={**sample.series, **missing})

    def _notify(self) -> None:
        if self.on_sample is not None:
            self.on_sample(self._view)

    def _mark(self) -> ClientMark | None:
        return self.probe.mark() if self.probe is not None else None

    def _steady(
        self, before: ClientMark | None, delta: CounterDelta, taken_s: float
    ) -> SteadyScrape | None:
        """The scrape paired with the client's totals, when nothing landed across it (the
        totals are read after the scrape and checked against a third mark)."""
        if self.probe is None or before is None or before.unlanded is None:
            return None
        after = self.probe.mark()
        if after.unlanded is None or after.landed != before.landed:
            return None
        totals = self.probe.totals()
        last = self.probe.mark()
        if last.landed != before.landed:
            return None
        client = ClientMark(after.landed, after.unlanded, after.phase, after.warmup, totals)
        warmup = 0 if self.rebaselined else after.warmup
        previous = self._view.steady
        since = None
        if previous is not None and previous.client.landed == after.landed:
            since = previous.steady_since_s or previous.taken_s
        return SteadyScrape(
            delta, client, max(before.unlanded, after.unlanded), taken_s, warmup, since
        )

    async def _loop(self) -> None:
        while self._polling:
            await asyncio.sleep(self.interval_s)
            if self._polling:
                await self.sample_now()


# ---------------------------------------------------------------- one-line summaries


def describe_window(delta: CounterDelta | None) -> str:
    """One line for a console or a status bar: the server's own acceptance over the window."""
    if delta is None:
        return "server /metrics: no sample yet"
    gauges = gauges_text(delta.gauges)
    if not delta.present:
        return "server /metrics: no spec-decode counters" + gauges
    if delta.replicas > 1:
        return "server /metrics: " + several_replicas_text(delta.replicas)
    who = f"{delta.engine} counters, " if delta.engine else ""
    rate = "-" if delta.acceptance_rate is None else f"{100 * delta.acceptance_rate:.1f}%"
    if not delta.drafts and delta.draft_tokens and not delta.missing:  # TensorRT-LLM: no
        # verify-step counter
        return (
            f"server /metrics ({who}{delta.label_sets} engine(s), server-wide): draft "
            f"acceptance {rate}, {delta.draft_tokens:,} draft tokens; no verify-step counter, "
            "so no acceptance length from counters" + gauges
        )
    if not delta.drafts and "drafts" not in delta.missing:
        return (
            f"server /metrics ({who}{delta.label_sets} engine(s)): no verify steps in the window"
            + gauges
        )
    al = delta.acceptance_length
    per_pos = " ".join(f"{r:.2f}" for r in delta.per_position_rates or []) or "-"
    steps = delta.count("drafts")
    rejected = delta.missing_text("accepted", "drafts", "draft_tokens", "per_pos")
    return (
        f"server /metrics ({who}{delta.label_sets} engine(s), server-wide): acceptance length "
        f"{'-' if al is None else f'{al:.2f}'}, draft acceptance {rate}, per position "
        f"[{per_pos}], {'-' if steps is None else f'{steps:,}'} steps"
        + (f" ({rejected}: missing, not zero)" if rejected else "")
        + gauges
    )


def gauges_text(gauges: Mapping[str, float]) -> str:
    """`; gauges (last value, not a window): name value, ...` or "" without gauges."""
    if not gauges:
        return ""
    values = ", ".join(f"{name} {value:.3g}" for name, value in sorted(gauges.items()))
    return f"; gauges (last value, not a window): {values}"


def describe_reconciliation(rec: Reconciliation) -> str:
    if rec.equal and rec.apart_from_cancelled:
        diffs = ", ".join(f"{name} {d:+,}" for name, d in rec.diffs.items())
        return (
            f"server counters equal the per-request totals, apart from "
            f"{rec.apart_from_cancelled} cancelled request(s) (server − run: {diffs}): "
            "specmon stopped them in flight, after the server had counted their steps"
        )
    if rec.equal:
        return "server counters match the per-request totals"
    diffs = ", ".join(f"{name} {d:+,}" for name, d in rec.diffs.items()) or "no totals"
    if rec.outage is not None:  # a known cause: no guessing
        return (
            f"server counters differ from the per-request totals (server − run: {diffs}): "
            f"{rec.outage}; counters from before and after it"
        )
    likely = "; ".join(rec.reasons) if rec.reasons else "cause unknown"
    return (
        f"server counters differ from the per-request totals (server − run: {diffs}); "
        f"likely: {likely}"
    )
