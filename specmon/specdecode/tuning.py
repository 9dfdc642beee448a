"""Compatibility re-export: per-position acceptance and E(k') moved to
specmon/decision/acceptance.py (issue 17: one decision package). New code imports that."""

from specmon.decision.acceptance import *  # noqa: F403
