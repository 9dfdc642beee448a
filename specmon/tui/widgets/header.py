"""The run header: target, model, engine, k, load, elapsed, progress/ETA, req/s, errors."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.widgets import Static

from specmon.formatting import server_down_text
from specmon.tui.view import bar, fmt_duration, run_progress


@dataclass(frozen=True)
class HeaderInfo:
    target: str
    model: str
    engine: str
    k: int | str | None  # one k, or 'k1,k2' when several servers run different k
    load: str
    elapsed_s: float
    completed: int  # valid profiling requests
    errors: int
    request_count: int | None
    duration_s: float | None
    paused_arrivals: int | None  # None when not paused
    finished: bool
    source: str = "live"  # live | replay
    in_flight: int | None = None
    error_kinds: dict[str, int] | None = None  # kind -> count
    failure: str | None = None  # why the load loop ended abnormally
    phase: str | None = None  # the load loop's phase: warmup | profiling | stopping | done
    retries: int = 0  # connection-failed attempts (in `errors`, but no request finished)
    down_since: float | None = None  # time.time() the current outage began (LoadProgress)
    # AIPerf's request_throughput (valid requests / benchmark duration), the one req/s figure
    request_throughput: float | None = None
    progress_done: int | None = None  # what counts toward request_count when the runner says
    # the load client is the bottleneck (formatting.saturation_text): latencies include its
    # own delay, so the header says so while it lasts
    saturation: str | None = None


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

    def forget_shown(self) -> None:
        """The theme changed: the next show() paints with the new colours."""
        self._info = None

    def show(self, info: HeaderInfo) -> None:
        if info == self._info:
            return
        self._info = info
        self.update(self._render_info(info), layout=False)  # always two lines

    def on_resize(self) -> None:
        if self._info is not None:
            self.update(self._render_info(self._info))

    def _style(self, name: str):
        return self.get_component_rich_style(name, partial=True)

    def _render_info(self, info: HeaderInfo) -> Text:
        width = self.size.width or 80
        first = self._first_line(info)
        first.truncate(width, overflow="ellipsis")
        prog = self._second_line(info, width)
        prog.truncate(width, overflow="ellipsis")
        return Text("\n").join([first, prog])

    def _first_line(self, info: HeaderInfo) -> Text:
        out = Text(no_wrap=True)
        if info.paused_arrivals is not None:  # first, so a narrow terminal still shows it
            out.append(f" PAUSED +{info.paused_arrivals} ", style=self._style("header--badge"))
            out.append(" ")
        out.append("specmon ", style=self._style("header--title"))
        if info.source != "live":
            out.append(f"[{info.source}] ")
        k = "?" if info.k is None else str(info.k)
        # Target last: a long URL or file path is what gets cut on a narrow terminal.
        out.append(f"{info.engine} k={k} · {info.load} · {info.model} · {info.target}")
        return out

    def _second_line(self, info: HeaderInfo, width: int) -> Text:
        out = Text(no_wrap=True)
        # Progress counts every finished request (errors too), as the load loop does.
        done = (
            info.completed + info.errors - info.retries
            if info.progress_done is None
            else info.progress_done
        )
        prog = run_progress(done, info.elapsed_s, info.request_count, info.duration_s)
        rate = "-" if info.request_throughput is None else f"{info.request_throughput:.2f}"
        if prog.fraction is not None:
            # narrow terminals: a shorter bar, so req/s and errors still fit at 80 columns
            bar_w = max(6, min(40, width // 5 if width >= 120 else width // 10))
            out.append(
                bar(prog.fraction, bar_w).replace(" ", "░"), style=self._style("header--bar")
            )
            eta = "done" if info.finished else f"ETA {fmt_duration(prog.eta_s)}"
            out.append(f" {prog.fraction * 100:3.0f}% {prog.label} {eta}")
        else:
            ongoing = " (until q)" if info.source == "live" else ""
            out.append(f"{prog.label}" + (" (finished)" if info.finished else ongoing))
        if info.phase == "warmup" and not info.finished:
            out.append(" · warmup")
        # Most needed first: what gets cut on a narrow terminal is at the end.
        out.append(f" · {rate} req/s · ")
        out.append(
            f"errors {info.errors}", style=self._style("header--error") if info.errors else ""
        )
        if info.error_kinds:
            kinds = sorted(info.error_kinds.items(), key=lambda kv: -kv[1])
            out.append(" (" + ", ".join(f"{k} {n}" for k, n in kinds[:2]) + ")")
        if info.down_since is not None and not info.finished:
            down = server_down_text(info.down_since)
            out.append(f" · {down}", style=self._style("header--error"))
        if info.saturation and not info.finished:
            out.append(f" · {info.saturation}", style=self._style("header--error"))
        if info.failure:
            out.append(f" · load failed: {info.failure}", style=self._style("header--error"))
        if info.in_flight is not None and not info.finished:
            out.append(f" · in flight {info.in_flight}")
        out.append(f" · elapsed {fmt_duration(info.elapsed_s)}")
        if info.finished and info.source == "live" and not info.failure:
            out.append(" · q writes the exports")
        return out
