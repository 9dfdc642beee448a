"""The live /metrics verdict: judged only on steady scrapes (nothing landed at the client
across the scrape), "settling" while requests are in flight or counters lag, "differs" only
when the server counted steps no request of ours can explain. A real `specmon sim` and a real
load (MultiRun + LoadRunner over loopback); the verdict read through the function the TUI
shows (tuning_view.counter_status), plus a Pilot test of the rendered line."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import urllib.request

import pytest
from support.tui_screen import screen_text
from support.tui_tuning_fixtures import (
    H4,
    StubMulti,
    StubPoller,
    capture_k,
    delta_of,
    run_config,
    session_of,
)

from specmon.config import RunConfig
from specmon.run.assemble import make_runner, make_session
from specmon.run.multi import MultiRun
from specmon.server.scrape import (
    ClientMark,
    ClientProbe,
    CounterDelta,
    RunTotals,
    ServerCounterPoller,
    ServerCounterView,
    SteadyScrape,
)
from specmon.server.server_view import live_verdict
from specmon.sim.process import start_sim
from specmon.tui.app import SpecmonApp
from specmon.tui.tuning_view import counter_status


def verdict_line(multi: MultiRun, label: str) -> str | None:
    """The reconciliation line the TUI would show now (None before the first verify step)."""
    poller = multi.poller(label)
    assert poller is not None
    lines = counter_status(poller.latest(), multi.servers[label][1].accumulator.snapshot()).lines
    return lines[3] if len(lines) == 4 else None


def watch_lines(multi: MultiRun, label: str, seconds: float, until: str | None = None) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = verdict_line(multi, label)
        if line is not None:
            lines.append(line)
            if until is not None and until in line:
                break
        time.sleep(0.05)
    return lines


def post_completion(url: str, model: str) -> None:
    body = json.dumps({"model": model, "prompt": "other client", "max_tokens": 8}).encode()
    req = urllib.request.Request(
        url + "/v1/completions", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        resp.read()


@pytest.mark.e2e
def test_live_verdict_never_differs_alone_and_differs_with_another_client(tmp_path):
    with start_sim(["--num-spec-tokens", "3", "--seed", "3", "--step-ms", "2"]) as sim:
        # Open loop at 8 req/s of ~12-token answers: idle most of the time, so many scrapes
        # are steady with nothing in flight, and some land while requests are in flight.
        config = RunConfig(
            url=[sim.url],
            request_rate=8,
            request_rate_mode="constant",
            output_tokens_mean=12,
            benchmark_duration=60,
            warmup_request_count=2,
            random_seed=1,
            headless=True,
            artifact_dir=str(tmp_path / "run"),
        )
        multi = MultiRun(config, make_session, make_runner)
        assert multi.watch is not None
        multi.watch.interval_s = 0.2  # more scrapes per second than the default 1 s
        label = multi.primary.label
        stop_other = threading.Event()
        other: list[int] = []

        def other_client() -> None:
            while not stop_other.is_set():
                post_completion(sim.url, sim.model)
                other.append(1)

        thread = threading.Thread(target=other_client, daemon=True)
        multi.start()
        try:
            alone = watch_lines(multi, label, 5.0)
            thread.start()
            shared = watch_lines(multi, label, 30.0, until="reconciliation: differs")
        finally:
            stop_other.set()
            multi.stop()
            multi.join(30)
            thread.join(30)
        multi.finish()

    # only our client: judged equal on steady scrapes, settling otherwise, never "differs"
    assert alone, "no verify steps in 5 s"
    assert not [line for line in alone if "differs" in line], alone
    assert any(line.startswith("reconciliation: equal at the scrape") for line in alone), alone
    # a second client: the server counts steps no request of ours explains
    assert other
    assert shared[-1].startswith("reconciliation: differs at the scrape"), shared[-5:]
    assert "likely: other clients sending requests to the same server" in shared[-1]
    # the end of the run stays exact: unequal, the other client named
    rec = multi.primary.server_metrics["reconciliation"]
    assert rec["equal"] is False and rec["diffs"]["steps"] > 0
    assert any("other clients" in reason for reason in rec["reasons"])


@pytest.mark.e2e
def test_live_verdict_with_workers_reaches_equal(tmp_path):
    with start_sim(["--num-spec-tokens", "3", "--seed", "5", "--step-ms", "2"]) as sim:
        # --workers 2: the load in two processes whose progress reaches the parent late; the
        # probe counts what the parent has received, so a scrape nothing landed across is
        # steady. Open loop at 8 req/s (4/s per worker) of ~12-token answers: idle gaps.
        config = RunConfig(
            url=[sim.url],
            request_rate=8,
            request_rate_mode="constant",
            output_tokens_mean=12,
            benchmark_duration=60,
            warmup_request_count=2,
            workers=2,
            random_seed=1,
            headless=True,
            artifact_dir=str(tmp_path / "run"),
        )
        multi = MultiRun(config, make_session, make_runner)
        assert multi.watch is not None
        multi.watch.interval_s = 0.2
        label = multi.primary.label
        multi.start()
        try:
            lines = watch_lines(multi, label, 30.0, until="reconciliation: equal")
        finally:
            multi.stop()
            multi.join(30)
        multi.finish()
    assert type(multi.primary.runner).__name__ == "WorkerPool"
    assert lines and lines[-1].startswith("reconciliation: equal at the scrape"), lines[-5:]
    assert not [line for line in lines if "differs" in line], lines
    # the window restarted after the workers' warmup, so the end of the run is exact too
    assert label in multi.watch.rebaselined
    assert multi.primary.server_metrics["reconciliation"]["equal"] is True


# ---------------------------------------------------------------- live_verdict by hand

# H4 = [2,2,4,6,2] at k=4: steps 16, accepted 0*2+1*2+2*4+3*6+4*2 = 36, drafted 4*16 = 64.
RUN_H4 = RunTotals(steps=16, accepted=36, drafted=64, histogram=dict(enumerate(H4)))


def probed_view(
    delta: CounterDelta,
    totals: RunTotals,
    in_flight: int,
    phase: str = "profiling",
    taken_s: float = 100.0,
) -> ServerCounterView:
    client = ClientMark(landed=1, unlanded=in_flight, phase=phase, totals=totals)
    steady = SteadyScrape(delta, client, in_flight, taken_s, 0)
    return ServerCounterView(
        "http://127.0.0.1:1/metrics", None, None, delta, 5, None, probed=True, steady=steady
    )


def test_verdict_states_by_hand():
    # one more step of the server's: h = [2,2,4,6,3] -> steps 17, accepted 36 + 4 = 40, drafted 68
    ahead = delta_of([2, 2, 4, 6, 3])
    assert live_verdict(probed_view(delta_of(H4), RUN_H4, 0), 102.0).state == "equal"
    # in flight at the scrape: the extra step may be theirs -> settling, with the figures
    v = live_verdict(probed_view(ahead, RUN_H4, 2), 102.0)
    assert (v.state, v.in_flight, v.reconciliation.diffs["steps"]) == ("settling", 2, 1)
    assert v.reconciliation.diffs["accepted"] == 4 and v.reconciliation.diffs["drafted"] == 4
    # nothing in flight: no request of ours explains it
    v = live_verdict(probed_view(ahead, RUN_H4, 0), 102.5)
    assert (v.state, v.age_s) == ("differs", 2.5)
    # the server below the landed totals (counters published late): settling, not differs,
    # until it stays behind client totals seen unchanged for LATE_COUNTERS_S (2 s)
    behind = probed_view(delta_of([2, 2, 4, 6, 1]), RUN_H4, 0)
    assert live_verdict(behind).state == "settling"
    stuck = dataclasses.replace(behind.steady, steady_since_s=behind.steady.taken_s - 2.0)
    assert live_verdict(dataclasses.replace(behind, steady=stuck)).state == "differs"
    # warmup: the window restarts after it
    assert live_verdict(probed_view(ahead, RUN_H4, 0, phase="warmup")).state == "settling"
    # probed, no steady scrape yet
    no_steady = ServerCounterView("u", None, None, ahead, 1, None, probed=True)
    assert live_verdict(no_steady).why.startswith("no scrape yet")
    # without a probe there is no live verdict (the caller compares what it has)
    assert live_verdict(StubPoller(ahead).latest()) is None


def counters_text(app: SpecmonApp) -> str:
    """The counters widget's rendered lines, joined (long reasons wrap in the panel)."""
    region = app.query_one("#counters").region
    rows = screen_text(app).splitlines()[region.y : region.bottom]
    return " ".join(" ".join(row[region.x : region.right].split()) for row in rows)


