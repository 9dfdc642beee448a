"""The header's two lines as data: target, model, engine, k, load, progress, errors, alarms."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from specmon.errors import ServerUnreachable
from specmon.formatting import saturation_text
from specmon.interfaces import MonitorConfig, RunLifecycle, SessionView, knobs_of
from specmon.sinks.alarms import active_alarms
from specmon.stats import MetricRow
from specmon.tui.model.figures import shown_k
from specmon.tui.model.state import Choices, LoadSettings, ModelCache, ScreenInputs
from specmon.tui.modes import LIVE, Mode

if TYPE_CHECKING:
    from specmon.accumulator import RunSnapshot
    from specmon.tui.tuning_view import CounterStatus


@dataclass(frozen=True)
class HeaderInfo:
    target: str
    model: str
    engine: str
    k: int | str | None  # one k, or 'k1,k2' when several servers run different k
    load: str
    elapsed_s: float
    completed: int  # valid profiling requests
    errors: int
    request_count: int | None
    duration_s: float | None
    paused_arrivals: int | None  # None when not paused
    finished: bool
    mode: Mode = LIVE
    in_flight: int | None = None
    error_kinds: dict[str, int] = field(default_factory=dict)  # kind -> count
    failure: str | None = None  # why the load loop ended abnormally
    phase: str | None = None  # the load loop's phase: warmup | profiling | stopping | done
    # attempts the load loop sent again (in `errors`, but no request finished): the
    # session's count, so the header and the request log subtract the same rows
    retries: int = 0
    down_since: float | None = None  # time.time() the current outage began (LoadProgress)
    # AIPerf's request_throughput (valid requests / benchmark duration), the one req/s figure
    request_throughput: float | None = None
    progress_done: int | None = None  # what counts toward request_count when the runner says
    # the load client is the bottleneck (formatting.saturation_text): latencies include its
    # own delay, so the header says so while it lasts
    saturation: str | None = None
    alarms: tuple[str, ...] = ()  # the shown server's active acceptance alarms (sinks/alarms.py)
    method: str | None = None  # the speculative method (EAGLE-3, draft model, ...), where known


def header_of(
    snap: RunSnapshot,
    inputs: ScreenInputs,
    choices: Choices,
    cache: ModelCache,
    paused_arrivals: int | None,
) -> HeaderInfo:
    config, control, mode = inputs.config, inputs.control, inputs.mode
    info = HeaderInfo(
        target=", ".join(config.targets) or "-" if config is not None else "-",
        model=str((config and config.model) or "-"),
        engine=str(snap.engine or "-"),
        k=k_text(snap, inputs, choices, cache),
        load=load_text(config, choices.load),
        elapsed_s=elapsed(snap, choices, cache),
        completed=int(snap.request_count),
        errors=int(snap.error_count),
        retries=int(snap.retried_count),
        error_kinds=dict(snap.error_summary or {}),
        failure=failure(control),
        request_count=config.request_count if config else None,
        request_throughput=_avg(snap.std_rows.get("request_throughput")),
        duration_s=config.benchmark_duration if config else None,
        paused_arrivals=paused_arrivals,
        finished=control.finished if control is not None else not mode.drives_load,
        mode=mode,
        alarms=active_alarms(inputs.session(choices)),
        method=method_label(inputs.session(choices)),
        **runner_progress(shown_runner(inputs, choices)),
    )
    if info.request_count is None:  # a replay knows its record count: no "(until q)"
        done, total = known_total(control)
        info = replace(info, request_count=total, progress_done=done)
    return info


def method_label(session: SessionView) -> str | None:
    """The shown server's speculative method as the header names it (specdecode/method.py:
    the server's word, --spec-method, or a sweep's --serve line); None where unknown."""
    method = session.spec_method
    return method.label if method is not None else None


def _avg(row: MetricRow | None) -> float | None:
    return None if row is None or row.avg is None else float(row.avg)


def elapsed(snap: RunSnapshot, choices: Choices, cache: ModelCache) -> float:
    """The header's clock: it stops when the run ends (the screen stays up until q)."""
    if choices.freeze_elapsed is not None:
        return choices.freeze_elapsed
    return cache.ended_at_s if cache.ended_at_s is not None else float(snap.elapsed_s or 0.0)


