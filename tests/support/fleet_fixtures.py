"""A real Prometheus (Debian's `prometheus` package) scraping `specmon sim` replicas every
second over loopback, a load on each replica, and the truth from the replicas' own /metrics.

The truth is read here with a regex of its own (not specmon's parser): the spec-decode
counters of either spelling (`vllm:` or Ray Serve's `ray_vllm_`), summed over label sets.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from specmon.run.sweep.servers import free_port
from specmon.server.process import ServerProcess
from specmon.sim.process import start_sim
from support.paths import debian_binary

SCRAPE_S = 1  # the scrape and evaluation interval of the generated config
_COUNTER = re.compile(
    rb"^(?:vllm:|ray_vllm_)spec_decode_num_(drafts|draft_tokens|accepted_tokens)_total"
    rb"(?:\{[^}]*\})? ([0-9.e+]+)$",
    re.M,
)


def prometheus_binary() -> str:
    return debian_binary("prometheus", "/usr/bin/prometheus", "prometheus")


def truth(url: str) -> dict[str, float]:
    """drafts, draft_tokens, accepted_tokens of one replica now, from its own /metrics."""
    page = httpx.get(url + "/metrics", timeout=10).content
    out = {"drafts": 0.0, "draft_tokens": 0.0, "accepted_tokens": 0.0}
    for name, value in _COUNTER.findall(page):
        out[name.decode()] += float(value)
    return out


def al_between(before: dict[str, float], after: dict[str, float]) -> float:
    drafts = after["drafts"] - before["drafts"]
    return 1 + (after["accepted_tokens"] - before["accepted_tokens"]) / drafts


@dataclass
class Prometheus:
    url: str
    process: subprocess.Popen[bytes]

    def query(self, promql: str) -> list[dict]:
        answer = httpx.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=10)
        return answer.json()["data"]["result"]

    def wait_for(self, promql: str, n: int, timeout_s: float = 60) -> None:
        """Until `promql` returns at least n series (the scrapes have begun)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if len(self.query(promql)) >= n:
                    return
            except (httpx.HTTPError, KeyError, ValueError):
                pass
            time.sleep(0.3)
        raise AssertionError(f"Prometheus never returned {n} series for {promql}")


def start_prometheus(targets: list[str], workdir: Path, job: str = "vllm") -> Prometheus:
    """Prometheus on a free loopback port, scraping `targets` (host:port) every second."""
    binary = prometheus_binary()
    config = workdir / "prometheus.yml"
    listed = ", ".join(f"'{t}'" for t in targets)
    config.write_text(
        f"global:\n  scrape_interval: {SCRAPE_S}s\n  evaluation_interval: {SCRAPE_S}s\n"
        f"scrape_configs:\n  - job_name: {job}\n    static_configs:\n"
        f"      - targets: [{listed}]\n"
    )
    port = free_port()
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(workdir / "prometheus.log", "wb"),
    )
    return Prometheus(f"http://127.0.0.1:{port}", process)


PACE_S = 0.15  # each sender's pause between requests: about a third of the back-to-back
# rate, still hundreds of drafts a second per replica (every check here is a ratio of counter
# deltas over tens of seconds), where back to back the replicas took both cores for the module


@dataclass
class Load:
    """Two threads per replica, each sending a completion every PACE_S until stopped."""

    urls: list[str]
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    sent: int = 0

    def start(self) -> Load:
        for url in self.urls:
            for _ in range(2):
                thread = threading.Thread(target=self._send, args=(url,), daemon=True)
                thread.start()
                self.threads.append(thread)
        return self

    def _send(self, url: str) -> None:
        with httpx.Client(timeout=30) as client:
            while not self.stop.is_set():
                body = {"model": "specmon-sim", "prompt": "count to ten", "max_tokens": 48}
                try:
                    client.post(url + "/v1/completions", json=body)
                    self.sent += 1
                except httpx.HTTPError:
                    pass
                self.stop.wait(PACE_S)

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)


@dataclass
class Fleet:
    prometheus: Prometheus
    replicas: dict[str, ServerProcess]  # instance (host:port) -> simulator
    low: str  # the instance with the lower acceptance
    ray: str  # the instance exporting ray_vllm_ names


def instance(sim: ServerProcess) -> str:
    return sim.url.split("//", 1)[1]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    prometheus_binary()
    common = ["--num-spec-tokens", "3", "--step-ms", "4", "--seed", "11"]
    sims = [
        start_sim([*common, "--acceptance", "0.8"]),
        start_sim([*common, "--acceptance", "0.8", "--metrics-spelling", "ray"]),
        start_sim([*common, "--acceptance", "0.35"]),
    ]
    replicas = {instance(s): s for s in sims}
    prom = start_prometheus(list(replicas), tmp_path_factory.mktemp("prometheus"))
    load = Load([s.url for s in sims]).start()
    try:
        names = (
            '{__name__=~"vllm:spec_decode_num_drafts_total|ray_vllm_spec_decode_num_drafts_total"}'
        )
        prom.wait_for(names, 3)
        yield Fleet(prom, replicas, instance(sims[2]), instance(sims[1]))
    finally:
        load.close()
        prom.process.terminate()
        prom.process.wait(10)
        for sim in sims:
            sim.stop()
