"""Compatibility re-export: the k chooser moved to specmon/decision/choose.py (issue 17: one
decision package). New code imports specmon.decision."""

from specmon.decision.choose import *  # noqa: F403