def k_text(
    snap: RunSnapshot, inputs: ScreenInputs, choices: Choices, cache: ModelCache
) -> int | str | None:
    """k of the run; several servers at different k (demo --num-spec-tokens 2,4) show all."""
    label = inputs.label(choices)
    if inputs.multi:
        ks = [_server_k(s.accumulator, cache.counters.get(name)) for name, s in inputs.servers]
        shown = ",".join("?" if k is None else str(k) for k in ks)
        return f"{shown} · showing {label} ([ ] switch)"
    results = inputs.session(choices).accumulator.results
    for result in results[cache.k_seen :] if cache.k_seen < len(results) else ():
        k = result.spec.num_spec_tokens if result.spec is not None else None
        if k is not None:
            cache.ks.add(k)
    cache.k_seen = len(results)
    if len(cache.ks) > 1:
        return ",".join(str(k) for k in sorted(cache.ks))
    return shown_k(snap, cache.counters.get(label))


def _server_k(acc: Any, counters: CounterStatus | None) -> int | None:
    """One server's k from its accumulator (figures.shown_k's rule, without a snapshot)."""
    k = acc.num_spec_tokens or (counters.k if counters is not None else None)
    quiet = acc.request_count > 0 and not acc.spec_request_count and not acc.zero_step_requests
    if k is None and quiet and (counters is None or counters.no_drafts):
        return 0
    return k


def shown_runner(inputs: ScreenInputs, choices: Choices) -> RunLifecycle | None:
    """The runner of the server the panels show: the header's counts are that server's,
    so its in-flight count and phase must be too (not the sum over every server)."""
    if inputs.run is not None and inputs.multi:
        own = inputs.run.servers[inputs.label(choices)][0]
        if own is not None:
            return own
    return inputs.control


def failure(runner: RunLifecycle | None) -> str | None:
    """Why the load ended early, as the header says it (None: it did not)."""
    error = runner.error if runner is not None and runner.finished else None
    if error is None or isinstance(error, KeyboardInterrupt):
        return None
    if isinstance(error, ServerUnreachable):  # --max-outage: "... since HH:MM:SS; stopped
        # after S s", its first half, so that 80 columns show it (the console says it whole)
        return f"stopped: {str(error).split(';')[0]}"
    return f"load failed: {type(error).__name__}: {error}"


def runner_progress(runner: RunLifecycle | None) -> dict[str, Any]:
    """In-flight count and phase, for a runner that sends requests (not a replay)."""
    if runner is None or knobs_of(runner) is None:
        return {}
    try:
        p = runner.progress()
    except Exception:  # a progress read must never break the screen
        return {}
    return {
        "in_flight": p.in_flight,
        "phase": p.phase,
        "down_since": p.down_since,
        "saturation": saturation_text(p) if p.lag_warning else None,
    }


def known_total(runner: RunLifecycle | None) -> tuple[int | None, int | None]:
    """(done, total) a runner counts itself (a replay: records fed of its file's count,
    warmup records included), or (None, None)."""
    if runner is None:
        return None, None
    try:
        p = runner.progress()
    except Exception:  # a progress read must never break the screen
        return None, None
    return (p.completed, p.total) if p.total else (None, None)


def load_text(config: MonitorConfig | None, settings: LoadSettings) -> str:
    """The load as it is now: the knobs' current values (`>` shows at once), not the start."""
    if config is None:
        return "replay"
    if config.load_label:
        return config.load_label
    rate = settings.request_rate
    conc = settings.concurrency or config.concurrency
    parts = []
    if rate:
        parts.append(f"rate {rate:g}/s {config.request_rate_mode or ''}".rstrip())
    if conc or not rate:
        parts.append(f"concurrency {conc or 1}")
    if config.request_count:
        parts.append(f"count {config.request_count}")
    if config.benchmark_duration:
        parts.append(f"duration {config.benchmark_duration:g}s")
    return ", ".join(parts)
