"""A sweep's load loop that fails ends the sweep with one line naming the load, the warm-up
run's as much as a repeat's (the warm-up's error used to go unread: the cell was then
measured on a server the warm-up had just failed against)."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from specmon.config import RunConfig
from specmon.errors import UserError
from specmon.run.sweep.measure import Measurer
from specmon.run.sweep.settings import SweepSettings

DEAD_URL = "http://127.0.0.1:9"  # nothing listens: the lag probe around a repeat says None


class FailedRunner:
    """A load loop that ran to its end with `error` set (as LoadRunner does)."""

    def __init__(self, error: BaseException | None) -> None:
        self.error = error
        self.started = False

    def start(self) -> None:
        self.started = True

    def join(self, timeout: float | None = None) -> bool:
        return True

    def stop(self) -> None:
        pass

    def progress(self) -> Any:
        return SimpleNamespace(lag_warning=False)


class FinishedSession:
    def __init__(self) -> None:
        self.finished: list[bool] = []

    def finish(self, was_cancelled: bool = False) -> None:
        self.finished.append(was_cancelled)


def sweep(tmp_path: Path, errors: list[BaseException | None], warmup: int) -> tuple[Any, list]:
    made: list[tuple[RunConfig, FinishedSession, FailedRunner]] = []

    def make_repeat(config: RunConfig) -> tuple[Any, Any]:
        session, runner = FinishedSession(), FailedRunner(errors[len(made)])
        made.append((config, session, runner))
        return session, runner

    settings = SweepSettings(
        ks=[2], concurrencies=[1], urls={2: DEAD_URL}, repeats=1, segment_requests=5,
        warmup_request_count=warmup,
    )  # fmt: skip
    runner = Measurer(settings, RunConfig(), tmp_path, make_repeat, threading.Event(), print)
    return runner, made


def test_a_failed_warm_up_ends_the_sweep_before_the_repeat(tmp_path):
    runner, made = sweep(tmp_path, [OSError("disk full writing profile_export.jsonl")], 3)
    with pytest.raises(UserError) as raised:
        runner.measure_cell(2, 1, DEAD_URL, "m")
    assert str(raised.value) == (
        "the load loop failed at k=2 concurrency 1 (warm-up): "
        "disk full writing profile_export.jsonl"
    )
    assert len(made) == 1  # the repeat never started
    config, session, _ = made[0]
    assert config.request_count == 3 and Path(config.artifact_dir).name == "warmup"
    assert session.finished == [False]  # its exports were still finished


def test_a_failed_repeat_names_its_cell(tmp_path):
    runner, made = sweep(tmp_path, [None, RuntimeError("boom")], 3)
    with pytest.raises(UserError, match=r"^the load loop failed at k=2 concurrency 1: boom$"):
        runner.measure_cell(2, 1, DEAD_URL, "m")
    assert [Path(c.artifact_dir).name for c, _, _ in made] == ["warmup", "r1"]
    assert all(s.finished == [False] for _, s, _ in made)


def test_a_stop_is_not_a_failure(tmp_path):
    """A sweep stopping (its loop's error then a KeyboardInterrupt, or any other): the cell
    is dropped (None), with no error line, and no load is started."""
    runner, made = sweep(tmp_path, [RuntimeError("cancelled")], 3)
    runner.stopping.set()
    assert runner.measure_cell(2, 1, DEAD_URL, "m") is None
    assert [r.started for _, _, r in made] == [False]
