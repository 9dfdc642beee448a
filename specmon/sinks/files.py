"""The line writers: profile_export.jsonl (one record per profiling request) and
profile_export_raw.jsonl (every capture, --export-level raw). Each line is flushed as the
request lands, so a crash loses nothing already measured."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from specmon.capture import RawCapture
from specmon.export.common import open_new_stream
from specmon.export.jsonl_export import record_line
from specmon.pipeline import RequestResult
from specmon.results_window import JsonlIndex
from specmon.sinks.base import BaseSink


class _LineFile(BaseSink):
    def __init__(self, path: Path) -> None:
        self.path = path
        # never through a symlink in the artifact dir; OSError: the session reports it
        self._stream: BinaryIO | None = open_new_stream(path)
        self.position = 0  # bytes written so far: where the next line starts

    def _write(self, line: bytes) -> None:
        if self._stream is not None:
            self._stream.write(line)
            self._stream.flush()
            self.position += len(line)

    def on_finish(self, was_cancelled: bool) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None


class JsonlSink(_LineFile):
    """profile_export.jsonl: warmup requests are left out, as AIPerf does. `index` holds
    each line's offset, so the request log can read back results it no longer keeps
    (specmon/results_window.py)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.index = JsonlIndex(path)

    def on_result(self, result: RequestResult, capture: RawCapture | None) -> None:
        if result.phase != "warmup":
            self.index.note(self.position)
            self._write(record_line(result))


class RawCaptureSink(_LineFile):
    """profile_export_raw.jsonl: every capture as it was received (warmup included)."""

    def on_result(self, result: RequestResult, capture: RawCapture | None) -> None:
        if capture is not None:
            self._write(capture.to_json_line())
