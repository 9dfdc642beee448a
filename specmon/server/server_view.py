"""The server's own view during a run: one ServerCounterPoller per server on a small
event loop of its own (so polling never waits on the load loop or the TUI), and what the
end of a run says about it: the server-wide window figures and their reconciliation with
the per-request totals (load/scrape.py does the arithmetic).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from specmon.event_loop import new_event_loop
from specmon.server.scrape import (
    SCRAPE_TIMEOUT_S,
    ClientMark,
    ClientProbe,
    CounterDelta,
    Reconciliation,
    RunTotals,
    ServerCounterPoller,
    ServerCounterView,
    describe_reconciliation,
    describe_window,
    reconcile,
    run_totals_from,
)

if TYPE_CHECKING:
    from specmon.interfaces import LoadControl, ResultsView

POLL_INTERVAL_S = 1.0
SETTLE_S = 0.5  # after the last response, how long to wait for counters that publish late
START_S = 2 * SCRAPE_TIMEOUT_S  # the baseline scrape (one, bounded), with room to spare
STOP_S = 3 * SCRAPE_TIMEOUT_S  # the last scrape and the settle (each bounded)
MakePoller = Callable[[str, ClientProbe | None], ServerCounterPoller]
LATE_COUNTERS_S = 2.0  # live: counters still behind unchanged client totals after this: differs


class CounterWatch:
    """Polls each server's /metrics; servers without spec-decode counters are dropped quietly."""

    def __init__(
        self,
        targets: Mapping[str, str],
        interval_s: float = POLL_INTERVAL_S,
        probes: Mapping[str, ClientProbe] | None = None,
        make_poller: MakePoller | None = None,
    ) -> None:
        self.targets = dict(targets)
        # url, probe -> its poller (a store's instead of the URL's /metrics: store_counters)
        self.make_poller: MakePoller = make_poller or self._scrape_poller
        self.interval_s = interval_s
        self.probes = dict(probes or {})  # label -> the client's side of each scrape
        self.pollers: dict[str, ServerCounterPoller] = {}  # label -> live poller (for the TUI)
        self.absent: dict[str, str] = {}  # label -> why there is no server view
        self.views: dict[str, ServerCounterView] = {}  # label -> final view (after stop)
        self.rebaselined: set[str] = set()  # windows restarted after warmup
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Take every baseline sample before returning (start it before the load)."""
        self._loop = new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="specmon-scrape", daemon=True
        )
        self._thread.start()
        for label, base in self.targets.items():
            poller = self.make_poller(base, self.probes.get(label))
            failed = self._bounded(poller.start(), START_S + poller.wait_s)
            view = poller.latest()
            if failed or view.error is not None or view.last is None or not view.last.present:
                self._bounded(poller.stop(), STOP_S + poller.wait_s)
                self.absent[label] = failed or view.error or "no spec-decode counters on /metrics"
            else:
                self.pollers[label] = poller

    def stop(self) -> dict[str, ServerCounterView]:
        """A last sample per server (settled), then stop the loop; returns the final views."""
        if self._loop is None:
            return self.views
        for label, poller in self.pollers.items():
            self._bounded(poller.stop(SETTLE_S), STOP_S + poller.wait_s)
            self.views[label] = poller.latest()  # the last good window, even if stop failed
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(5)
        self._loop.close()
        self._loop = None
        return self.views

    def rebaseline(self, label: str) -> None:
        """Restart one server's window now (called on the load thread, nothing in flight)."""
        poller = self.pollers.get(label)
        if poller is not None and self._loop is not None:
            self._bounded(poller.rebaseline(), START_S + poller.wait_s)
            self.rebaselined.add(label)

    def _scrape_poller(self, url: str, probe: ClientProbe | None) -> ServerCounterPoller:
        return ServerCounterPoller(url, self.interval_s, probe=probe)

    def latest(self, label: str) -> ServerCounterView | None:
        poller = self.pollers.get(label)
        return poller.latest() if poller is not None else None

    def _run(self, coro: Any, timeout: float) -> Any:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def _bounded(self, coro: Any, timeout: float) -> str | None:
        """Run `coro` on the scrape loop for at most `timeout` s; why it failed, or None. A
        poller's scrape is bounded itself (scrape.SCRAPE_TIMEOUT_S): this is the backstop
        that keeps a run's start and end from ever waiting on /metrics."""
        assert self._loop is not None
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return f"/metrics did not answer within {timeout:g} s"
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return None


