"""The run header: target, model, engine, k, load, elapsed, progress/ETA, req/s, errors."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from specmon.formatting import fmt_duration, k_label, run_progress, server_down_text
from specmon.tui.model.header import HeaderInfo
from specmon.tui.view import bar
from specmon.tui.widgets.shaped import ShowsChanges


class RunHeader(ShowsChanges[HeaderInfo], Static):
    COMPONENT_CLASSES = {"header--badge", "header--bar", "header--error", "header--title"}
    DEFAULT_CSS = """
    RunHeader > .header--badge { background: $warning; color: $background; text-style: bold; }
    RunHeader > .header--bar { color: $success; }
    RunHeader > .header--error { color: $error; text-style: bold; }
    RunHeader > .header--title { color: $accent; text-style: bold; }
    """

    def paint(self, info: HeaderInfo) -> None:
        self.update(self._render_info(info), layout=False)  # always two lines

    def on_resize(self) -> None:
        if self._shown is not None:
            self.update(self._render_info(self._shown))

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
        if info.mode.badge:
            out.append(f"[{info.mode.badge}] ")
        k = k_label(info.k) if info.k is None or isinstance(info.k, int) else f"k={info.k}"
        # Target last: a long URL or file path is what gets cut on a narrow terminal.
        out.append(f"{info.engine} {k} · {info.load} · {info.model} · {info.target}")
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
            ongoing = " (until q)" if info.mode.drives_load else ""
            out.append(f"{prog.label}" + (" (finished)" if info.finished else ongoing))
        if info.phase == "warmup" and not info.finished:
            out.append(" · warmup")
        if info.failure:  # why the load ended early, before what a narrow terminal cuts
            out.append(f" · {info.failure}", style=self._style("header--error"))
        # Most needed first: what gets cut on a narrow terminal is at the end.
        out.append(f" · {rate} req/s · ")
        out.append(
            f"errors {info.errors}", style=self._style("header--error") if info.errors else ""
        )
        if info.error_kinds:
            kinds = sorted(info.error_kinds.items(), key=lambda kv: -kv[1])
            out.append(" (" + ", ".join(f"{k} {n}" for k, n in kinds[:2]) + ")")
        if info.alarms:  # before the rest: a narrow terminal still shows it
            out.append(f" · ALARM {', '.join(info.alarms)}", style=self._style("header--error"))
        if info.down_since is not None and not info.finished:
            down = server_down_text(info.down_since)
            out.append(f" · {down}", style=self._style("header--error"))
        if info.saturation and not info.finished:
            out.append(f" · {info.saturation}", style=self._style("header--error"))
        if info.in_flight is not None and not info.finished:
            out.append(f" · in flight {info.in_flight}")
        out.append(f" · elapsed {fmt_duration(info.elapsed_s)}")
        if info.finished and info.mode.drives_load and not info.failure:
            out.append(" · q writes the exports")
        return out
