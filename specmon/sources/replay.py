"""A finished run as a source: a profile_export.jsonl (specmon's or AIPerf's) or a specmon raw
capture read into feedable items, and `ReplayFeeder`, which feeds them into a RunSession at
full speed or paced by their recorded end times (`specmon replay`, commands/replay.py).
"""

from __future__ import annotations

import errno
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from specmon.constants import NS_PER_S
from specmon.errors import UserError
from specmon.interfaces import CounterSource, LoadProgress, RunLifecycle, SessionView
from specmon.sources.lifecycle import BackgroundRun

RAW = "raw capture"
RECORDS = "profile_export.jsonl"


@dataclass
class ReplayItem:
    end_ns: int | None
    feed: Callable[[Any], None]  # session -> None
    warmup: bool = False  # a warmup record: fed, but not a request of the run


@dataclass
class ReplaySource:
    path: Path
    kind: str
    items: list[ReplayItem]
    skipped: list[str] = field(default_factory=list)  # "line N: reason"
    model: str | None = None


def replay_file(path: Path) -> Path:
    """An artifact dir means its records (profile_export.jsonl), else its raw capture, as
    `specmon tune` and `compare` take dirs; a file is itself."""
    from specmon.export.common import JSONL_NAME, RAW_NAME

    if not path.is_dir():
        return path
    for name in (JSONL_NAME, RAW_NAME):
        if (path / name).is_file():
            return path / name
    raise UserError(f"replay: {path} is a folder without {JSONL_NAME} or {RAW_NAME}")


def _check_file(path: Path) -> None:
    """A one-line UserError unless `path` is a regular file: what it is instead (a FIFO
    would block the read for ever, a symlink loop is no missing file)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        dangling = path.is_symlink()
        raise UserError(
            f"replay: {path} is a symlink to a missing file"
            if dangling
            else f"replay file not found: {path}"
        ) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UserError(f"replay: {path} is a symlink loop") from None
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    if stat.S_ISFIFO(mode):
        raise UserError(f"replay: {path} is a FIFO (named pipe), not a file; save it first")
    if not stat.S_ISREG(mode):
        raise UserError(f"replay: {path} is not a regular file")


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    _check_file(path)
    try:
        with path.open("rb") as fh:
            for line_no, line in enumerate(fh, start=1):
                if line.strip():
                    yield line_no, line
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None


def detect_kind(obj: Any) -> str | None:
    if isinstance(obj, dict) and "responses" in obj and "request" in obj:
        return RAW
    if isinstance(obj, dict) and ("metadata" in obj or "metrics" in obj):
        return RECORDS
    return None


def _not_jsonl(path: Path, line_no: int) -> str:
    """The one-line error for a first line that is not JSON (often the summary .json)."""
    try:
        whole = orjson.loads(path.read_bytes())
    except (orjson.JSONDecodeError, OSError):
        whole = None
    if isinstance(whole, dict):
        return (
            f"{path} is one JSON document (a run summary?); replay reads the per-request "
            f"profile_export.jsonl or a raw capture"
        )
    return f"{path}: line {line_no} is not JSON; expected a profile_export.jsonl or a raw capture"


def _feed_capture(capture: Any, session: Any) -> None:
    session.add(capture)


def _feed_result(result: Any, session: Any) -> None:
    session.add_result(result)


def load_source(path: str | Path) -> ReplaySource:
    """Read FILE into feedable items; bad lines are skipped and reported, not fatal."""
    from specmon.capture import CaptureError, RawCapture
    from specmon.export.jsonl_export import result_from_record

    path = replay_file(Path(path))
    source: ReplaySource | None = None
    for line_no, line in _lines(path):
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            if source is None:
                raise UserError(_not_jsonl(path, line_no)) from None
            source.skipped.append(f"line {line_no}: not JSON")
            continue
        if source is None:
            kind = detect_kind(obj)
            if kind is None:
                raise UserError(
                    f"{path}: line {line_no} is neither a raw capture nor a "
                    f"profile_export.jsonl record"
                )
            source = ReplaySource(path, kind, [])
        try:
            if source.kind == RAW:
                capture = RawCapture.from_dict(obj)
                source.model = source.model or capture.request.get("model")
                end = max(capture.response_ns) if capture.response_ns else capture.end_ns
                warm = capture.benchmark_phase == "warmup"
                source.items.append(ReplayItem(end, partial(_feed_capture, capture), warm))
            else:
                result = result_from_record(obj)
                feed = partial(_feed_result, result)
                source.items.append(ReplayItem(result.end_ns, feed, result.phase == "warmup"))
        except (CaptureError, ValueError, KeyError, TypeError) as exc:
            source.skipped.append(f"line {line_no}: {str(exc).splitlines()[0]}")
    if source is None:
        raise UserError(f"{path} is empty: nothing to replay")
    return source


class ReplayFeeder(BackgroundRun):
    """interfaces.MonitoredRun over a finished run: feeds the items to `session` on a thread,
    paced by their recorded end times or at full speed. It sends no requests (no load
    knobs: its load was fixed when it was recorded), has one server, no /metrics poller and
    no segments table."""

    thread_name = "specmon-replay"

    def __init__(self, source: ReplaySource, session: Any, speed: float = 0.0) -> None:
        super().__init__()
        self.source = source
        self.session = session
        self.speed = speed
        self.fed = 0
        self.fed_requests = 0  # fed records that are the run's requests (not warmup)
        self._stop = threading.Event()  # also the pacing sleep: wait(timeout)

    def _main(self) -> None:
        origin_ns = next((i.end_ns for i in self.source.items if i.end_ns is not None), None)
        t0 = time.monotonic()
        for item in self.source.items:
            if self.speed > 0 and origin_ns is not None and item.end_ns is not None:
                due = t0 + (item.end_ns - origin_ns) / NS_PER_S / self.speed
                if self._stop.wait(max(0.0, due - time.monotonic())):
                    return
            elif self._stop.is_set():
                return
            item.feed(self.session)
            self.fed += 1
            self.fed_requests += not item.warmup

    def _request_stop(self) -> None:
        self._stop.set()

    def progress(self) -> LoadProgress:
        """The run's requests fed so far of all there are, warmup records left out as the
        request log leaves them out (the header and the log count the same rows); nothing
        is ever in flight."""
        phase = "done" if self.finished else "profiling" if self._thread else "starting"
        total = sum(not item.warmup for item in self.source.items)
        done = self.fed_requests
        return LoadProgress(done, done, total, 0, 0, 0.0, phase)

    # RunView: one server, no /metrics, no segments
    @property
    def servers(self) -> dict[str, tuple[RunLifecycle | None, SessionView]]:
        return {"run": (self, self.session)}

    def poller(self, label: str) -> CounterSource | None:
        return None

    def segment_rows(self, draft_cost: float | str | None = "run") -> list[dict] | None:
        return None
