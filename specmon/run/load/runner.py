"""LoadRunner: the load generator on its own event loop in a background thread.

The TUI (main thread) and the headless printer only read `progress()` and the session's
accumulator, so drawing never delays a request. `RunSession.add` is thread-safe.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import orjson

from specmon.capture import RawCapture
from specmon.config import RunConfig
from specmon.errors import UserError
from specmon.event_loop import new_event_loop
from specmon.interfaces import LoadProgress
from specmon.run.load.control import SegmentKnobs
from specmon.segment_plan import SegmentLog
from specmon.server.models import (
    UNREACHABLE,
    HTTPError,
    describe_failure,
    get_json,
    get_models,
    model_ids,
)
from specmon.sources.lifecycle import BackgroundRun
from specmon.sources.load.generator import LoadGenerator
from specmon.sources.load.loop_health import SaturationLog
from specmon.specdecode.engines import engine_of_models, engine_of_server_info, probed_engines
from specmon.specdecode.fidelity import verification_notes
from specmon.specdecode.method import SpecMethod, of_server_info

__all__ = [
    "LoadProgress",
    "LoadRunner",
    "capture_sink",
    "detect_engine",
    "preflight",
]


def capture_sink(session: Any) -> Callable[[RawCapture], None]:
    """Each capture as the client filled it, into the session (no copy, no conversion);
    the session is read when a capture lands (a runner may be made before it has one)."""

    def sink(capture: RawCapture) -> None:
        session.add(capture)

    return sink


def preflight(config: RunConfig, timeout: float = 10.0) -> str:
    """Check every server answers /v1/models and return the model to use.

    Unreachable server, HTTP error or a model list without ids -> one-line UserError.
    """
    if not config.url:
        raise UserError("no server given: pass --url http://HOST:PORT (or try `specmon demo`)")
    model = config.model
    for _label, base in config.targets():
        ids = _listed_ids(base, config.api_key, timeout)
        if model is not None and ids and model not in ids:  # a server that lists none: trust
            served = ", ".join(str(i) for i in ids[:5]) + (", ..." if len(ids) > 5 else "")
            raise UserError(f"--model {model}: server {base} does not serve it (it lists {served})")
        if model is None:
            if not ids:
                raise UserError(f"server {base} lists no model on /v1/models: pass --model NAME")
            model = ids[0]
    assert model is not None
    return model


def _listed_ids(base: str, api_key: str | None, timeout: float) -> list[str]:
    """The ids of the server's /v1/models; a one-line UserError when it cannot say."""
    try:
        return model_ids(get_models(base, api_key, timeout))
    except HTTPError as exc:
        raise UserError(
            f"server {base} answered HTTP {exc.code} on /v1/models{http_hint(base, exc.code)}"
        ) from None
    except UNREACHABLE as exc:
        reason = getattr(exc, "reason", None) or describe_failure(exc)
        raise UserError(f"cannot reach server {base}: {reason}{unreachable_hint(reason)}") from None
    except orjson.JSONDecodeError:
        raise UserError(
            f"server {base} /v1/models did not return JSON (is it an OpenAI-compatible server?)"
        ) from None


def http_hint(base: str, code: int) -> str:
    """What an HTTP error on /v1/models usually means, for the one-line error."""
    path = urlsplit(base).path.rstrip("/")
    if code == 404 and path.endswith("/v1"):  # the OpenAI client's base_url habit
        root = base.rstrip("/")[: -len("/v1")]
        return f": drop the /v1, --url is the server's root ({root})"
    if code in (401, 403):
        return " (check --api-key or OPENAI_API_KEY)"
    if code == 404:
        return " (check --url: the server's root, e.g. http://HOST:8000, with no path)"
    return " (check --url and --api-key)"


def unreachable_hint(reason: object) -> str:
    """A refused connection is nearly always a wrong port or a server still starting."""
    text = str(reason).lower()
    if "refused" in text:
        return (
            " (nothing listens there: check the port, vLLM's default is 8000 and SGLang's "
            "30000, or wait until the server has loaded its model)"
        )
    if "name or service not known" in text or "nodename nor servname" in text:
        return " (unknown host name: check --url)"
    return ""


