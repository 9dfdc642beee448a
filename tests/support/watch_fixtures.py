"""A WatchRun fed hand-written vLLM /metrics pages instead of a poller (no thread, no HTTP),
so the watch monitor renders the same screen every time.

Four scrapes of one engine with k=3; the counters are cumulative. Over the watch (scrape 0
to 3): drafts 300, draft tokens 900, accepted 450, per position 210 / 150 / 90, so
AL = 1 + 450/300 = 2.50, acceptance 450/900 = 50.0%, histogram
H0 = 300 - 210 = 90, H1 = 210 - 150 = 60, H2 = 150 - 90 = 60, H3 = 90 (docs/metrics.md §11).
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from pathlib import Path

from specmon.interfaces import MonitorConfig
from specmon.run.watch.runner import NO_LOAD_LABEL, WatchRun
from specmon.server.scrape import ServerCounterView, counter_delta, parse_counters
from specmon.tui.app import SpecmonApp

URL = "http://sim.invalid:8000"
# (drafts, accepted, per position, running, waiting, kv usage, generation tokens)
SCRAPES = [
    (0, 0, (0, 0, 0), 0, 0, 0.0, 0),
    (100, 140, (70, 45, 25), 4, 1, 0.25, 600),
    (200, 300, (140, 100, 60), 4, 0, 0.30, 1300),
    (300, 450, (210, 150, 90), 3, 0, 0.20, 2000),
]
EXPECTED_AL = 2.50
EXPECTED_RATE_PCT = 50.0
EXPECTED_HIST = {0: 90, 1: 60, 2: 60, 3: 90}


def page(drafts: int, accepted: int, pos, running, waiting, kv, gen, engines: int = 1) -> str:
    """vLLM's page for these totals; with `engines`, engine e has its share times (e + 1)
    over the sum of 1..engines (so the engines differ and sum to the totals given)."""
    weights = [(e + 1) / sum(range(1, engines + 1)) for e in range(engines)]

    def rows(name: str, value: float, extra: str = "", whole: bool = True) -> list[str]:
        out = []
        for e, w in enumerate(weights):
            v = round(value * w) if whole else round(value * w, 4)
            out.append(f'{name}{{engine="{e}",model_name="m"{extra}}} {v}')
        return out

    spec = "vllm:spec_decode_num_"
    lines = [
        f"# TYPE {spec}drafts counter",
        *rows(f"{spec}drafts_total", drafts),
        f"# TYPE {spec}draft_tokens counter",
        *rows(f"{spec}draft_tokens_total", 3 * drafts),
        f"# TYPE {spec}accepted_tokens counter",
        *rows(f"{spec}accepted_tokens_total", accepted),
        f"# TYPE {spec}accepted_tokens_per_pos counter",
        *(
            line
            for i, n in enumerate(pos)
            for line in rows(f"{spec}accepted_tokens_per_pos_total", n, f',position="{i}"')
        ),
        "# TYPE vllm:num_requests_running gauge",
        *rows("vllm:num_requests_running", running),
        "# TYPE vllm:num_requests_waiting gauge",
        *rows("vllm:num_requests_waiting", waiting),
        "# TYPE vllm:kv_cache_usage_perc gauge",
        *rows("vllm:kv_cache_usage_perc", kv, whole=False),
        "# TYPE vllm:generation_tokens counter",
        *rows("vllm:generation_tokens_total", gen),
    ]
    return "\n".join(lines) + "\n"


class FedPoller:
    """What the monitor reads of a poller: latest()."""

    def __init__(self, view: ServerCounterView) -> None:
        self.view = view

    def latest(self) -> ServerCounterView:
        return self.view


def fed_views(engines: int = 1) -> list[ServerCounterView]:
    """The poller's view after each scrape of SCRAPES."""
    samples = [
        parse_counters(page(*s, engines=engines), taken_s=float(i)) for i, s in enumerate(SCRAPES)
    ]
    return [
        ServerCounterView(
            URL,
            samples[0],
            sample,
            counter_delta(samples[0], sample),
            i + 1,
            None,
            previous=samples[i - 1] if i else None,
        )
        for i, sample in enumerate(samples)
    ]


def fed_watch(artifact_dir: Path) -> WatchRun:
    watch = WatchRun({"sim": URL}, artifact_dir, interval_s=1.0)
    track = watch.tracks["sim"]
    views = fed_views()
    for view in views:
        track.add(view)
    # each row at its scrape's second (add() stamps the real clock)
    track.rows = deque(replace(row, t_s=float(i)) for i, row in enumerate(track.rows))
    watch.pollers["sim"] = FedPoller(views[-1])  # type: ignore[assignment]
    return watch


def watch_app(artifact_dir: Path) -> SpecmonApp:
    watch = fed_watch(artifact_dir)
    (_, session), *_ = watch.servers.values()
    config = MonitorConfig(targets=[URL], load_label=NO_LOAD_LABEL, artifact_dir=str(artifact_dir))
    return SpecmonApp(session, watch, config, source="watch", freeze_elapsed=3.0)
