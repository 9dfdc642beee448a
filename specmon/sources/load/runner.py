"""LoadRunner: the load generator on its own event loop in a background thread.

The TUI (main thread) and the headless printer only read `progress()` and the session's
accumulator, so drawing never delays a request. `RunSession.add` is thread-safe.
"""

from __future__ import annotations

import asyncio
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import orjson

from specmon.analysis.segments import SegmentLog
from specmon.capture import RawCapture
from specmon.config import RunConfig
from specmon.errors import UserError
from specmon.interfaces import LoadProgress
from specmon.sources.load.control import SegmentKnobs
from specmon.sources.load.generator import LoadGenerator
from specmon.specdecode.engines import engine_of_models, engine_of_server_info, probed_engines

__all__ = [
    "LoadProgress",
    "LoadRunner",
    "capture_sink",
    "detect_engine",
    "new_event_loop",
    "preflight",
]


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed (about twice the request rate of the default loop here)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency off Windows
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def capture_sink(session: Any) -> Callable[[dict[str, Any]], None]:
    """Capture dict -> RawCapture -> session.add (keys match RawCapture's fields)."""

    def sink(capture: dict[str, Any]) -> None:
        session.add(RawCapture(**capture))

    return sink


def _get_json(url: str, api_key: str | None, timeout: float) -> Any:
    headers = {"Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    with urllib.request.urlopen(
        urllib.request.Request(url, headers=headers), timeout=timeout
    ) as resp:
        return orjson.loads(resp.read())


