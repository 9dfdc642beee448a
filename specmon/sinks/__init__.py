"""Consumers of a run's results: the `ResultSink` interface and the sinks specmon ships.

See base.py for the interface and the order the session calls it in.
"""

from specmon.sinks.base import BaseSink, ResultSink

__all__ = ["BaseSink", "ResultSink"]
