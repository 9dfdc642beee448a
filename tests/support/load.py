"""Driving specmon's load loop in-process, as `specmon run` wires it, for the tests that read
every capture the client produced beside what the session made of it."""

from __future__ import annotations

from dataclasses import asdict

from specmon.capture import RawCapture
from specmon.config import RunConfig
from specmon.run.load.runner import LoadRunner
from specmon.session import RunSession


def drive(config: RunConfig, session: RunSession) -> tuple[list[dict], LoadRunner]:
    """Run a LoadRunner to its end, each capture fed to `session` and kept as its fields; the
    session is finished (its exports written) before this returns."""
    captures: list[dict] = []

    def sink(capture: RawCapture) -> None:
        captures.append(asdict(capture))  # as sent and received: the session releases bodies
        session.add(capture)

    runner = LoadRunner(config, session, sink=sink)
    runner.start()
    assert runner.join(120), "load did not finish"
    assert runner.error is None
    session.finish()
    return captures, runner