def preflight(config: RunConfig, timeout: float = 10.0) -> str:
    """Check every server answers /v1/models and return the model to use.

    Unreachable server, HTTP error or a model list without ids -> one-line UserError.
    """
    if not config.url:
        raise UserError("no server given: pass --url http://HOST:PORT (or try `specmon demo`)")
    model = config.model
    for _label, base in config.targets():
        try:
            listing = _get_json(base + "/v1/models", config.api_key, timeout)
        except urllib.error.HTTPError as exc:
            raise UserError(
                f"server {base} answered HTTP {exc.code} on /v1/models (check --url and --api-key)"
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise UserError(f"cannot reach server {base}: {reason}") from None
        except orjson.JSONDecodeError:
            raise UserError(
                f"server {base} /v1/models did not return JSON (is it an OpenAI-compatible server?)"
            ) from None
        ids = [m.get("id") for m in (listing or {}).get("data", []) if isinstance(m, dict)]
        if model is not None and ids and model not in ids:  # a server that lists none: trust
            served = ", ".join(str(i) for i in ids[:5]) + (", ..." if len(ids) > 5 else "")
            raise UserError(f"--model {model}: server {base} does not serve it (it lists {served})")
        if model is None:
            if not ids:
                raise UserError(f"server {base} lists no model on /v1/models: pass --model NAME")
            model = ids[0]
    assert model is not None
    return model


def detect_engine(base: str, api_key: str | None, timeout: float = 5.0) -> str | None:
    """The engine whose requests need options (SGLang), when the server says it is one;
    else None (the adapters still auto-detect every engine from the payloads).

    From the engine registry's signatures: the /v1/models cards' owned_by ("sglang"), then
    /get_server_info (or the older /server_info) with server_args. vLLM's dev-mode
    /server_info carries vllm_config instead, so that route alone is not taken as SGLang.
    """
    wanted = probed_engines()
    try:
        found = engine_of_models(_get_json(base + "/v1/models", api_key, timeout))
        if found in wanted:
            return found
    except (urllib.error.URLError, OSError, ValueError, AttributeError):
        pass
    for route in ("/get_server_info", "/server_info"):
        try:
            info = _get_json(base + route, api_key, timeout)
        except (urllib.error.URLError, OSError, ValueError):
            continue
        found = engine_of_server_info(info)
        if found in wanted:
            return found
    return None


class RunLifecycle:
    """join / finished / stopped_early (of interfaces.RunControl), shared by LoadRunner and
    WorkerPool.

    Subclasses set `_done` when the load has ended, `_stop_early` when stop() came first,
    and say through `_started()` whether there is anything to wait for.
    """

    _done: threading.Event
    _stop_early: bool

    def _started(self) -> bool:
        raise NotImplementedError

    def join(self, timeout: float | None = None) -> bool:
        # An Event, not Thread.join: a Ctrl-C that interrupts Thread.join can leave the thread
        # looking finished while it still runs (CPython 3.11).
        if self._started():
            self._done.wait(timeout)
        return self.finished

    @property
    def finished(self) -> bool:
        return self._done.is_set()

    @property
    def stopped_early(self) -> bool:
        return self._stop_early


class LoadRunner(SegmentKnobs, RunLifecycle):
    """interfaces.LoadControl on one event loop in a background thread (thread-safe)."""

    def __init__(
        self,
        config: RunConfig,
        session: Any,
        *,
        sink: Callable | None = None,
        worker_id: str | None = None,
        arrival_offset_s: float = 0.0,
    ) -> None:
        self.config = config
        self.arrival_offset_s = arrival_offset_s
        self.session = session
        self.sink = sink or capture_sink(session)
        self.worker_id = worker_id
        self.error: BaseException | None = None  # what ended the thread abnormally
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._generator: LoadGenerator | None = None
        self._ready = threading.Event()
        self._done = threading.Event()
        self._stop_early = False
        self.segment_log = SegmentLog(
            config.effective_concurrency, config.request_rate, config.output_tokens_mean
        )
        self.before_profiling: Callable[[], None] | None = None  # after warmup, on the load thread

    # lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:  # idempotent: the TUI may call it again
            return
        if self.config.model is None:
            self.config.model = preflight(self.config)
        self._thread = threading.Thread(target=self._thread_main, name="specmon-load", daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def stop(self) -> None:
        """Stop sending; in-flight requests are cancelled and recorded as `cancelled`."""
        if not self.finished:  # stopping a finished run (TUI quit after the end) is no cancel
            self._stop_early = True
        self._call(lambda g: g.request_stop())

    def _started(self) -> bool:
        return self._thread is not None

    def progress(self) -> LoadProgress:
        gen = self._generator
        if gen is None:
            return LoadProgress(0, 0, self.config.request_count, 0, 0, 0.0, "starting")
        return gen.progress()

    # run-time knobs (SegmentKnobs): each real change starts a new load segment -----------
    def _apply(self, knob: str, args: tuple[Any, ...], segment: int | None) -> None:
        setter = _SETTERS[knob]

        def apply(generator: LoadGenerator) -> None:
            setter(generator, *args)
            _tag(generator, segment)

        self._call(apply)

    def unlanded(self, landed: int, progress: LoadProgress) -> int | None:
        """Exact: a request counts as in flight until after it is recorded, so sent - landed
        (landed read before progress; a landing in between only raises the count)."""
        sent = progress.in_flight + progress.completed + progress.warmup_completed
        sent += progress.retries  # each failed connection attempt lands as an error
        return sent - landed if sent >= landed else None

    def set_segment(self, segment: int | None) -> None:
        """Tag later requests with a load-segment number (for tuning sweeps)."""
        self._call(lambda g: setattr(g, "segment", segment))

    @property
    def generator(self) -> LoadGenerator | None:
        """The generator on the load thread (read-only use from other threads)."""
        return self._generator

    @property
    def arrival_times(self) -> list[float]:
        return list(self._generator.arrival_times) if self._generator else []

    # internals -----------------------------------------------------------------------
    def _call(self, fn: Callable[[LoadGenerator], None]) -> None:
        loop, gen = self._loop, self._generator
        if loop is None or gen is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(fn, gen)
        except RuntimeError:  # loop closed between the check and the call
            pass

    def _thread_main(self) -> None:
        loop = new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        label, base = self.config.targets()[0]
        try:
            if self.config.model is None:  # preflight() resolves it before any runner starts
                raise RuntimeError("LoadRunner needs config.model; run preflight() first")
            self._generator = LoadGenerator(
                self.config,
                self.config.model,
                base,
                self.sink,
                server_label=label,
                worker_id=self.worker_id,
                arrival_offset_s=self.arrival_offset_s,
                segment_log=self.segment_log,
                before_profiling=self.before_profiling,
            )
            if self._stop_early:  # stop() raced ahead of the thread
                self._generator.request_stop()
            self._ready.set()
            loop.run_until_complete(self._generator.run())
        except BaseException as exc:
            self.error = exc
        finally:
            self._ready.set()
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()
                self._done.set()


_SETTERS: dict[str, Callable[..., None]] = {
    "concurrency": LoadGenerator.set_concurrency,
    "request_rate": LoadGenerator.set_request_rate,
    "output_tokens": LoadGenerator.set_output_tokens,
}


def _tag(generator: LoadGenerator, segment: int | None) -> None:
    if segment is not None:
        generator.segment = segment
