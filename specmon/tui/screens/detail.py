"""Drill-down into one request: its histogram, per-step sparkline, timings, raw payload."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Sparkline, Static

from specmon.stats import METRICS
from specmon.tui.requests import (
    metric,
    payload_title,
    per_step,
    raw_payload,
    request_id,
    status,
)
from specmon.tui.widgets.histogram import HistogramView

# label -> metric tag; a time metric's value is shown with its unit (the metric table's)
TIMING_TAGS = {
    "TTFT": "time_to_first_token",
    "TPOT": "inter_token_latency",
    "request latency": "request_latency",
    "output tokens": "output_sequence_length",
    "input tokens": "input_sequence_length",
    "output tok/s/user": "output_token_throughput_per_user",
}


class RequestDetail(ModalScreen[None]):
    BINDINGS = [Binding("escape,q", "dismiss", "Back"), Binding("s", "app.screenshot", "Save")]

    def __init__(self, result: Any, index: int) -> None:
        super().__init__()
        self._result = result
        self._index = index

    def compose(self) -> ComposeResult:
        result = self._result
        with Vertical(id="detail-body", classes="modal-body") as body:
            body.border_title = f"request {request_id(result, self._index)} (esc back)"
            with Horizontal(id="detail-top"):
                with Vertical(id="detail-hist", classes="panel") as hist:
                    hist.border_title = "accepted drafts per step"
                    yield HistogramView(id="detail-histogram")
                with Vertical(id="detail-timings", classes="panel") as timings:
                    timings.border_title = "timings"
                    yield Static(self._timings_text(), id="detail-timings-text")
            with Vertical(id="detail-steps", classes="panel") as steps:
                # Sparklines scale to each series' own min..max, which the labels state.
                steps.border_title = "per verify step, in order"
                accepted, drafted = per_step(result)
                if accepted:
                    with Horizontal(classes="spark-row"):
                        yield Static(
                            f"accepted {min(accepted)}..{max(accepted)}", classes="spark-label"
                        )
                        yield Sparkline(accepted, id="spark-accepted")
                    with Horizontal(classes="spark-row"):
                        yield Static(
                            f"drafted {min(drafted or [0])}..{max(drafted or [0])}",
                            classes="spark-label",
                        )
                        yield Sparkline(drafted or [], id="spark-drafted")
                else:
                    yield Static(
                        "no per-step arrays (server runs --per-request-spec-decode-"
                        "metrics summary; 'detailed' adds them)",
                        classes="muted",
                    )
            with VerticalScroll(id="detail-raw", classes="panel") as raw:
                raw.border_title = payload_title(result)
                yield Static(raw_payload(result), id="detail-raw-text", markup=False)

    def on_mount(self) -> None:
        spec = self._result.spec
        hist = spec.acceptance_histogram if spec is not None else None
        self.query_one(HistogramView).show(dict(hist or {}))

    def _timings_text(self) -> str:
        result = self._result
        text, _ = status(result)
        spec = result.spec
        lines = [f"status: {text}", f"category: {result.category or '-'}"]
        for label, tag in TIMING_TAGS.items():
            value = metric(result, tag)
            unit = "ms" if METRICS[tag].unit == "ms" else ""
            if value is not None:
                text = (
                    f"{value:,.0f}" if float(value).is_integer() and not unit else f"{value:,.2f}"
                )
                lines.append(f"{label}: {text} {unit}".rstrip())  # token counts stay whole
        if spec is not None:
            steps = "-" if spec.num_spec_steps is None else str(spec.num_spec_steps)
            al = spec.mean_acceptance_length
            lines.append(
                f"steps {steps} · accepted {spec.num_accepted_draft_tokens}"
                f" / drafted {spec.num_draft_tokens}"
            )
            lines.append(
                f"AL {'-' if al is None else f'{al:.3f}'} · rate "
                f"{100 * spec.draft_acceptance_rate:.1f}%"
            )
            lines.append(f"fidelity: {spec.fidelity}")  # the level (docs/metrics.md §10.2)
        return "\n".join(lines)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)
