"""Simulated vLLM server (`specmon sim`).

Public API for other modules: `specmon.sim.process.start_sim(args, timeout=30) -> ServerProcess`
(a context manager with `.url`, `.stop()`), `specmon.sim.model` (acceptance walk, token plan,
`step_time_ms`, `expected_tokens_per_second`) and `specmon.sim.server.build_app(SimConfig)`.
"""
