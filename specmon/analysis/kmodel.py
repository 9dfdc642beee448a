"""Compatibility re-export: the batch-aware step-cost model moved to
specmon/decision/stepcost.py (issue 17: one decision package). New code imports that."""

from specmon.decision.stepcost import *  # noqa: F403
