"""A tmux pane on a private server socket, read with capture-pane and driven by keys (the
end-to-end TUI tests' terminal; the `tmux_pane` fixture in tests/conftest.py closes it)."""

from __future__ import annotations

import subprocess
import time
import uuid


class Pane:
    """One tmux session on a private server socket (never touches anyone else's tmux)."""

    def __init__(self, command: str, width: int = 100, height: int = 30) -> None:
        self.socket = f"specmon-e2e-{uuid.uuid4().hex[:8]}"
        # COLUMNS/LINES inherited from the test process (a plugin may set them) would override
        # the pane's real size in shutil.get_terminal_size, which Textual reads.
        command = f"unset COLUMNS LINES; {command}"
        self._tmux("new-session", "-d", "-s", "e2e", "-x", str(width), "-y", str(height), command)

    def _tmux(self, *args: str) -> str:
        out = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=20
        )
        return out.stdout

    def text(self, history: bool = False) -> str:
        """The visible screen; with `history`, the scrolled-off lines above it too."""
        return self._tmux("capture-pane", "-p", "-t", "e2e", *(("-S", "-400") if history else ()))

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "e2e", *keys)

    def wait_for(self, predicate, what: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.text()
            if predicate(text):
                return text
            time.sleep(0.25)
        raise AssertionError(f"screen never showed {what}; last screen:\n{text}")

    def settled(self, extract, what: str, timeout: float = 30.0, quiet_s: float = 1.5) -> str:
        """The screen once `extract(text)` (the figures a test compares) is not None and has
        not changed for `quiet_s`: every widget has caught up with the last result, however
        slow the refresh ticks are on a busy machine (a fixed sleep is a race)."""
        deadline = time.monotonic() + timeout
        last, since, text = None, time.monotonic(), ""
        while time.monotonic() < deadline:
            text = self.text()
            value = extract(text)
            if value is None or value != last:
                last, since = value, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                return text
            time.sleep(0.25)
        raise AssertionError(f"screen never settled on {what}; last screen:\n{text}")

    def close(self) -> None:
        self._tmux("kill-server")
