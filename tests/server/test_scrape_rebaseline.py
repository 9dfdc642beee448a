"""A poll-loop scrape that overlaps ServerCounterPoller.rebaseline() must not become the new
window's baseline: the server may have rendered it before the warmup's last counters, and
the profiling window would then count a warmup request (the workers' reconcile mismatch under
CPU load). A real HTTP /metrics server over loopback holds each scrape's answer until the test
releases it, so the interleaving is forced, not timed."""

from __future__ import annotations

import asyncio
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from specmon.server.scrape import ServerCounterPoller


def exposition(drafts: int) -> str:
    """vLLM's spec-decode counters for `drafts` steps, each drafting 2 and accepting 1."""
    labels = 'engine="0",model_name="m"'
    return (
        "# TYPE vllm:spec_decode_num_drafts counter\n"
        f"vllm:spec_decode_num_drafts_total{{{labels}}} {drafts}.0\n"
        "# TYPE vllm:spec_decode_num_draft_tokens counter\n"
        f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} {2 * drafts}.0\n"
        "# TYPE vllm:spec_decode_num_accepted_tokens counter\n"
        f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} {drafts}.0\n"
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter\n"
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="0"}} {drafts}.0\n'
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="1"}} 0.0\n'
    )


class GatedMetrics:
    """/metrics renders the counters when a scrape arrives; scrape number n (from 1) is
    answered only once `release(n)` is called (scrapes not in `gated` answer at once)."""

    def __init__(self, gated: set[int]) -> None:
        self.drafts = 0
        self.arrived: dict[int, threading.Event] = {}
        self.gates = {n: threading.Event() for n in gated}
        self._lock = threading.Lock()
        self._count = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with owner._lock:
                    owner._count += 1
                    number, body = owner._count, exposition(owner.drafts).encode()
                owner.arrival(number).set()
                gate = owner.gates.get(number)
                if gate is not None:
                    gate.wait(60)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def arrival(self, number: int) -> threading.Event:
        with self._lock:
            return self.arrived.setdefault(number, threading.Event())

    async def wait_arrived(self, number: int) -> None:
        assert await asyncio.to_thread(self.arrival(number).wait, 30), f"no scrape {number}"

    def release(self, number: int) -> None:
        self.gates[number].set()


async def test_a_scrape_started_before_rebaseline_is_not_the_new_baseline():
    metrics = GatedMetrics(gated={2, 3})
    metrics.thread.start()
    poller = ServerCounterPoller(metrics.url, interval_s=3600, timeout_s=30)
    try:
        metrics.drafts = 4  # before the run
        await poller.start()  # scrape 1: the first baseline, 4 drafts
        metrics.drafts = 10  # warmup requests answered; the last one is still to come
        stale = asyncio.create_task(poller.sample_now())  # scrape 2 (as the poll loop's)
        await metrics.wait_arrived(2)  # rendered now: 10 drafts
        metrics.drafts = 13  # the last warmup request (3 steps), then every worker is warm
        fresh = asyncio.create_task(poller.rebaseline())  # scrape 3: renders 13
        await metrics.wait_arrived(3)
        metrics.release(2)  # the stale answer lands after the window restarted
        await stale
        metrics.release(3)
        await fresh
        metrics.drafts = 13 + 20  # the profiling requests: 20 steps
        view = await poller.sample_now()  # scrape 4
        await poller.stop()  # scrape 5
    finally:
        metrics.server.shutdown()
        metrics.server.server_close()
    # the window is 13 -> 33: the profiling steps only (20 drafts, 40 drafted, 20 accepted),
    # not 10 -> 33 (the stale scrape as baseline would count the last warmup request's 3)
    assert view.baseline is not None
    assert (view.delta.drafts, view.delta.draft_tokens, view.delta.accepted) == (20, 40, 20)
