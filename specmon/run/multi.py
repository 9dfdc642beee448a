"""Several servers side by side: one LoadRunner + RunSession per `--url`, driven together.

Load modes over N servers:
* default: every server gets the configured concurrency / rate / request count (its own
  prompt stream, seed + i);
* `--split`: concurrency, rate, request and warmup counts are divided among the servers;
* `--mirror`: every server gets the full load and the same seed, so the same prompts in the
  same order (the way to compare servers started at different k or with other drafters).

With one server nothing changes: its exports go to --artifact-dir itself; with several,
to `<artifact-dir>/<label>/`. MultiRun is an interfaces.RunLifecycle + LoadKnobs (start,
stop, join, finished, progress, set_*), so the headless loop and the TUI drive it like one
runner, and
an interfaces.RunView for the TUI: `.servers` (label -> (runner, session)), `.poller(label)`
(the live ServerCounterPoller, None without /metrics) and `.segment_rows()`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from specmon.analysis.segments import RUN, SegmentTable, ServerWide
from specmon.config import RunConfig
from specmon.decision.slo import slo_option
from specmon.errors import UserError
from specmon.interfaces import LoadControl, LoadProgress, SessionView
from specmon.run.load.control import knob_shares, merge_progress, split_int
from specmon.run.load.runner import detect_engine, spec_method, verification_note
from specmon.segment_plan import format_segments, parse_segments, split_plan
from specmon.server.promql import check_selector
from specmon.server.scrape import ServerCounterPoller, ServerCounterView
from specmon.server.server_view import CounterWatch, SessionProbe
from specmon.server.store_counters import StoreCounterPoller, store_url
from specmon.session import RunSession
from specmon.sinks.saturation import SaturationSink
from specmon.sinks.segments import SegmentSink
from specmon.sinks.server_counters import ServerCounterSink
from specmon.sources.datasets import sub_shard
from specmon.sources.load.generator import describe_outages
from specmon.specdecode.method import SpecMethod


@dataclass
class ServerRun:
    label: str
    url: str
    config: RunConfig
    runner: LoadControl
    session: RunSession
    server_metrics: dict[str, Any] | None = None  # the export's server_metrics object, after finish
    counter_view: ServerCounterView | None = None
    metrics_unavailable: str | None = None  # why server_metrics is None, after finish
    segments: list[dict[str, Any]] = field(default_factory=list)


def folder_name(label: str) -> str:
    """A label as one path component (host:port stays readable)."""
    return re.sub(r"[^A-Za-z0-9._:=+-]+", "_", label).strip("._") or "server"


class MultiRun:
    def __init__(
        self,
        config: RunConfig,
        make_session: Callable[[RunConfig], RunSession],
        make_runner: Callable[[RunConfig, RunSession], LoadControl],
        *,
        detect: Callable[[str, str | None], str | None] = detect_engine,
        note: Callable[[str, str | None], str | None] = verification_note,
        method: Callable[[str, str | None], SpecMethod | None] = spec_method,
    ) -> None:
        self.config = config
        targets = config.targets()
        labels = [label for label, _ in targets]
        if len(set(labels)) != len(labels):
            dup = next(label for label in labels if labels.count(label) > 1)
            raise UserError(f"two --url share the label '{dup}': name them, e.g. --url a=URL")
        self.mode = (
            ("split" if config.split else "mirror" if config.mirror else "independent")
            if len(targets) > 1
            else "single"
        )
        self.runs: list[ServerRun] = []
        for index, (label, base) in enumerate(targets):
            cfg = self._server_config(index, len(targets))
            if cfg.engine == "auto":
                # the engine the server names (SGLang) fixes its request options and, as
                # --engine would, the payloads read
                detected = detect(base, config.api_key)
                if detected is not None:
                    cfg.engine = detected
            session = make_session(cfg)
            if cfg.engine in ("auto", "vllm"):  # suffix padding and FLy are vLLM's modes
                session.verification_note = note(base, config.api_key)
            told = (
                method(base, config.api_key) if cfg.engine in ("auto", "vllm", "sglang") else None
            )
            if told is not None:  # the server's word over --spec-method
                session.set_spec_method(told)
            self.runs.append(ServerRun(label, base, cfg, make_runner(cfg, session), session))
        self.watch = self._counter_watch() if config.server_metrics else None
        self.segment_rows_final: list[dict[str, Any]] = []
        self._segments = SegmentTable(
            draft_cost=config.draft_cost,
            across_servers=self.mode != "split",
            slo=slo_option(config.slo),
        )
        self._segments.server_wide = self._server_wide
        self._segments.saturation = self._saturation
        self._counter_sinks = {r.label: self._add_sinks(r) for r in self.runs}

    def _counter_watch(self) -> CounterWatch:
        """Each server's /metrics, with the client's side of each scrape (the live verdict);
        or, with --server-metrics-from, the store's series of the service's replicas (no
        live verdict: the store lags by its scrape interval)."""
        targets = {r.label: r.url for r in self.runs}
        source = self.config.server_metrics_from
        if source is None:
            probes = {r.label: SessionProbe(r.runner, r.session.accumulator) for r in self.runs}
            return CounterWatch(targets, probes=probes)
        if len(self.runs) > 1:
            raise UserError(
                "--server-metrics-from reads one service's replicas: give one --url "
                "(--selector picks its series)"
            )
        store, selector = store_url(source), self.config.selector
        check_selector(selector)  # a bad one: the one-line error now, before the load
        return CounterWatch(
            targets, make_poller=lambda url, probe: StoreCounterPoller(store, selector)
        )

    def _add_sinks(self, run: ServerRun) -> ServerCounterSink:
        """Each session feeds the shared segment table and contributes `segments` and
        `server_metrics` to its summary JSON (in that order)."""
        key = run.label if len(self.runs) > 1 else None
        settings = (
            self._segment_settings
            if key is not None
            else partial(_segment_settings, self.primary.runner)
        )
        run.session.add_sink(SegmentSink(self._segments, key, run.label, settings))
        run.session.add_sink(SaturationSink(partial(_saturation_log, run.runner)))
        counters = ServerCounterSink(self.watch, run.label, run.session.accumulator)
        counters.outage = partial(_outage, run.runner)
        run.session.add_sink(counters)
        return counters

    def _server_wide(self) -> dict[str | None, ServerWide]:
        """Each server's /metrics acceptance over the run so far (the final window once
        the watch stopped), for its segments without spec-decode records; a server whose
        counters counted no verify step (or that has none) is left out: it is at k=0."""
        if self.watch is None:
            return {}
        out: dict[str | None, ServerWide] = {}
        for run in self.runs:
            view = self.watch.views.get(run.label) or self.watch.latest(run.label)
            delta = view.delta if view is not None else None
            if delta is None or delta.drafts <= 0 or not delta.per_pos or not delta.consistent:
                continue
            key = run.label if len(self.runs) > 1 else None
            out[key] = ServerWide(delta.num_spec_tokens, dict(enumerate(delta.histogram())))
        return out

    def _saturation(self) -> dict[str | None, Any]:
        """Each server's client SaturationLog (its runner's; absent where not known)."""
        out: dict[str | None, Any] = {}
        for run in self.runs:
            log = _saturation_log(run.runner)
            if log is not None:
                out[run.label if len(self.runs) > 1 else None] = log
        return out

    def _segment_settings(self) -> dict[str, dict[int, dict[str, Any]]]:
        return {r.label: _segment_settings(r.runner) for r in self.runs}

    # per-server configuration ---------------------------------------------------------
    def _server_config(self, index: int, count: int) -> RunConfig:
        config = self.config
        update: dict[str, Any] = {"url": [config.url[index]]}
        if count > 1:
            update["artifact_dir"] = str(
                Path(config.artifact_dir or ".") / folder_name(config.targets()[index][0])
            )
            if config.random_seed is not None and not config.mirror:
                update["random_seed"] = config.random_seed + index
        if config.split and count > 1:
            update.update(self._split_share(index, count))
        return config.model_copy(update=update, deep=True)

    def _split_share(self, index: int, count: int) -> dict[str, Any]:
        config = self.config
        share: dict[str, Any] = {}
        if config.request_rate is None or config.concurrency is not None:
            total = config.effective_concurrency or 1
            if total < count:
                raise UserError(
                    f"--split: concurrency {total} is less than the {count} servers; "
                    f"raise --concurrency or drop --split"
                )
            share["concurrency"] = split_int(total, count)[index]
        if config.request_rate is not None:
            share["request_rate"] = config.request_rate / count
        if config.request_count is not None:
            if config.request_count < count:
                raise UserError(
                    f"--split: {config.request_count} requests cannot be shared by "
                    f"{count} servers; raise --request-count"
                )
            share["request_count"] = split_int(config.request_count, count)[index]
        share["warmup_request_count"] = split_int(config.warmup_request_count, count)[index]
        if config.dataset:  # each row to one server (--mirror sends every server the same)
            share["dataset_shard"] = sub_shard(config.dataset_shard, index, count)
        if config.segments:
            share["segments"] = format_segments(
                split_plan(parse_segments(config.segments), count, index)
            )
        return share

    # the TUI's view ------------------------------------------------------------------
    @property
    def servers(self) -> dict[str, tuple[LoadControl | None, SessionView]]:
        return {r.label: (r.runner, r.session) for r in self.runs}

    @property
    def primary(self) -> ServerRun:
        return self.runs[0]

    def poller(self, label: str) -> ServerCounterPoller | None:
        return self.watch.pollers.get(label) if self.watch is not None else None

    def segment_rows(self, draft_cost: float | str | None = RUN) -> list[dict[str, Any]]:
        """The segments table over every server, as segment_table() gives it on every result
        so far (the sessions' SegmentSinks fold each result in as it lands); `draft_cost`
        as SegmentTable.rows takes it (the TUI passes its live +/- cost)."""
        if len(self.runs) > 1:
            return self._segments.rows(self._segment_settings(), draft_cost)
        return self._segments.rows(_segment_settings(self.primary.runner), draft_cost)

    # RunLifecycle, over the servers' runners ---------------------------------------------
    def start(self) -> None:
        if self.watch is not None:
            self.watch.start()  # baselines before the first request
            for run in self.runs:
                if run.config.warmup_request_count and hasattr(run.runner, "before_profiling"):
                    run.runner.before_profiling = partial(self.watch.rebaseline, run.label)
        for run in self.runs:
            run.runner.start()

    def stop(self) -> None:
        for run in self.runs:
            run.runner.stop()

    def join(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for run in self.runs:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            run.runner.join(left)
        return self.finished

    @property
    def error(self) -> BaseException | None:
        """The first server's load error once every load has ended (None before): read
        live, so a monitor that never joins sees a --max-outage stop as it happens."""
        if not self.finished:
            return None
        return next((r.runner.error for r in self.runs if r.runner.error), None)

    @property
    def finished(self) -> bool:
        return all(r.runner.finished for r in self.runs)

    @property
    def stopped_early(self) -> bool:
        return any(r.runner.stopped_early for r in self.runs)

    def progress(self) -> LoadProgress:
        parts = [r.runner.progress() for r in self.runs]
        return parts[0] if len(parts) == 1 else merge_progress(parts)

    # run-time knobs: each server's runner starts its own segment --------------------------
    def set_concurrency(self, value: int | None) -> None:
        for run, share in zip(self.runs, self._shares("concurrency", value)):
            run.runner.set_concurrency(share)

    def set_request_rate(self, value: float | None, mode: str | None = None) -> None:
        for run, share in zip(self.runs, self._shares("request_rate", value)):
            run.runner.set_request_rate(share, mode)

    def set_output_tokens(self, mean: int | None, stddev: float = 0.0) -> None:
        for run in self.runs:
            run.runner.set_output_tokens(mean, stddev)

    def _shares(self, knob: str, value: Any) -> list[Any]:
        """--split divides the run-wide value among the servers; otherwise each gets it."""
        if self.mode != "split":
            return [value] * len(self.runs)
        return knob_shares(knob, value, len(self.runs))

    # the end -----------------------------------------------------------------------------
    def finish(self) -> None:
        """Stop the /metrics watch (its final views go into the exports), then finish every
        session: each writes its JSON and CSV once, with `segments` and `server_metrics`."""
        cancelled = self.stopped_early
        if self.watch is not None:
            self.watch.stop()
        for run in self.runs:
            run.session.finish(was_cancelled=cancelled)
        rows = self.segment_rows()
        self.segment_rows_final = rows
        for run in self.runs:
            counters = self._counter_sinks[run.label]
            run.counter_view, run.server_metrics = counters.view, counters.report
            run.metrics_unavailable = counters.unavailable()
            run.segments = [r for r in rows if r["server"] in (run.label, None)]


def _saturation_log(runner: Any) -> Any:
    """The runner's SaturationLog, None where it keeps none (a multi-process load)."""
    get = getattr(runner, "saturation", None)
    return get() if callable(get) else None


def _outage(runner: Any) -> str | None:
    """The runner's unreachable spells in one line (LoadRunner and WorkerPool know them)."""
    spells = getattr(runner, "outage_spells", None)
    return describe_outages(spells()) if spells is not None else None


def _segment_settings(runner: Any) -> dict[int, dict[str, Any]]:
    log = getattr(runner, "segment_log", None)
    return log.settings() if log is not None else {}
