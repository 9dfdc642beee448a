"""Assembling `specmon run` / `specmon demo`: inputs, preflight, the artifact dir, and one
RunSession + runner per server in a MultiRun. Nothing touches the artifact dir before the
inputs and the servers passed their checks."""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path
from typing import TextIO

from specmon import stops
from specmon.config import RunConfig, save_config
from specmon.constants import GC_THRESHOLDS
from specmon.interfaces import LoadControl
from specmon.run.multi import MultiRun
from specmon.session import RunSession
from specmon.sinks.alarms import AlarmSink
from specmon.specdecode.method import parse_method


def assemble(config: RunConfig, out: TextIO, save_config_path: str | None = None) -> MultiRun:
    """The run of a validated config, ready to start: the inputs were checked (a UserError
    otherwise), the model is the server's, the seed and the artifact dir are fixed.
    A stop signal during the checks raises `stops.Stopped` (see `empty_run`)."""
    stops.stage("setup", interruptible=True)  # a signal from here on stops at once
    check_inputs(config)
    stops.stage("setup")  # building the sessions: a signal now is seen before the load
    config.artifact_dir = choose_artifact_dir(config, out)
    if config.random_seed is None:  # record the seed actually used, so a run can be repeated
        config.random_seed = int(time.time_ns() % 2**31)
    if save_config_path:
        save_config(config, save_config_path)
    gc.set_threshold(*GC_THRESHOLDS)  # (constants.py: why)
    return MultiRun(config, make_session, make_runner)


def check_inputs(config: RunConfig) -> None:
    """Every input, before anything is written: prompt file or dataset, the servers and the
    model (preflight). A failure is a UserError; the artifact dir is untouched."""
    from specmon.run.load.runner import preflight

    if config.dataset:
        from specmon.sources.datasets import prepare_run

        prepare_run(config)
    elif config.effective_prompt_source == "file" and config.input_file:
        from specmon.sources.load.datasets import load_jsonl_prompts

        load_jsonl_prompts(config.input_file)
    config.model = preflight(config)


def choose_artifact_dir(config: RunConfig, out: TextIO) -> str:
    """The dir this run writes to: --artifact-dir (or the default), unless it holds an earlier
    run, which is kept: then DIR-2, DIR-3, ... (--overwrite replaces it). Says which."""
    from specmon.session import holds_run, remove_run

    wanted = Path(config.artifact_dir or config.default_artifact_dir(config.model or "unknown"))
    if config.overwrite or not holds_run(wanted):
        if config.overwrite and holds_run(wanted):
            print(f"specmon: replacing the earlier run in {wanted} (--overwrite)", file=out)
            remove_run(wanted)
        return str(wanted)
    n = 2
    while holds_run(candidate := wanted.with_name(f"{wanted.name}-{n}")):
        n += 1
    print(
        f"specmon: {wanted} holds an earlier run, kept; writing to {candidate} "
        f"(--overwrite replaces it)",
        file=out,
        flush=True,
    )
    return str(candidate)


def empty_run(config: RunConfig, signum: int, out: TextIO) -> int:
    """A stop before the load: an empty, complete run (was_cancelled) in the artifact dir."""
    stops.stage("export")
    print(f"specmon: stopped ({stops.name(signum)}) before the first request", file=out)
    config.artifact_dir = choose_artifact_dir(config, out)
    session = make_session(config)
    session.finish(was_cancelled=True)
    print(exports_line(config.artifact_dir, [session]), file=out, flush=True)
    return 128 + signum


def exports_line(artifact_dir: str | None, sessions: list[RunSession]) -> str:
    """The run's last word on its exports: "exports written to DIR" only when every
    summary file is there; after a failed write, which ones are not (their content went to
    stderr as one JSON line, specmon/session.py)."""
    missing = sorted({name for session in sessions for name in session.summary_missing()})
    if not missing:
        return f"exports written to {artifact_dir}"
    return (
        f"specmon: exports incomplete in {artifact_dir}: {', '.join(missing)} not written; "
        f"the summary is on stderr"
    )


def make_session(config: RunConfig) -> RunSession:
    """One server's session: the exports at --export-level, and the Prometheus endpoint's
    feed when --prometheus-port is set."""
    from specmon.sinks import prometheus

    input_config = config.model_dump(exclude={"api_key"})
    engine = None if config.engine == "auto" else config.engine  # --engine restricts detection
    # headless: no screen reads the run's live percentiles, so its columns spill to disk
    session = RunSession(
        config.artifact_dir,
        config.export_level,
        input_config,
        engine=engine,
        spill=config.headless,
    )
    session.set_spec_method(parse_method(config.spec_method))  # a server's word replaces it
    exporter = prometheus.attach(session, config.prometheus_port, config.prometheus_host)
    out = sys.stderr if config.headless else None  # the TUI shows them in its log
    label = config.url[0] if config.url else None
    session.add_sink(AlarmSink(label, out, exporter, log=session.accumulator.results))
    return session


def make_runner(config: RunConfig, session: RunSession) -> LoadControl:
    """One server's load: N worker processes with --workers N > 1, else one event loop."""
    if config.workers > 1:
        from specmon.run.load.workers import WorkerPool

        return WorkerPool(config, session)
    from specmon.run.load.runner import LoadRunner

    return LoadRunner(config, session)


def make_repeat(config: RunConfig) -> tuple[RunSession, LoadControl]:
    """A session and its runner for one config (a sweep's repeat)."""
    session = make_session(config)
    return session, make_runner(config, session)
