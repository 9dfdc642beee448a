"""httpx, imported without its command-line client.

`import httpx` also imports `httpx._main`, its CLI, which imports rich, click and pygments
whenever they are installed (textual brings rich): 55 ms of every start of `specmon run`,
`tune` and `compare`, for a CLI specmon never calls. httpx falls back to a stub `main` when
that import fails (its documented path for an install without the CLI's extras), so the
import is refused once, here, and the module cleared again for anyone who asks for it later.
"""

from __future__ import annotations

import sys

if "httpx" not in sys.modules:
    _CLI = "httpx._main"
    _had = _CLI in sys.modules
    sys.modules.setdefault(_CLI, None)  # type: ignore[arg-type]  # None: ImportError
    try:
        import httpx
    finally:
        if not _had:
            del sys.modules[_CLI]
else:
    import httpx

__all__ = ["httpx"]
