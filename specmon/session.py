"""RunSession: captures -> pipeline -> a fan-out to the registered sinks -> the exports.

`add(capture)` is thread-safe: it processes the capture (outside the lock) and hands the
result to every sink in registration order, under one lock (see specmon/sinks/base.py).
The built-in sinks, in order: the raw-capture writer (export level "raw"), the per-request
JSONL writer (levels "records" and "raw"), the release of response bodies (live runs), the
accumulator and the per-category table (`per_category`); `add_sink` appends more (segments, server counters, a screen, ...).

`finish()` calls every sink's `on_finish`, then composes the summary document once, in
memory (the accumulator's AIPerf blocks, then each sink's `export_extras()`), and writes
the JSON and the CSV once each, atomically. A session built with `RunSession.from_results`
(replay) or `artifact_dir=None` writes nothing.
"""

from __future__ import annotations

import errno
import os
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from specmon import stops
from specmon.accumulator import RunAccumulator, SpillFile
from specmon.capture import RawCapture
from specmon.errors import UserError
from specmon.export.common import CSV_NAME, JSON_NAME, JSONL_NAME, RAW_NAME
from specmon.export.csv_export import write_csv
from specmon.export.json_export import build_json, write_json
from specmon.export.safe_json import dumps_safe
from specmon.pipeline import RequestResult, process_capture
from specmon.results_window import RESULTS_WINDOW
from specmon.sinks.accumulator import AccumulatorSink
from specmon.sinks.base import ResultSink
from specmon.sinks.categories import PER_CATEGORY_KEY, CategorySink, ContextSink
from specmon.sinks.files import JsonlSink, RawCaptureSink
from specmon.sinks.memory import PAYLOAD_WINDOW, ReleaseBodies
from specmon.specdecode.fidelity import FIDELITY_KEY
from specmon.specdecode.method import SpecMethod
from specmon.stats import METRICS, is_spec_tag

EXPORT_LEVELS = ("summary", "records", "raw")
# Test-only hook: seconds finish() waits between the stream files and the summaries, so a
# test can send a signal "during the export" deterministically; the wait ends early once the
# file named by TEST_EXPORT_RELEASE_ENV exists (the test has sent its signals). Never set
# them otherwise.
TEST_EXPORT_DELAY_ENV = "SPECMON_TEST_EXPORT_DELAY_S"
TEST_EXPORT_RELEASE_ENV = "SPECMON_TEST_EXPORT_RELEASE"


def holds_run(directory: str | Path) -> bool:
    """Whether `directory` (or a per-server folder in it) holds a run's exports."""
    directory = Path(directory)
    if not directory.is_dir():
        return False
    return any(_run_files(directory))


def remove_run(directory: str | Path) -> None:
    """Delete a run's exports (--overwrite), so none of the earlier run's files (a raw
    capture, another server's folder) is left beside the new one. A symlink is removed
    itself, never its target."""
    for path in _run_files(Path(directory)):
        path.unlink(missing_ok=True)


def _run_files(directory: Path) -> list[Path]:
    return [*directory.glob("profile_export*"), *directory.glob("*/profile_export*")]


__all__ = ["EXPORT_LEVELS", "PAYLOAD_WINDOW", "RunSession", "holds_run", "remove_run"]


SPEC_TAGS = frozenset(tag for tag in METRICS if is_spec_tag(tag))


