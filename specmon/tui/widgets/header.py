"""The run header: target, model, engine, k, load, elapsed, progress/ETA, req/s, errors."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.widgets import Static

from specmon.formatting import fmt_duration, k_label, run_progress, server_down_text
from specmon.tui.model.header import HeaderInfo
from specmon.tui.view import bar
from specmon.tui.widgets.shaped import ShowsChanges

SHORTEN_LEVELS = 3  # RunHeader._first_line's levels
# the load's labels as the header shortens them (load_text's words)
SHORT_LOAD = (("concurrency ", "c="), ("count ", "n="), ("duration ", "for "), ("rate ", ""))


def short_load(load: str) -> str:
    """'concurrency 16, count 1000' -> 'c=16, n=1000': shorter labels, the same values."""
    for word, short in SHORT_LOAD:
        load = load.replace(word, short)
    return load


def short_url(target: str) -> str:
    """A target without its http:// (https:// stays: it says something)."""
    return ", ".join(t.removeprefix("http://") for t in target.split(", "))


def fitted(lines: Iterable[Text], width: int) -> Text:
    """The first line that fits `width`, else the last one cut with an ellipsis."""
    line = Text()
    for line in lines:
        if line.cell_len <= width:
            return line
    line.truncate(width, overflow="ellipsis")
    return line


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
        # Shorter labels until a line fits (never a cut URL or number at 80 columns and
        # up); what still does not fit is cut at the end, with an ellipsis.
        first = fitted((self._first_line(info, level) for level in range(SHORTEN_LEVELS)), width)
        prog = fitted((self._second_line(info, width, short) for short in (False, True)), width)
        return Text("\n").join([first, prog])

    def _first_line(self, info: HeaderInfo, level: int = 0) -> Text:
        """Level 0: everything; 1: no title, the load's short labels, the model's name without
        its organisation, the target without http://; 2: no model either (the exports and the
        request log name it)."""
        out = Text(no_wrap=True)
        if info.paused_arrivals is not None:  # first, so a narrow terminal still shows it
            out.append(f" PAUSED +{info.paused_arrivals} ", style=self._style("header--badge"))
            out.append(" ")
        if level == 0:
            out.append("specmon ", style=self._style("header--title"))
        if info.mode.badge:
            out.append(f"[{info.mode.badge}] ")
        k = k_label(info.k) if info.k is None or isinstance(info.k, int) else f"k={info.k}"
        method = f" {info.method}" if info.method else ""
        load, model, target = info.load, info.model, info.target
        if level >= 1:
            load, model, target = short_load(load), model.rsplit("/", 1)[-1], short_url(target)
        parts = [f"{info.engine}{method} {k}", load, *([model] if level < 2 else []), target]
        # Target last: a long URL or file path is what gets cut on a narrow terminal.
        out.append(" · ".join(parts))
        return out

    def _second_line(self, info: HeaderInfo, width: int, short: bool = False) -> Text:
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
        if info.error_kinds and not short:  # short: the kinds are in the log and the exports
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
