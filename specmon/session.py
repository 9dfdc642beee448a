"""RunSession: wires captures -> pipeline -> accumulator -> exporters.

`add(capture)` is thread-safe and writes the per-request JSONL line (and the raw capture
line at export level "raw") as the request lands, flushed, so nothing is lost on a crash.
`finish()` writes the summary JSON and CSV atomically. A session built with
`RunSession.from_results` (replay) or `artifact_dir=None` writes nothing.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

from specmon.accumulator import RunAccumulator
from specmon.capture import RawCapture
from specmon.errors import UserError
from specmon.export.common import CSV_NAME, JSON_NAME, JSONL_NAME, RAW_NAME
from specmon.export.csv_export import write_csv
from specmon.export.json_export import build_json, write_json
from specmon.export.jsonl_export import record_line
from specmon.pipeline import RequestResult, process_capture

EXPORT_LEVELS = ("summary", "records", "raw")


PAYLOAD_WINDOW = 2_000  # newest results whose raw spec-decode payload is kept


class RunSession:
    def __init__(
        self,
        artifact_dir: str | Path | None,
        export_level: str = "records",
        input_config: dict[str, Any] | None = None,
        *,
        live: bool = True,
        keep_responses: bool = False,
    ) -> None:
        if export_level not in EXPORT_LEVELS:
            raise UserError(
                f"--export-level must be one of {', '.join(EXPORT_LEVELS)}, got {export_level!r}"
            )
        self.artifact_dir = Path(artifact_dir) if artifact_dir is not None else None
        self.export_level = export_level
        self.input_config = dict(input_config or {})
        self.accumulator = RunAccumulator(live=live)
        # Responses (and their receive times) are dropped from kept results once written:
        # 100k streamed requests would otherwise hold every SSE chunk in memory.
        self.keep_responses = keep_responses
        # The spec-decode wire object of the newest PAYLOAD_WINDOW results (and of every
        # result without a record, where the raw payload says why) stays for the drill-down;
        # older valid ones are released (~1 kB each at detailed level).
        self._payload_window: deque[RequestResult] = deque()
        self.was_cancelled = False
        self.paths: dict[str, Path] = {}
        self._lock = threading.Lock()
        self._jsonl: BinaryIO | None = None
        self._raw: BinaryIO | None = None
        self._wall_start_ns: int | None = None
        self._created_wall_ns = time.time_ns()
        self._finished = False
        if self.artifact_dir is not None:
            self._open_streams()

    @classmethod
    def from_results(
        cls, results: Iterable[RequestResult], input_config: dict[str, Any] | None = None
    ) -> RunSession:
        """A read-only session over finished results (for replay); writes nothing."""
        session = cls(None, "summary", input_config, live=False)
        for result in results:
            session.accumulator.add(result)
        session._finished = True
        return session

    def _open_streams(self) -> None:
        try:
            self.artifact_dir.mkdir(parents=True, exist_ok=True)
            if self.export_level in ("records", "raw"):
                self.paths["jsonl"] = self.artifact_dir / JSONL_NAME
                self._jsonl = open(self.paths["jsonl"], "wb")
            if self.export_level == "raw":
                self.paths["raw"] = self.artifact_dir / RAW_NAME
                self._raw = open(self.paths["raw"], "wb")
        except OSError as exc:
            raise UserError(
                f"cannot write to artifact dir {self.artifact_dir}: {exc.strerror or exc}"
            ) from None

    # ----------------------------------------------------------------- adding

    def add(self, capture: RawCapture) -> RequestResult:
        """Process one capture, account it and write its lines. Thread-safe."""
        result = process_capture(capture)  # pure; runs outside the lock
        with self._lock:
            if capture.wall_start_ns is not None and (
                self._wall_start_ns is None or capture.wall_start_ns < self._wall_start_ns
            ):
                self._wall_start_ns = capture.wall_start_ns
            if self._raw is not None:
                self._raw.write(capture.to_json_line())
                self._raw.flush()
            if self._jsonl is not None and result.phase != "warmup":
                self._jsonl.write(record_line(result))
                self._jsonl.flush()
            if not self.keep_responses:
                capture.responses = []
                capture.response_ns = None  # ~1.4 kB for 32 events; the result has its times
                capture.request = _without_prompt(capture.request)
                self._bound_payloads(result)
            self.accumulator.add(result)
        return result

    def _bound_payloads(self, result: RequestResult) -> None:
        if result.spec_payload is None or result.spec is None:
            return  # nothing kept, or a rejected/zero-step payload: kept for good
        window = self._payload_window
        window.append(result)
        if len(window) > PAYLOAD_WINDOW:
            window.popleft().spec_payload = None

    def add_result(self, result: RequestResult) -> None:
        """Account an already-processed result (no lines written)."""
        self.accumulator.add(result)

    # ----------------------------------------------------------------- finishing

    def export_document(self, was_cancelled: bool | None = None) -> dict[str, Any]:
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
        if acc.cancelled_count:  # specmon's own key: requests cut short by the stop
            doc["cancelled_request_count"] = acc.cancelled_count
        return doc

    def finish(self, was_cancelled: bool = False) -> dict[str, Path]:
        """Close the streams and write JSON + CSV atomically. Safe to call twice."""
        with self._lock:
            self.was_cancelled = self.was_cancelled or was_cancelled
            self.accumulator.mark_finished()
            for stream in (self._jsonl, self._raw):
                if stream is not None:
                    stream.close()
            self._jsonl = self._raw = None
            self._finished = True
            if self.artifact_dir is None:
                return dict(self.paths)
            doc = self.export_document()
            self.paths["json"] = write_json(self.artifact_dir / JSON_NAME, doc)
            blocks = {k: v for k, v in doc.items() if isinstance(v, dict) and "unit" in v}
            self.paths["csv"] = write_csv(self.artifact_dir / CSV_NAME, blocks)
            return dict(self.paths)

    @property
    def finished(self) -> bool:
        return self._finished


_PROMPT_KEYS = ("messages", "prompt")


def _without_prompt(request: dict[str, Any]) -> dict[str, Any]:
    """The request body minus its prompt, once written: a synthetic 550-token prompt is
    ~3 kB of unique text per request, more than everything else a kept result holds. The
    raw capture (--export-level raw) has the whole body."""
    if not any(key in request for key in _PROMPT_KEYS):
        return request
    return {key: value for key, value in request.items() if key not in _PROMPT_KEYS}