def detect_engine(base: str, api_key: str | None, timeout: float = 5.0) -> str | None:
    """The engine whose requests need options (SGLang), when the server says it is one;
    else None (the adapters still auto-detect every engine from the payloads).

    From the engine registry's signatures: the /v1/models cards' owned_by ("sglang"), then
    /get_server_info (or the older /server_info) with server_args. vLLM's dev-mode
    /server_info carries vllm_config instead, so that route alone is not taken as SGLang.
    """
    wanted = probed_engines()
    try:
        found = engine_of_models(get_models(base, api_key, timeout))
        if found in wanted:
            return found
    except (*UNREACHABLE, ValueError, AttributeError):
        pass
    for route in ("/get_server_info", "/server_info"):
        try:
            info = get_json(base + route, api_key, timeout)
        except (*UNREACHABLE, ValueError):
            continue
        found = engine_of_server_info(info)
        if found in wanted:
            return found
    return None


def spec_method(base: str, api_key: str | None, timeout: float = 5.0) -> SpecMethod | None:
    """The speculative method the server says it runs: SGLang's /get_server_info, vLLM's
    dev-mode /server_info (a plain vLLM has neither: None, and --spec-method stands)."""
    for route in ("/get_server_info", "/server_info"):
        try:
            found = of_server_info(get_json(base + route, api_key, timeout))
        except (*UNREACHABLE, ValueError):
            continue
        if found is not None:
            return found
    return None


def verification_note(base: str, api_key: str | None, timeout: float = 5.0) -> str | None:
    """The server's non-comparable verification modes, from vLLM's dev-mode /server_info
    (suffix decoding under Model Runner V2, FLy), joined; None when it names none or has
    no such route."""
    try:
        info = get_json(base + "/server_info", api_key, timeout)
    except (*UNREACHABLE, ValueError):
        return None
    notes = verification_notes(info)
    return "; ".join(notes) if notes else None


class LoadRunner(SegmentKnobs, BackgroundRun):
    """interfaces.LoadControl on one event loop in a background thread (thread-safe)."""

    thread_name = "specmon-load"

    def __init__(
        self,
        config: RunConfig,
        session: Any,
        *,
        sink: Callable[..., Any] | None = None,
        worker_id: str | None = None,
        arrival_offset_s: float = 0.0,
    ) -> None:
        super().__init__()
        self.config = config
        self.arrival_offset_s = arrival_offset_s
        self.session = session
        self.sink = sink or capture_sink(session)
        self.worker_id = worker_id
        self._loop: asyncio.AbstractEventLoop | None = None
        self._generator: LoadGenerator | None = None
        self._ready = threading.Event()
        self.segment_log = SegmentLog(
            config.effective_concurrency, config.request_rate, config.output_tokens_mean
        )
        self.before_profiling: Callable[[], None] | None = None  # after warmup, on the load thread

    # lifecycle (BackgroundRun) ---------------------------------------------------------
    def _launch(self) -> None:
        if self.config.model is None:
            self.config.model = preflight(self.config)

    def _started(self) -> None:
        self._ready.wait(10)

    def _request_stop(self) -> None:
        """Stop sending; in-flight requests are cancelled and recorded as `cancelled`."""
        self._call(lambda g: g.request_stop())

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

    def saturation(self) -> SaturationLog | None:
        """The client's saturation over the run so far (loop_health.SaturationLog)."""
        gen = self._generator
        return gen.lag.log if gen is not None else None

    def outage_spells(self) -> list[tuple[float, float | None]]:
        """The spells in which nothing reached the server (generator.Outages), for the
        end-of-run verdict."""
        gen = self._generator
        return list(gen.outages.spells) if gen is not None else []

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

    def _main(self) -> None:
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
        except BaseException as exc:  # recorded before start() returns on `_ready`
            self.error = exc
        finally:
            self._ready.set()
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()


_SETTERS: dict[str, Callable[..., None]] = {
    "concurrency": LoadGenerator.set_concurrency,
    "request_rate": LoadGenerator.set_request_rate,
    "output_tokens": LoadGenerator.set_output_tokens,
}


def _tag(generator: LoadGenerator, segment: int | None) -> None:
    if segment is not None:
        generator.segment = segment
