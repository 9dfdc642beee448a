"""The end-of-run advice lines on a terminal wrap at word boundaries (issue 36: at 80 columns
the terminal cut "model" into "m" / "odel error 12%"); a pipe or file keeps each line whole."""

from __future__ import annotations

import io

from specmon.run.headless import wrap_for

ADVICE = (
    "advice (segment 1, concurrency 16): best k=3 (2.40x) · measured over 4 cells, "
    "model error 12% · draft cost assumed 0.10"
)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_advice_wraps_at_words_on_a_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    lines = wrap_for(Terminal(), ADVICE).splitlines()
    assert all(len(line) <= 40 for line in lines)
    assert " ".join(line.strip() for line in lines) == ADVICE  # every word, none cut
    assert lines[1].startswith("  ")  # continuation lines are indented
    words = set(ADVICE.split())
    assert all(set(line.split()) <= words for line in lines)  # no word split over two lines


def test_a_pipe_keeps_the_line_whole(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    assert wrap_for(io.StringIO(), ADVICE) == ADVICE
