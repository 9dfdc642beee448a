"""`python -m specmon ...` as the tests run it: the real CLI in a child process."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

SPECMON = [sys.executable, "-m", "specmon"]


def specmon(*args: object, timeout: float = 240, **popen: Any) -> subprocess.CompletedProcess[str]:
    """Run `python -m specmon ARGS` to its end; stdout and stderr captured as text. `timeout`
    is generous: it bounds a hung child, it is not a performance check."""
    argv = [*SPECMON, *map(str, args)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **popen)


def start_specmon(*args: object, **popen: Any) -> subprocess.Popen[str]:
    """Start `python -m specmon ARGS` in the background, stdout and stderr piped as text (for
    a test that signals it or watches its files while it runs)."""
    pipes: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    return subprocess.Popen([*SPECMON, *map(str, args)], **(pipes | popen))
