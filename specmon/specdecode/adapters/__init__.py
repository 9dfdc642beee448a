"""Adapter registry and engine-blind auto-detection.

`detect(responses, request, engine)` walks the registered adapters from the highest
priority down; the first priority level with a claimant decides (two claimants at the same
level are `contested`). With `engine` (from `--engine`, or SGLang detected from the
server) only that engine's adapters may claim; a payload another engine's adapter claims is
the reason `other_engine:<name>`. It never raises: every way of not producing a record is a
reason, counted per kind (`reason_counts()`) and logged once per kind.

The built-in adapters are the ones the engine registry (specmon/specdecode/engines.py)
names; each adapter's `engine` is its engine's one name.

Adapters from other packages register through the entry-point group
`specmon.spec_decode_adapters` (loaded lazily, once); the entry point names a class that
follows `SpecDecodeAdapterProtocol` and may carry `priority` / `name` class attributes.
"""

from __future__ import annotations

import importlib
import logging
import threading
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from specmon.checks import is_count, is_int
from specmon.specdecode.adapters.base import (
    ParsedResponse,
    SpecDecodeAdapter,
    SpecDecodeAdapterProtocol,
)
from specmon.specdecode.engines import ENGINES, Engine, register_engine
from specmon.specdecode.record import (
    SpecDecodeAcceptanceRecord,
    implausible_k,
    self_contradiction,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "AdaptOutcome",
    "ParsedResponse",
    "RegisteredAdapter",
    "SpecDecodeAdapterProtocol",
    "adapter_engine",
    "add_engine",
    "detect",
    "load_entry_points",
    "reason_counts",
    "register_adapter",
    "registered_adapters",
    "reset_reason_counts",
    "unregister_adapter",
]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "specmon.spec_decode_adapters"

# Reasons that are normal traffic, not trouble: logged at info, not warning.
QUIET_REASONS = frozenset({"absent", "zero_step"})


@dataclass(frozen=True, slots=True)
class AdaptOutcome:
    """What detection made of one request.

    record: the record, or None. zero_step: a payload with num_spec_steps == 0 was found
    (dropped from the metrics per AIPerf's newest parser, kept verbatim in
    zero_step_record for the per-request trace). reason: why there is no record
    (absent, n_gt_1, contested, zero_step, malformed:<kind>). engine: the claiming
    adapter's name, when one claimed.
    """

    record: SpecDecodeAcceptanceRecord | None
    zero_step: bool = False
    reason: str | None = None
    engine: str | None = None
    zero_step_record: SpecDecodeAcceptanceRecord | None = None
    detail: str = ""
    # The wire object the claiming adapter read (the last one, which wins), kept by
    # reference so the drill-down can show what the server sent after bodies are dropped.
    payload: Any = None


@dataclass(frozen=True, slots=True)
class RegisteredAdapter:
    name: str
    priority: int
    cls: Any
    order: int  # registration order: a stable listing only; equal priorities contest


# --------------------------------------------------------------------------- registry

_lock = threading.RLock()
# The base class's can_adapt: adapters that keep it are asked for their payloads directly.
_BASE_CAN_ADAPT = getattr(SpecDecodeAdapter.can_adapt, "__func__", None)
_registry: dict[str, RegisteredAdapter] = {}
_order = 0
_entry_points_loaded = False
_entry_point_names: set[str] = set()


def register_adapter(cls: Any, name: str | None = None, priority: int | None = None) -> Any:
    """Register an adapter class (returns it, so it also works as a decorator).

    name defaults to cls.name / cls.engine / the class name; priority to cls.priority or 0.
    Re-registering a name replaces the earlier entry.
    """
    global _order
    if not isinstance(cls, SpecDecodeAdapterProtocol):
        raise TypeError(f"{cls!r} has no can_adapt/adapt classmethods")
    name = (
        name
        or getattr(cls, "name", "")
        or getattr(cls, "engine", "")
        or str(getattr(cls, "__name__", cls))
    )
    if priority is None:
        priority = getattr(cls, "priority", 0)
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise TypeError(f"adapter {name}: priority must be an int, got {priority!r}")
    with _lock:
        _order += 1
        _registry[name] = RegisteredAdapter(name, priority, cls, _order)
        _invalidate_order()
    return cls


def unregister_adapter(name: str) -> None:
    with _lock:
        _registry.pop(name, None)
        _invalidate_order()


# Detection order, sorted once per registry change rather than once per request.
_sorted_cache: tuple[RegisteredAdapter, ...] | None = None


def _invalidate_order() -> None:
    global _sorted_cache
    _sorted_cache = None


def _detection_order() -> tuple[RegisteredAdapter, ...]:
    global _sorted_cache
    order = _sorted_cache
    if order is None or not _entry_points_loaded:
        load_entry_points()
        with _lock:
            order = tuple(sorted(_registry.values(), key=lambda e: (-e.priority, e.order)))
            _sorted_cache = order
    return order


