"""Deterministic data for the tuning views: servers at any k, a MultiRun-like stub runner
and a stub /metrics poller. No randomness and no clock: every number follows from the
histograms given, so the expected what-if figures can be computed by hand."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from specmon.interfaces import LoadProgress, MonitorConfig
from specmon.segment_plan import SegmentLog
from specmon.server.scrape import CounterDelta, ServerCounterView
from specmon.tui.app import SpecmonApp
from support.segments_oracle import segment_table
from support.tui_fixtures import accumulate, make_capture

# The example: h = [2, 2, 4, 6, 2] at k = 4 (N = 16 verify steps).
H4 = [2, 2, 4, 6, 2]


def spec_payload_k(hist: list[int], k: int) -> dict:
    steps = sum(hist)
    accepted = sum(j * n for j, n in enumerate(hist))
    return {
        "mean_acceptance_length": 1 + accepted / steps,
        "draft_acceptance_rate": accepted / (k * steps),
        "acceptance_histogram": list(hist),
        "num_spec_steps": steps,
        "num_accepted_draft_tokens": accepted,
        "num_draft_tokens": k * steps,
        "num_spec_tokens": k,
    }


def capture_k(
    i: int,
    hist: list[int] | None,
    k: int,
    *,
    segment: int | None = None,
    server: str | None = None,
    start_ms: float | None = None,
) -> dict:
    """One request whose payload carries `hist` at k (None: a response without the payload)."""
    cap = make_capture(i, [1, 0, 0, 0], start_ms=100.0 * i if start_ms is None else start_ms)
    body = cap["responses"][0]
    if hist is None:
        body.pop("metrics")
    else:
        body["metrics"] = {"speculative_decoding": spec_payload_k(hist, k)}
        tokens = sum((j + 1) * n for j, n in enumerate(hist))
        body["usage"]["completion_tokens"] = tokens
        body["choices"][0]["message"]["content"] = "x" * tokens
    if segment is not None:
        cap["segment"] = segment
    if server is not None:
        cap["server"] = server
    return cap


def session_of(captures: list[dict]) -> Any:
    return SimpleNamespace(accumulator=accumulate(captures), artifact_dir=None, spec_method=None)


def delta_of(hist: list[int]) -> CounterDelta:
    """The counters vLLM would show for these steps: D, draft tokens, accepted, P[i]."""
    k = len(hist) - 1
    per_pos = [sum(hist[j] for j in range(i + 1, k + 1)) for i in range(k)]
    accepted = sum(j * n for j, n in enumerate(hist))
    return CounterDelta(
        drafts=sum(hist),
        draft_tokens=k * sum(hist),
        accepted=accepted,
        per_pos=per_pos,
        duration_s=10.0,
        label_sets=1,
        present=True,
    )


class StubPoller:
    def __init__(self, delta: CounterDelta) -> None:
        self.view = ServerCounterView("http://127.0.0.1:1/metrics", None, None, delta, 3, None)

    def latest(self) -> ServerCounterView:
        return self.view


class StubMulti:
    """The MultiRun surface the TUI reads: servers, poller, segment_rows, set_*, progress."""

    def __init__(
        self,
        sessions: dict[str, Any],
        pollers: dict[str, StubPoller] | None = None,
        concurrency: int = 4,
    ) -> None:
        self.sessions = sessions
        self.pollers = pollers or {}
        self.calls: list[tuple[str, Any]] = []
        self.log = SegmentLog(concurrency, None, 128)
        self.finished = False
        self.stopped_early = False
        self.error: BaseException | None = None

    def start(self) -> None:
        self.calls.append(("start", None))

    def join(self, timeout: float | None = None) -> bool:
        return self.finished

    def progress(self) -> LoadProgress:
        """No load loop behind the stub: the read fails and the header, which never lets a
        progress read break the screen, shows no in-flight count (as the snapshots record)."""
        raise RuntimeError("a stub run has no load loop")

    @property
    def servers(self) -> dict[str, tuple[Any, Any]]:
        return {label: (None, s) for label, s in self.sessions.items()}

    def poller(self, label: str) -> StubPoller | None:
        return self.pollers.get(label)

    def segment_rows(self, draft_cost: float | str | None = "run") -> list[dict]:
        """As MultiRun: "run" is the run's own cost (None here: no --draft-cost)."""
        cost = None if draft_cost == "run" else draft_cost
        assert not isinstance(cost, str)
        results = {label: list(s.accumulator.results) for label, s in self.sessions.items()}
        settings = {label: self.log.settings() for label in self.sessions}
        if len(results) == 1:
            ((label, rs),) = results.items()
            return segment_table(rs, settings=settings[label], draft_cost=cost)
        return segment_table(results, settings=settings, draft_cost=cost)

    def set_concurrency(self, value: int | None) -> None:
        self.calls.append(("concurrency", value))
        self.log.change(concurrency=value)

    def set_request_rate(self, value: float | None, mode: str | None = None) -> None:
        self.calls.append(("request_rate", value))
        self.log.change(request_rate=value)

    def set_output_tokens(self, mean: int | None, stddev: float = 0.0) -> None:
        self.calls.append(("output_tokens", mean))
        self.log.change(output_tokens=mean)

    def stop(self) -> None:
        self.calls.append(("stop", None))


# k=2: h = [1, 1, 2]; k=6: h = [1, 0, 0, 0, 0, 0, 3] (hand sums in test_tui_tuning.py)
H2 = [1, 1, 2]
H6 = [1, 0, 0, 0, 0, 0, 3]


def run_config(**kw: Any) -> MonitorConfig:
    base = dict(
        concurrency=4,
        effective_concurrency=4,
        output_tokens_mean=128,
        request_rate=None,
        draft_cost=None,
    )
    return MonitorConfig(**{**base, **kw})


def one_server_app(hist: list[int] = H4, k: int = 4, **kw: Any) -> SpecmonApp:
    session = session_of([capture_k(1, hist, k)])
    return SpecmonApp(session, StubMulti({"run": session}), run_config(**kw), freeze_elapsed=1.0)


def three_server_app() -> tuple[SpecmonApp, StubMulti]:
    sessions = {
        "k2": session_of([capture_k(1, H2, 2)]),
        "k4": session_of([capture_k(1, H4, 4)]),
        "k6": session_of([capture_k(1, H6, 6)]),
    }
    runner = StubMulti(sessions)
    return SpecmonApp(sessions["k2"], runner, run_config(), freeze_elapsed=1.0), runner
