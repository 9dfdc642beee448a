"""Bordered, maximizable panel containers (keys 1-5 maximize them)."""

from textual.containers import Horizontal, Vertical


class Panel(Vertical):
    ALLOW_MAXIMIZE = True


class HPanel(Horizontal):
    ALLOW_MAXIMIZE = True
