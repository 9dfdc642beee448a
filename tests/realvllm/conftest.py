"""Real-vLLM fixtures (defined in fixtures.py so tests/test_realvllm*.py can import them too)."""

from .fixtures import realvllm_ready, vllm_detailed  # noqa: F401
