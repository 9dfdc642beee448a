"""The one room where a run is assembled (docs/architecture.md, "Run assembly").

From a validated config it resolves the servers, the prompts, the load plan, one session
and one runner per server with their sinks, and returns a typed run; the commands only
parse arguments and call it, and the screen is handed in, never imported:

* `assemble.py`: `specmon run` / `demo`: inputs and preflight, the artifact dir, sessions,
  runners, `MultiRun`;
* `execute.py`: drives an assembled run headless or under a monitor, then the exports and
  the exit status; `headless.py`: the progress lines and the console tables;
* `sweep.py`: the k sweep (`SweepRunner` with its repeats' sessions and runners);
* `watch.py`: `specmon watch` (`WatchRun`, no load);
* `replay.py`: `specmon replay` (`ReplayFeeder` over a finished run).
"""