def registered_adapters() -> list[RegisteredAdapter]:
    """Every adapter, in detection order (highest priority first)."""
    return list(_detection_order())


def load_entry_points(force: bool = False) -> None:
    """Register adapters from the entry-point group, once (force: rescan, e.g. in tests).

    A broken entry point (import error, not an adapter) is logged once and skipped; an
    entry point never replaces an adapter already registered under its name.
    """
    global _entry_points_loaded
    with _lock:
        if _entry_points_loaded and not force:
            return
        _entry_points_loaded = True
        try:
            eps = list(metadata.entry_points(group=ENTRY_POINT_GROUP))
        except Exception as exc:  # a corrupt dist-info elsewhere must not stop detection
            log.warning("cannot read entry points %s: %s", ENTRY_POINT_GROUP, exc)
            return
        for ep in eps:
            _load_one(ep)


def _load_one(ep: metadata.EntryPoint) -> None:
    if ep.name in _registry:
        return  # built-ins (and explicit registrations) win over entry points
    try:
        cls = ep.load()
        register_adapter(cls, name=ep.name)
    except Exception as exc:
        if ep.name not in _entry_point_names:
            log.warning(
                "spec-decode adapter entry point %r (%s) skipped: %s: %s",
                ep.name,
                ep.value,
                type(exc).__name__,
                exc,
            )
    _entry_point_names.add(ep.name)


# --------------------------------------------------------------------------- reasons

_reason_counts: dict[str, int] = {}
_logged: set[str] = set()


def reason_counts() -> dict[str, int]:
    """How many requests ended with each reason since start (or the last reset)."""
    with _lock:
        return dict(_reason_counts)


def reset_reason_counts() -> None:
    with _lock:
        _reason_counts.clear()
        _logged.clear()


def _note(kind: str, detail: str) -> None:
    with _lock:
        _reason_counts[kind] = _reason_counts.get(kind, 0) + 1
        first = kind not in _logged
        _logged.add(kind)
    if first:
        level = logging.INFO if kind in QUIET_REASONS else logging.WARNING
        detail = detail[:200] + "..." if detail and len(detail) > 200 else detail  # one line
        log.log(level, "spec-decode: no record (%s)%s", kind, f": {detail}" if detail else "")


def _log_once(key: str, message: str, *args: Any) -> None:
    with _lock:
        if key in _logged:
            return
        _logged.add(key)
    log.warning(message, *args)


# --------------------------------------------------------------------------- detection


def detect(
    responses: list[ParsedResponse],
    request: dict[str, Any] | None = None,
    engine: str | None = None,
) -> AdaptOutcome:
    """Find and adapt the request's spec-decode payload (only `engine`'s, when given).
    Never raises."""
    try:
        outcome = _detect(responses, request, engine)
    except Exception as exc:  # last resort: a bug here must not stop a run
        outcome = AdaptOutcome(
            None, reason="malformed:internal_error", detail=f"{type(exc).__name__}: {exc}"
        )
    if outcome.reason is not None:
        _note(outcome.reason, outcome.detail)
    return outcome


def _detect(responses: Any, request: dict[str, Any] | None, engine: str | None) -> AdaptOutcome:
    if not isinstance(responses, (list, tuple)):
        responses = []
    if request is None:
        request = next(
            (r.request for r in responses if isinstance(getattr(r, "request", None), dict)), None
        )
    if many_sequences(request):
        return AdaptOutcome(None, reason="n_gt_1", detail="the request asked for several sequences")
    claimants = _claimants(list(responses), engine)
    if not claimants and engine is not None:
        return _foreign(list(responses), engine)
    if not claimants:
        return AdaptOutcome(None, reason="absent")
    if len(claimants) > 1:
        names = ", ".join(e.name for e, _ in claimants)
        return AdaptOutcome(None, reason="contested", detail=f"claimed by {names}")
    entry, payloads = claimants[0]
    return _adapt(entry, payloads, list(responses))


def _foreign(responses: list[Any], engine: str) -> AdaptOutcome:
    """No adapter of `engine` claimed: is the payload another engine's?"""
    others = sorted({adapter_engine(e) for e, _ in _claimants(responses)})
    if not others:
        return AdaptOutcome(None, reason="absent")
    return AdaptOutcome(
        None,
        reason=f"other_engine:{others[0]}",
        detail=f"--engine {engine}, but the payload is {' and '.join(others)}'s",
    )


def adapter_engine(entry: RegisteredAdapter) -> str:
    """The engine an adapter reads (its `engine` attribute, else its registered name)."""
    return str(getattr(entry.cls, "engine", "") or entry.name)


