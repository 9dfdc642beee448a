"""The run header: target, model, engine, k, load, elapsed, progress/ETA, req/s, errors."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.widgets import Static

from specmon.tui.view import bar, fmt_duration, run_progress


@dataclass(frozen=True)
class HeaderInfo:
    target: str
    model: str
    engine: str
    k: int | None
    load: str
    elapsed_s: float
    completed: int
    errors: int
    request_count: int | None
    duration_s: float | None
    paused_arrivals: int | None  # None when not paused
    finished: bool
    source: str = "live"  # live | replay


class RunHeader(Static):
    COMPONENT_CLASSES = {"header--badge", "header--bar", "header--error", "header--title"}
    DEFAULT_CSS = """
    RunHeader > .header--badge { background: $warning; color: $background; text-style: bold; }
    RunHeader > .header--bar { color: $success; }
    RunHeader > .header--error { color: $error; text-style: bold; }
    RunHeader > .header--title { color: $accent; text-style: bold; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._info: HeaderInfo | None = None

    def show(self, info: HeaderInfo) -> None:
        if info == self._info:
            return
        self._info = info
        self.update(self._render_info(info))

    def on_resize(self) -> None:
        if self._info is not None:
            self.update(self._render_info(self._info))

    def _style(self, name: str):
        return self.get_component_rich_style(name, partial=True)

    def _render_info(self, info: HeaderInfo) -> Text:
        width = self.size.width or 80
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append("specmon ", style=self._style("header--title"))
        if info.source != "live":
            out.append(f"[{info.source}] ")
        k = "?" if info.k is None else str(info.k)
        out.append(f"{info.target} · {info.model} · {info.engine} k={k} · {info.load}")
        if info.paused_arrivals is not None:
            out.append("  ")
            out.append(f" PAUSED +{info.paused_arrivals} ", style=self._style("header--badge"))
        out.append("\n")
        prog = run_progress(info.completed, info.elapsed_s, info.request_count, info.duration_s)
        rate = info.completed / info.elapsed_s if info.elapsed_s > 0 else 0.0
        if prog.fraction is not None:
            bar_w = max(10, min(40, width // 4))
            out.append(bar(prog.fraction, bar_w).replace(" ", "░"), style=self._style("header--bar"))
            eta = "done" if info.finished else f"ETA {fmt_duration(prog.eta_s)}"
            out.append(f" {prog.fraction * 100:3.0f}% {prog.label} {eta}")
        else:
            out.append(f"{prog.label}" + (" (finished)" if info.finished else " (until q)"))
        out.append(f" · elapsed {fmt_duration(info.elapsed_s)} · {rate:.2f} req/s · ")
        out.append(f"errors {info.errors}", style=self._style("header--error") if info.errors else "")
        return out
