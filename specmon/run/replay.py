"""Assembling `specmon replay FILE`: the finished run's records fed into a RunSession that
writes nothing, at full speed or paced by their recorded end times, for the monitor."""

from __future__ import annotations

from dataclasses import dataclass

from specmon.errors import UserError
from specmon.interfaces import MonitorConfig
from specmon.session import RunSession
from specmon.sources.replay import ReplayFeeder, load_source


@dataclass(frozen=True)
class Replay:
    config: MonitorConfig  # what the header shows
    feeder: ReplayFeeder  # the run's lifecycle and view (no load knobs)
    session: RunSession


def assemble_replay(path: str, speed: float, refresh_hz: float, theme: str | None) -> Replay:
    """The replay of `path` (a profile_export.jsonl or a raw capture); a UserError names a
    bad value or file."""
    if speed < 0:
        raise UserError(f"--speed must be >= 0 (0 = full speed), got {speed:g}")
    if not 0 < refresh_hz <= 60:
        raise UserError(f"--refresh-hz must be in (0, 60], got {refresh_hz:g}")
    source = load_source(path)
    session = RunSession(None, "summary", live=False, keep_responses=True)
    pace = f"x{speed:g}" if speed else "full speed"
    config = MonitorConfig(
        targets=[str(source.path)],
        model=source.model,
        refresh_hz=refresh_hz,
        theme=theme,
        artifact_dir=str(source.path.parent),
        load_label=f"replay of {source.kind}, {len(source.items)} records, {pace}",
    )
    return Replay(config, ReplayFeeder(source, session, speed), session)