def server_metrics_report(
    view: ServerCounterView,
    snapshot: Any,
    warmup_count: int = 0,
    cancelled_steps_bound: int | None = None,
    outage: str | None = None,
) -> dict:
    """The `server_metrics` object of the JSON export for one server (the bound: see
    scrape.reconcile; `outage`: the run's unreachable spells, named as the cause)."""
    delta = view.delta
    assert delta is not None
    rec = _reconcile(delta, snapshot, warmup_count, cancelled_steps_bound)
    if outage is not None and not rec.equal:
        rec = Reconciliation(
            False, rec.diffs, [f"{outage}; counters from before and after it"], outage=outage
        )
    run = run_totals_from(snapshot)
    return {
        "url": view.url,
        "counters_engine": delta.engine,  # whose counters the window and verdict used
        # gauges are a last value, not a window: shown, never reconciled
        "gauges_last_value": dict(delta.gauges),
        "window_s": delta.duration_s,
        "samples": view.samples,
        "label_sets": delta.label_sets,
        "num_spec_tokens": delta.num_spec_tokens or None,
        # a rejected series' count is missing (null), never a zero (issue 35 item 3)
        "drafts": delta.count("drafts"),
        "draft_tokens": delta.count("draft_tokens"),
        "accepted": delta.count("accepted"),
        "accepted_per_position": None if "per_pos" in delta.missing else list(delta.per_pos),
        "missing_series": delta.missing,
        "acceptance_rate": delta.acceptance_rate,
        "acceptance_length": delta.acceptance_length,
        "per_position_rates": delta.per_position_rates,
        "histogram": {str(j): n for j, n in enumerate(delta.histogram())},
        "counter_resets": delta.resets,
        # above 1: /metrics answered by several replicas, the window mixes them (replicas.py)
        "replicas_answering": delta.replicas,
        "failed_scrapes": view.failures,
        "last_error": view.error,
        "rejected_series": dict(view.rejected),
        "acceptance_source": "server-wide" if run.steps == 0 and delta.drafts else "per-request",
        "reconciliation": {
            "equal": rec.equal,
            "diffs": rec.diffs,
            "reasons": rec.reasons,
            "text": describe_reconciliation(rec),
        },
    }


def _reconcile(
    delta: CounterDelta, snapshot: Any, warmup_count: int, cancelled_steps_bound: int | None = None
) -> Reconciliation:
    rec = reconcile(delta, snapshot, cancelled_steps_bound)
    if warmup_count and not rec.equal:  # the baseline came before the warmup requests
        note = f"{warmup_count} warmup request(s) are in the server's counts, not in the run's"
        return Reconciliation(rec.equal, rec.diffs, [note, *rec.reasons])
    return rec


def server_metrics_lines(view: ServerCounterView, report: Mapping[str, Any]) -> list[str]:
    """What a headless run prints for one server: window, reconciliation, and when no
    response carried per-request stats, the acceptance figures from the counters alone."""
    lines = [describe_window(view.delta), report["reconciliation"]["text"]]
    if report["failed_scrapes"]:
        lines.append(
            f"server metrics: {report['failed_scrapes']} scrape(s) failed"
            f" (last: {report['last_error'] or 'recovered'}); the window is from the good ones"
        )
    if report["rejected_series"]:
        why = ", ".join(f"{n} {reason}" for reason, n in report["rejected_series"].items())
        lines.append(f"server metrics: rejected series on /metrics: {why}")
    if report["acceptance_source"] == "server-wide":
        hist = " ".join(f"{j}:{n}" for j, n in report["histogram"].items())
        rate, al = report["acceptance_rate"], report["acceptance_length"]
        missing = ", ".join(f"{f} rejected: {r}" for f, r in report["missing_series"].items())
        lines.append(
            "no response carried per-request stats: acceptance figures are server-wide, from "
            f"/metrics: acceptance length {'-' if al is None else f'{al:.2f}'}, draft "
            f"acceptance {'-' if rate is None else f'{100 * rate:.1f}%'}, histogram (derived) "
            f"{hist or '-'}" + (f" ({missing}: missing, not zero)" if missing else "")
        )
    return lines