class RunSession:
    def __init__(
        self,
        artifact_dir: str | Path | None,
        export_level: str = "records",
        input_config: dict[str, Any] | None = None,
        *,
        live: bool = True,
        keep_responses: bool = False,
        window: int | None = RESULTS_WINDOW,
        engine: str | None = None,
        spill: bool = False,
    ) -> None:
        if export_level not in EXPORT_LEVELS:
            raise UserError(
                f"--export-level must be one of {', '.join(EXPORT_LEVELS)}, got {export_level!r}"
            )
        self.artifact_dir = Path(artifact_dir) if artifact_dir is not None else None
        self.export_level = export_level
        self.input_config = dict(input_config or {})
        # Read only this engine's payloads (--engine, or SGLang detected); None: any engine.
        self.engine = engine
        # The server's non-comparable verification modes (fidelity.verification_notes),
        # written on every record; set by whoever asked the server, before the load.
        self.verification_note: str | None = None
        # The speculative method and drafter (set_spec_method), for the header and exports.
        self.spec_method: SpecMethod | None = None
        # The request log keeps `window` results in memory and reads older ones back from
        # the JSONL (specmon/results_window.py); window=None keeps every result.
        # spill: no screen reads the run's live latency percentiles (a headless run, a
        # sweep's repeat), so those columns keep their values in a temporary file, read
        # back for the exact summary (accumulator.py SpillFile; issue 35 item 6); the
        # spec-decode ones stay (a sweep's live view shows them; mostly counted anyway)
        self.accumulator = RunAccumulator(
            live=live, window=window, spill=SpillFile() if spill else None, keep=SPEC_TAGS
        )
        # Responses (and their receive times) are dropped from kept results once written:
        # 100k streamed requests would otherwise hold every SSE chunk in memory.
        self.keep_responses = keep_responses
        self.was_cancelled = False
        self.paths: dict[str, Path] = {}
        self.sinks: list[ResultSink] = []
        self._lock = threading.Lock()
        self._wall_start_ns: int | None = None
        self._created_wall_ns = time.time_ns()
        self._finished = False
        self.write_failure: str | None = None  # the first failed write (disk full), if any
        self._open_sinks()

    def set_spec_method(self, method: SpecMethod | None) -> None:
        """The method shown in the header and written under the exports' input config
        `specmon` key (AIPerf's own input_config fields stay as they are)."""
        self.spec_method = method
        if method is not None:
            self.input_config["specmon"] = {
                **self.input_config.get("specmon", {}),
                **method.to_json(),
            }

    @classmethod
    def from_results(
        cls, results: Iterable[RequestResult], input_config: dict[str, Any] | None = None
    ) -> RunSession:
        """A read-only session over finished results (for replay); writes nothing."""
        session = cls(None, "summary", input_config, live=False, window=None)
        for result in results:
            session.accumulator.add(result)
            session.categories.on_result(result, None)  # the tables the monitor reads
            session.contexts.on_result(result, None)
        session._finished = True
        return session

    def _open_sinks(self) -> None:
        if self.artifact_dir is not None:
            try:
                self.artifact_dir.mkdir(parents=True, exist_ok=True)
                if self.export_level == "raw":
                    self.paths["raw"] = self.artifact_dir / RAW_NAME
                    self.sinks.append(RawCaptureSink(self.paths["raw"], self._write_failed))
                if self.export_level in ("records", "raw"):
                    self.paths["jsonl"] = self.artifact_dir / JSONL_NAME
                    jsonl = JsonlSink(self.paths["jsonl"], self._write_failed)
                    self.sinks.append(jsonl)
                    self.accumulator.results.reader = jsonl.index
            except OSError as exc:
                raise UserError(
                    f"cannot write to artifact dir {self.artifact_dir}: {exc.strerror or exc}"
                ) from None
        if not self.keep_responses:
            self.sinks.append(ReleaseBodies(PAYLOAD_WINDOW))
        self.sinks.append(AccumulatorSink(self.accumulator))
        self.categories = CategorySink()
        self.contexts = ContextSink()
        self.sinks += [self.categories, self.contexts]

    def _write_failed(self, message: str) -> None:
        """The first failed write stops the run cleanly (specmon/stops.py fail: exit 1)."""
        if self.write_failure is None:
            self.write_failure = message
            stops.fail(message)

    def add_sink(self, sink: ResultSink) -> None:
        """Register one more consumer: it sees every result added from now on, in order,
        then the finish, and contributes its export_extras() to the summary JSON."""
        with self._lock:
            self.sinks.append(sink)

    # ----------------------------------------------------------------- adding

    def add(self, capture: RawCapture) -> RequestResult:
        """Process one capture and hand it to every sink. Thread-safe."""
        # pure; runs outside the lock
        result = process_capture(capture, self.engine, self.verification_note)
        with self._lock:
            if capture.wall_start_ns is not None and (
                self._wall_start_ns is None or capture.wall_start_ns < self._wall_start_ns
            ):
                self._wall_start_ns = capture.wall_start_ns
            for sink in self.sinks:
                sink.on_result(result, capture)
        return result

    def add_result(self, result: RequestResult) -> None:
        """Hand an already-processed result (a replayed record) to every sink, with no
        capture. Thread-safe."""
        with self._lock:
            for sink in self.sinks:
                sink.on_result(result, None)

    # ----------------------------------------------------------------- finishing

    def export_document(self, was_cancelled: bool | None = None) -> dict[str, Any]:
        """The summary JSON document: AIPerf's layout, then specmon's extras from the
        sinks (in registration order)."""
        acc = self.accumulator
        cancelled = self.was_cancelled if was_cancelled is None else was_cancelled
        doc = build_json(
            acc.summary(),
            acc.pooled_histogram_sorted() if acc.spec_request_count else None,
            input_config=self.input_config,
            was_cancelled=cancelled,
            error_summary=acc.error_summary_list(),
            start_ns=self._wall_start_ns or self._created_wall_ns,
            end_ns=time.time_ns(),
        )
        for sink in self.sinks:
            try:
                doc.update(sink.export_extras())
            except Exception as exc:  # one sink's bug must never cost the summary export
                _sink_failed(doc, sink, "export_extras", exc)
        return doc

    def finish(self, was_cancelled: bool = False) -> dict[str, Path]:
        """Finish every sink, then write JSON + CSV once each, atomically. A second call
        writes nothing and returns the same paths."""
        with self._lock:
            if self._finished:
                return dict(self.paths)
            self._finished = True
            self.was_cancelled = self.was_cancelled or was_cancelled
            for sink in self.sinks:
                try:
                    sink.on_finish(self.was_cancelled)
                except Exception as exc:  # finish() never raises: the others still finish
                    _sink_failed(None, sink, "on_finish", exc)
            if self.artifact_dir is None:
                return dict(self.paths)
            if delay := float(os.environ.get(TEST_EXPORT_DELAY_ENV) or 0):
                _test_export_hold(delay)
            doc = self.export_document()
            try:
                self._write_summary(self.artifact_dir, doc)
            except OSError as exc:  # no room for the summary: stderr gets it, one line
                self._summary_to_stderr(doc, exc)
            return dict(self.paths)

    def _write_summary(self, directory: Path, doc: dict[str, Any]) -> None:
        """The CSV first, the JSON last: the JSON's presence is what a watcher (a script, a
        test) takes as "the run is written", so it must not appear while the CSV is still
        to come (a reader that polled for the JSON after a hangup found no CSV yet). A CSV
        that cannot be written does not cost the JSON."""
        blocks = {k: v for k, v in doc.items() if isinstance(v, dict) and "unit" in v}
        per_category = doc.get(PER_CATEGORY_KEY)
        csv_error: OSError | None = None
        try:
            self.paths["csv"] = write_csv(
                directory / CSV_NAME, blocks, per_category, doc.get(FIDELITY_KEY)
            )
        except OSError as exc:
            csv_error = exc
        self.paths["json"] = write_json(directory / JSON_NAME, doc)
        if csv_error is not None:
            raise csv_error

    def _summary_to_stderr(self, doc: dict[str, Any], exc: OSError) -> None:
        why = "disk full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else exc.strerror or exc
        name = JSON_NAME if "csv" in self.paths else CSV_NAME  # the first that failed
        message = f"{why} writing {name}: the summary is the next line on stderr"
        self._write_failed(message)
        sys.stderr.write(f"specmon: {message}\n")
        sys.stderr.write(dumps_safe(doc).decode() + "\n")
        sys.stderr.flush()

    @property
    def finished(self) -> bool:
        return self._finished

    def summary_missing(self) -> list[str]:
        """The summary files finish() could not write (a full disk): what the run's last
        line must not call written. Empty before finish() and for a run with no dir."""
        if not self._finished or self.artifact_dir is None:
            return []
        return [
            name for key, name in (("csv", CSV_NAME), ("json", JSON_NAME)) if key not in self.paths
        ]


def _test_export_hold(delay: float) -> None:
    """Wait `delay` s, or until the test's release file exists (TEST_EXPORT_RELEASE_ENV)."""
    release = os.environ.get(TEST_EXPORT_RELEASE_ENV)
    end = time.monotonic() + delay
    while time.monotonic() < end and not (release and os.path.exists(release)):
        time.sleep(0.02)


def _sink_failed(doc: dict[str, Any] | None, sink: object, step: str, exc: Exception) -> None:
    """Say on stderr (and in the summary, under `sink_errors`) that one sink failed."""
    what = f"{type(sink).__name__}.{step}: {type(exc).__name__}: {exc}"
    print(f"specmon: internal error in {what}", file=sys.stderr)
    if doc is not None:
        doc.setdefault("sink_errors", []).append(what)