def _claimants(
    responses: list[Any], engine: str | None = None
) -> list[tuple[RegisteredAdapter, list[Any] | None]]:
    """The claimants at the highest priority level that has any, with their payloads
    (found once here and reused by adapt, for adapters built on SpecDecodeAdapter);
    only `engine`'s adapters when given."""
    level: int | None = None
    found: list[tuple[RegisteredAdapter, list[Any] | None]] = []
    for entry in _detection_order():
        if engine is not None and adapter_engine(entry) != engine:
            continue
        if level is not None and entry.priority < level:
            break
        try:
            payloads = _payloads_if_builtin_style(entry.cls, responses)
            claims = (
                bool(payloads) if payloads is not None else bool(entry.cls.can_adapt(responses))
            )
        except Exception as exc:
            _log_once(
                f"can_adapt:{entry.name}",
                "spec-decode adapter %s: can_adapt raised %s: %s (adapter skipped)",
                entry.name,
                type(exc).__name__,
                exc,
            )
            continue
        if claims:
            level = entry.priority
            found.append((entry, payloads))
    return found


def _payloads_if_builtin_style(cls: Any, responses: list[Any]) -> list[Any] | None:
    """cls.payloads(responses) when can_adapt is the base one (== bool(payloads)), else None."""
    if (
        isinstance(cls, type)
        and issubclass(cls, SpecDecodeAdapter)
        and getattr(cls.can_adapt, "__func__", None) is _BASE_CAN_ADAPT
    ):
        return cls.payloads(responses)
    return None


def _adapt(
    entry: RegisteredAdapter, payloads: list[Any] | None, responses: list[Any]
) -> AdaptOutcome:
    cls = entry.cls
    if isinstance(cls, type) and issubclass(cls, SpecDecodeAdapter):
        if payloads is None:
            payloads = cls.payloads(responses)
        raw = cls.raw_payload(payloads[-1]) if payloads else None
        if cls.sequence_count(payloads) > 1:
            return AdaptOutcome(
                None,
                reason="n_gt_1",
                engine=entry.name,
                detail="more than one response carries a payload",
                payload=raw,
            )
        record, kind, detail = cls.adapt_with_reason(responses, payloads)
    else:
        raw = None  # a third-party adapter does not say where its payload is
        record, kind, detail = _adapt_foreign(entry, responses)
    if record is None:
        return AdaptOutcome(
            None,
            reason=f"malformed:{kind or 'rejected'}",
            engine=entry.name,
            detail=detail,
            payload=raw,
        )
    contradiction = self_contradiction(record)
    if contradiction is not None:  # the record says two things: neither is taken
        return AdaptOutcome(
            None, reason="contested", engine=entry.name, detail=contradiction, payload=raw
        )
    implausible = implausible_k(record)
    if implausible is not None:  # a declared k its own counts deny (or absurdly large)
        return AdaptOutcome(
            None, reason="implausible_k", engine=entry.name, detail=implausible, payload=raw
        )
    if record.num_spec_steps == 0:
        return AdaptOutcome(
            None,
            zero_step=True,
            reason="zero_step",
            engine=entry.name,
            zero_step_record=record,
            payload=raw,
        )
    return AdaptOutcome(record, engine=entry.name, payload=raw)


def _adapt_foreign(entry: RegisteredAdapter, responses: list[Any]) -> tuple[Any, str | None, str]:
    """A third-party adapter: only the Protocol is known; isolate it completely."""
    try:
        record = entry.cls.adapt(responses)
    except Exception as exc:
        return None, "adapter_error", f"{entry.name}.adapt raised {type(exc).__name__}: {exc}"
    if record is None:
        return None, "rejected", f"{entry.name}.adapt returned None"
    if not isinstance(record, SpecDecodeAcceptanceRecord):
        return None, "adapter_error", f"{entry.name}.adapt returned {type(record).__name__}"
    return record, None, ""


def many_sequences(request: Any) -> bool:
    """True when the request itself asks for more than one sequence.

    `n` > 1 (top level, or SGLang's `sampling_params.n`), or a completions `prompt` /
    SGLang `text` that is a list of several prompts. A list of ints is ONE tokenized prompt.
    """
    if not isinstance(request, dict):
        return False
    params = request.get("sampling_params")
    for n in (request.get("n"), params.get("n") if isinstance(params, dict) else None):
        if is_count(n) and n > 1:
            return True
    for key in ("prompt", "text"):
        prompts = request.get(key)
        if isinstance(prompts, list) and len(prompts) > 1:
            if not all(is_int(x) for x in prompts):
                return True
    return False


def _register_builtins() -> None:
    """Every adapter the engine registry names, in its order. Imported here, once the
    registry's own names exist (the modules are this package's children)."""
    for declared in ENGINES:
        _register_adapters_of(declared)


def _register_adapters_of(declared: Engine) -> None:
    for path in declared.adapters:
        module, _, cls_name = path.partition(":")
        cls = getattr(importlib.import_module(module), cls_name)
        if cls.engine != declared.name:  # one name per engine, checked at import
            raise RuntimeError(f"{path}: engine {cls.engine!r} is not {declared.name!r}")
        register_adapter(cls)


def add_engine(declared: Engine) -> Engine:
    """A new engine, beside the built-in ones: its registry entry and its adapters (the
    simulator's payload builder is sim/payloads.py `register_choice_payload`)."""
    register_engine(declared)
    _register_adapters_of(declared)
    return declared


_register_builtins()
