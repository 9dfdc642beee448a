"""Screens pushed over the monitor: help, explain, request detail."""
