"""The line writers: profile_export.jsonl (one record per profiling request) and
profile_export_raw.jsonl (every capture, --export-level raw). Each line is flushed as the
request lands (unbuffered), so a crash loses nothing already measured."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from specmon.capture import RawCapture
from specmon.export.common import open_new_stream
from specmon.export.jsonl_export import record_line
from specmon.pipeline import RequestResult
from specmon.results_window import JsonlIndex
from specmon.sinks.base import BaseSink


class _LineFile(BaseSink):
    """One line per result, written straight to the file descriptor. The first failed write
    (disk full, an I/O error) cuts the file back to its last whole line, stops writing and
    reports once through `on_failure` (the session stops the run); it never raises into the
    load loop that called it."""

    def __init__(self, path: Path, on_failure: Callable[[str], None] | None = None) -> None:
        self.path = path
        self.on_failure = on_failure
        # never through a symlink in the artifact dir; OSError: the session reports it
        self._stream: BinaryIO | None = open_new_stream(path)
        self.position = 0  # bytes written so far: where the next line starts
        self.lines = 0  # whole lines written
        self.failure: str | None = None  # why writing stopped (None: it did not)

    def _write(self, line: bytes) -> None:
        if self._stream is None:
            return
        fd = self._stream.fileno()
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view) :]
        except OSError as exc:
            self._failed(fd, exc)
            return
        self.position += len(line)
        self.lines += 1

    def _failed(self, fd: int, exc: OSError) -> None:
        with contextlib.suppress(OSError):  # back to the last whole line (frees, needs none)
            os.ftruncate(fd, self.position)
        self.on_finish(False)
        why = "disk full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else exc.strerror or exc
        self.failure = f"{why} writing {self.path.name}: stopped at {self.lines} requests"
        if self.on_failure is not None:
            self.on_failure(self.failure)

    def on_finish(self, was_cancelled: bool) -> None:
        if self._stream is not None:
            stream, self._stream = self._stream, None
            with contextlib.suppress(OSError):  # nothing is buffered: only the close
                stream.close()


class JsonlSink(_LineFile):
    """profile_export.jsonl: warmup requests are left out, as AIPerf does. `index` holds
    each line's offset, so the request log can read back results it no longer keeps
    (specmon/results_window.py)."""

    def __init__(self, path: Path, on_failure: Callable[[str], None] | None = None) -> None:
        super().__init__(path, on_failure)
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