# ---------------------------------------------------------------- the live verdict


class SessionProbe(ClientProbe):
    """The client's side of a scrape, from a runner and its session's accumulator.

    Requests sent and not yet recorded ("unlanded") come from the runner itself
    (interfaces.LandingCount): a LoadRunner counts a request as in flight until after it is
    recorded, so sent - landed is exact; a WorkerPool counts from its workers' reports and
    never says zero while one runs; a runner that cannot know at an instant says None, and
    then no scrape is steady for it.
    """

    def __init__(self, runner: LoadControl, accumulator: ResultsView) -> None:
        self.runner = runner
        self.accumulator = accumulator

    def mark(self) -> ClientMark:
        acc = self.accumulator
        warmup = int(acc.warmup_count)
        landed = len(acc.results) + warmup  # read before progress: a landing in between
        progress = self.runner.progress()  # only raises the unlanded count (conservative)
        # a landing after `landed` was read shows as a changed `landed` at the next mark,
        # so the poller does not take this scrape as steady
        return ClientMark(landed, self.runner.unlanded(landed, progress), progress.phase, warmup)

    def totals(self) -> RunTotals:
        return run_totals_from(self.accumulator.snapshot())


@dataclass(frozen=True)
class LiveVerdict:
    """The live /metrics reconciliation: `state` is equal, differs or settling."""

    state: str
    reconciliation: Reconciliation | None  # of the steady scrape judged (None: none yet)
    in_flight: int = 0  # requests sent and not landed at that scrape
    age_s: float | None = None  # how old that scrape is
    why: str = ""  # for settling: what it waits for


def live_verdict(view: ServerCounterView, now_s: float | None = None) -> LiveVerdict | None:
    """Judge the window only on steady scrapes (nothing landed at the client across them),
    and say "differs" only when the difference cannot be requests still on their way: with
    requests in flight the server has counted steps the client cannot see yet, and counters
    below the landed totals may be published late (until they stay behind unchanged client
    totals for LATE_COUNTERS_S). None for a poller without a ClientProbe."""
    if not view.probed:
        return None
    steady = view.steady
    if steady is None:
        return LiveVerdict(
            "settling", None, why="no scrape yet with the client's totals steady across it"
        )
    age = max(0.0, (time.monotonic() if now_s is None else now_s) - steady.taken_s)
    if steady.client.phase in ("starting", "warmup"):
        return LiveVerdict(
            "settling", None, steady.in_flight, age, "warmup: the window starts after it"
        )
    assert steady.client.totals is not None
    rec = _reconcile(steady.delta, steady.client.totals, steady.warmup_in_window)
    if rec.equal:
        return LiveVerdict("equal", rec, steady.in_flight, age)
    if steady.in_flight:
        return LiveVerdict(
            "settling",
            rec,
            steady.in_flight,
            age,
            f"{steady.in_flight} request(s) in flight at the scrape: the server "
            "counts their steps before they land",
        )
    if (
        not steady.delta.resets
        and all(d < 0 for d in rec.diffs.values())
        and steady.steady_for_s < LATE_COUNTERS_S
    ):
        return LiveVerdict(
            "settling", rec, 0, age, "server counters behind the landed responses (published late?)"
        )
    return LiveVerdict("differs", rec, 0, age)