class ProbedPoller:
    def __init__(self, view: ServerCounterView) -> None:
        self.view = view

    def latest(self) -> ServerCounterView:
        return self.view


async def test_rendered_line_settling_then_differs():
    session = session_of([capture_k(1, H4, 4)])
    ahead = delta_of([2, 2, 4, 6, 3])  # server − run: steps +1, accepted +4, drafted +4
    poller = ProbedPoller(probed_view(ahead, RUN_H4, 3, taken_s=time.monotonic()))
    runner = StubMulti({"run": session}, pollers={"run": poller})
    app = SpecmonApp(session, runner, run_config(), freeze_elapsed=1.0)
    async with app.run_test(size=(200, 48)) as pilot:
        await pilot.pause()
        settling = counters_text(app)
        poller.view = probed_view(ahead, RUN_H4, 0, taken_s=time.monotonic())
        app.main.cache.tune_at = 0.0  # the 1 Hz tuning tick, now
        app.refresh_data()
        await pilot.pause()
        differs = counters_text(app)
    assert (
        "reconciliation: settling (server − run: steps +1, accepted +4, drafted +4); "
        "3 request(s) in flight at the scrape: the server counts their steps before they "
        "land"
    ) in settling
    assert "differs" not in settling
    assert "reconciliation: differs at the scrape 0 s ago (server − run: steps +1" in differs


class CountingProbe(ClientProbe):
    """A client whose landed count moves by `step` at every mark (0: nothing lands)."""

    def __init__(self, step: int) -> None:
        self.step, self.landed = step, 0

    def mark(self) -> ClientMark:
        self.landed += self.step
        return ClientMark(self.landed, 0, "profiling")

    def totals(self) -> RunTotals:
        return RunTotals(0, 0, 0)


@pytest.mark.e2e
async def test_poller_pairs_only_scrapes_nothing_landed_across():
    with start_sim(["--num-spec-tokens", "3", "--seed", "1"]) as sim:
        moving = ServerCounterPoller(sim.url, interval_s=60, probe=CountingProbe(1))
        still = ServerCounterPoller(sim.url, interval_s=60, probe=CountingProbe(0))
        for poller in (moving, still):
            await poller.start()
            await poller.sample_now()
            await poller.stop()
    assert moving.latest().probed and moving.latest().steady is None
    steady = still.latest().steady  # three scrapes (start, sample_now, stop), all steady
    assert steady is not None and steady.client.totals == RunTotals(0, 0, 0)
    assert steady.steady_since_s is not None and steady.steady_for_s > 0
    # nothing sent and no other client: equal
    assert live_verdict(still.latest()).state == "equal"
