"""Server counters from /metrics: parsing, window deltas, derived histogram, reconciliation."""

from __future__ import annotations

import asyncio
import socket
import ssl

import httpx
import pytest
from support.paths import FIXTURES as FIXTURES_DIR

from specmon.errors import UserError
from specmon.server import scrape
from specmon.server.scrape import (
    RunTotals,
    ServerCounterPoller,
    counter_delta,
    describe_reconciliation,
    describe_window,
    fetch_counters,
    metrics_url,
    parse_counters,
    reconcile,
    run_totals_from,
)
from specmon.sim.process import start_sim


def _exposition(engines: dict[str, tuple[int, int, int, list[int]]]) -> str:
    """vLLM-style text: HELP/TYPE lines, `_total` samples, `_created` gauges, other metrics."""
    lines = [
        "# HELP vllm:num_requests_running Number of requests running.",
        "# TYPE vllm:num_requests_running gauge",
    ]
    lines += [f'vllm:num_requests_running{{engine="{e}",model_name="tiny"}} 3.0' for e in engines]
    names = ["num_drafts", "num_draft_tokens", "num_accepted_tokens"]
    for idx, name in enumerate(names):
        lines += [
            f"# HELP vllm:spec_decode_{name} counter",
            f"# TYPE vllm:spec_decode_{name} counter",
        ]
        for e, values in engines.items():
            labels = f'engine="{e}",model_name="tiny"'
            lines.append(f"vllm:spec_decode_{name}_total{{{labels}}} {float(values[idx])}")
            lines.append(f"vllm:spec_decode_{name}_created{{{labels}}} 1.7648e+09")
    lines += [
        "# HELP vllm:spec_decode_num_accepted_tokens_per_pos per pos",
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter",
    ]
    for e, values in engines.items():
        for pos, count in enumerate(values[3]):
            labels = f'engine="{e}",model_name="tiny",position="{pos}"'
            lines.append(
                f"vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels}}} {float(count)}"
            )
            lines.append(
                f"vllm:spec_decode_num_accepted_tokens_per_pos_created{{{labels}}} 1.7648e+09"
            )
    return "\n".join(lines) + "\n"


# (drafts, draft_tokens, accepted, per_pos) per engine, k = 3.
BEFORE = {"0": (10, 30, 12, [6, 4, 2]), "1": (5, 15, 3, [2, 1, 0])}
AFTER = {"0": (30, 90, 40, [18, 13, 9]), "1": (25, 75, 28, [14, 9, 5])}
# Deltas: engine 0: D=20, DT=60, A=28, P=12,9,7 ; engine 1: D=20, DT=60, A=25, P=12,8,5
# Summed: D=40, DT=120, A=53, P=24,17,12 (sum 53 = A)
# Histogram: H0 = 40-24 = 16, H1 = 24-17 = 7, H2 = 17-12 = 5, H3 = 12 (sum 40; 7+10+36 = 53)
HIST = {0: 16, 1: 7, 2: 5, 3: 12}


def _window():
    return counter_delta(
        parse_counters(_exposition(BEFORE), taken_s=100.0),
        parse_counters(_exposition(AFTER), taken_s=112.5),
    )


def test_parse_sums_engines_and_ignores_created():
    sample = parse_counters(_exposition(AFTER))
    assert sample.present and sample.label_sets == 2
    # 30 + 25 drafts; the 1.76e9 `_created` values must not leak in
    assert sample.totals() == {
        "drafts": 55,
        "draft_tokens": 165,
        "accepted": 68,
        "per_pos": {0: 32, 1: 22, 2: 14},
    }


def test_delta_over_window_and_derived_quantities():
    d = _window()
    assert (d.drafts, d.draft_tokens, d.accepted, d.per_pos) == (40, 120, 53, [24, 17, 12])
    assert d.duration_s == pytest.approx(12.5)
    assert d.num_spec_tokens == 3 and d.label_sets == 2 and d.resets == 0
    assert d.acceptance_rate == pytest.approx(53 / 120)  # 0.441667
    assert d.acceptance_length == pytest.approx(2.325)  # 1 + 53/40
    assert d.per_position_rates == pytest.approx([0.6, 0.425, 0.3])  # 24/40, 17/40, 12/40
    assert d.histogram() == [16, 7, 5, 12]
    assert d.consistent


def test_untyped_exposition_without_help_lines_parses():
    text = (
        'vllm:spec_decode_num_drafts_total{engine="0"} 4\n'
        'vllm:spec_decode_num_accepted_tokens_total{engine="0"} 6\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 4\n'
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 2\n'
    )
    totals = parse_counters(text).totals()
    assert totals["drafts"] == 4 and totals["accepted"] == 6 and totals["per_pos"] == {0: 4, 1: 2}


def test_no_spec_counters_is_reported_not_raised():
    sample = parse_counters("# TYPE up gauge\nup 1\n")
    assert not sample.present
    d = counter_delta(sample, sample)
    assert d.acceptance_length is None and d.histogram() == []
    rec = reconcile(d, RunTotals(10, 5, 20))
    assert not rec.equal and "no spec-decode counters" in rec.reasons[0]


def test_garbage_text_is_a_user_error():
    with pytest.raises(UserError, match="not valid Prometheus text"):
        parse_counters("vllm:spec_decode_num_drafts_total{engine=0 oops\n")


def test_reconcile_equal_with_matching_run_totals():
    rec = reconcile(_window(), RunTotals(steps=40, accepted=53, drafted=120, histogram=HIST))
    assert rec.equal and rec.diffs == {} and rec.reasons == []
    # the same totals as an AIPerf export summary (derived metrics carry only avg)
    summary = {
        "total_spec_decode_steps": {"unit": "count", "avg": 40},
        "total_accepted_draft_tokens": {"unit": "tokens", "avg": 53},
        "total_draft_tokens": {"unit": "tokens", "avg": 120},
        "pooled_spec_decode_acceptance_histogram": {"0": 16, "1": 7, "2": 5, "3": 12},
    }
    assert run_totals_from(summary) == RunTotals(40, 53, 120, HIST)
    assert reconcile(_window(), summary).equal


def test_reconcile_server_higher_names_n_gt_1_and_other_clients():
    # the run saw 30 steps / 40 accepted / 90 drafted, and 2 requests had n > 1
    run = RunTotals(30, 40, 90, spec_reasons={"n_gt_1": 2})
    rec = reconcile(_window(), run)
    assert not rec.equal
    assert rec.diffs == {"steps": 10, "accepted": 13, "drafted": 30}
    text = " | ".join(rec.reasons)
    assert "2 request(s) with n > 1" in text and "other clients" in text


def test_reconcile_no_stats_in_responses_points_at_flag_or_proxy():
    rec = reconcile(_window(), RunTotals(0, 0, 0))
    assert not rec.equal and "no response carried per-request stats" in rec.reasons[0]


def test_reconcile_server_lower_and_histogram_diff():
    run = RunTotals(41, 53, 120, histogram={0: 17, 1: 7, 2: 5, 3: 12})
    rec = reconcile(_window(), run)
    assert rec.diffs == {"steps": -1, "histogram[0]": -1}
    assert any("counted less" in r for r in rec.reasons)


def test_counter_reset_counts_from_zero_and_is_flagged():
    restarted = {"0": (30, 90, 40, [18, 13, 9]), "1": (2, 6, 1, [1, 0, 0])}  # engine 1 restarted
    d = counter_delta(parse_counters(_exposition(BEFORE)), parse_counters(_exposition(restarted)))
    # engine 0: D=20 ; engine 1 restarted: its 2 drafts count from zero -> D = 22
    assert d.drafts == 22 and d.resets > 0
    rec = reconcile(d, RunTotals(22, 29, 66))  # accepted 28+1, drafted 60+6
    assert not rec.equal and "went backwards" in rec.reasons[0]


@pytest.mark.parametrize(
    "url, expected",
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000/metrics"),
        ("http://127.0.0.1:8000/", "http://127.0.0.1:8000/metrics"),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/metrics"),
        ("https://gpu/metrics", "https://gpu/metrics"),
    ],
)
def test_metrics_url(url, expected):
    assert metrics_url(url) == expected


def test_metrics_url_rejects_non_http():
    with pytest.raises(UserError, match="not an http"):
        metrics_url("gpu-box:8000")


# ---------------------------------------------------------------- the real vLLM capture

FIXTURE = FIXTURES_DIR / "vllm032" / "detailed_metrics_spec_decode.prom"


def test_real_vllm_032_exposition():
    # vLLM 0.32 declares `# TYPE ..._total counter` and adds `_created` gauges
    sample = parse_counters(FIXTURE.read_text())
    d = counter_delta(parse_counters(""), sample)  # window from an empty server
    assert (d.drafts, d.draft_tokens, d.accepted, d.per_pos) == (93, 221, 166, [79, 50, 37])
    # H0 = 93-79 = 14, H1 = 79-50 = 29, H2 = 50-37 = 13, H3 = 37 ; 29 + 2*13 + 3*37 = 166
    assert d.histogram() == [14, 29, 13, 37] and d.consistent
    assert d.acceptance_length == pytest.approx(1 + 166 / 93)  # 2.785
    assert d.acceptance_rate == pytest.approx(166 / 221)  # 0.751


# ---------------------------------------------------------------- against a real `specmon sim`


@pytest.fixture(scope="module")
def sim():
    with start_sim(
        ["--engines", "2", "--num-spec-tokens", "3", "--seed", "7", "--acceptance", "0.8,0.7,0.6"]
    ) as proc:
        yield proc


async def _chat(client: httpx.AsyncClient, model: str, count: int, n: int = 1) -> RunTotals:
    """Send `count` requests; total what their payloads carried (as a specmon run would)."""
    steps = accepted = drafted = 0
    hist: dict[int, int] = {}
    for i in range(count):
        body = {
            "model": model,
            "messages": [{"role": "user", "content": f"q{i}"}],
            "max_tokens": 24,
            "n": n,
        }
        resp = await client.post("/v1/chat/completions", json=body)
        assert resp.status_code == 200
        spec = (resp.json().get("metrics") or {}).get("speculative_decoding")
        if spec is None:
            continue
        steps += spec["num_spec_steps"]
        accepted += spec["num_accepted_draft_tokens"]
        drafted += spec["num_draft_tokens"]
        for j, c in enumerate(spec["acceptance_histogram"]):
            if c:
                hist[j] = hist.get(j, 0) + c
    return RunTotals(steps, accepted, drafted, histogram=hist)


@pytest.mark.e2e
async def test_poller_window_reconciles_with_the_run(sim):
    async with httpx.AsyncClient(base_url=sim.url, timeout=10) as client:
        await _chat(client, sim.model, 3)  # before the window: must not count
        poller = ServerCounterPoller(sim.url, interval_s=0.05, timeout_s=5)
        await poller.start()
        assert poller.latest().samples == 1 and poller.latest().delta.drafts == 0
        run = await _chat(client, sim.model, 8)
        final = (await poller.sample_now()).samples
        view = await poller.stop(settle_s=5.0)
    # settling stops as soon as two samples agree: the stop sample and one more
    assert view.samples == final + 2
    assert view.error is None and view.samples >= 2
    d = view.delta
    assert run.steps > 0 and d.label_sets == 2
    per_engine = {
        e: sum(
            v
            for (f, labels), v in view.last.series.items()
            if f == "drafts" and ("engine", e) in labels
        )
        for e in ("0", "1")
    }
    assert per_engine["0"] > 0 and per_engine["1"] > 0  # both label sets carry steps
    rec = reconcile(d, run)
    assert rec.equal, rec
    assert d.histogram() == [run.histogram.get(j, 0) for j in range(4)]
    assert d.acceptance_length == pytest.approx(1 + run.accepted / run.steps)


@pytest.mark.e2e
async def test_other_clients_and_n_gt_1_make_it_unequal(sim):
    async with (
        httpx.AsyncClient(base_url=sim.url, timeout=10) as mine,
        httpx.AsyncClient(base_url=sim.url, timeout=10) as other,
    ):
        poller = ServerCounterPoller(sim.url, interval_s=0.05, timeout_s=5)
        await poller.start()
        run = await _chat(mine, sim.model, 5)
        extra = await _chat(other, sim.model, 4)  # another client, not in the run's totals
        view = await poller.stop()
    rec = reconcile(view.delta, run)
    assert not rec.equal
    assert rec.diffs["steps"] == extra.steps and rec.diffs["accepted"] == extra.accepted
    assert any("other clients" in r for r in rec.reasons)
    # an n=2 request: the server counts its steps, the response carries no stats
    async with httpx.AsyncClient(base_url=sim.url, timeout=10) as mine:
        poller = ServerCounterPoller(sim.url, interval_s=0.05, timeout_s=5)
        await poller.start()
        run = await _chat(mine, sim.model, 2)
        await _chat(mine, sim.model, 1, n=2)
        view = await poller.stop()
    run = RunTotals(run.steps, run.accepted, run.drafted, spec_reasons={"n_gt_1": 1})
    rec = reconcile(view.delta, run)
    assert not rec.equal and rec.diffs["steps"] > 0
    assert rec.reasons[0].startswith("1 request(s) with n > 1")


@pytest.mark.e2e
def test_sync_fetch_counters(sim):
    # Send its own requests: under pytest-xdist this test may be the first to use the sim.
    before = fetch_counters(sim.url + "/v1").totals()["drafts"]
    run = asyncio.run(_chat_once(sim))
    sample = fetch_counters(sim.url + "/v1")
    assert sample.present and sample.label_sets == 2
    assert sample.totals()["drafts"] - before == run.steps > 0


async def _chat_once(sim) -> RunTotals:
    async with httpx.AsyncClient(base_url=sim.url, timeout=10) as client:
        return await _chat(client, sim.model, 2)


def test_fetch_unreachable_server_is_one_line_user_error():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(UserError, match=f"could not read http://127.0.0.1:{port}/metrics") as info:
        fetch_counters(f"http://127.0.0.1:{port}", timeout_s=2)
    assert "\n" not in str(info.value)


def test_every_client_shares_one_tls_context(monkeypatch):
    """A new httpx client builds a TLS context (the CA bundle loaded: tens of ms of CPU) even
    for http://; a sweep scrapes about three times a repeat, so every client shares one."""
    built: list[object] = []
    real = ssl.create_default_context

    def counted(*args, **kw):
        built.append(args or kw)
        return real(*args, **kw)

    monkeypatch.setattr(ssl, "create_default_context", counted)
    scrape.tls_context.cache_clear()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    try:
        for _ in range(3):
            with pytest.raises(UserError):
                fetch_counters(url, timeout_s=2)
        asyncio.run(_start_and_stop(ServerCounterPoller(url, interval_s=0.05, timeout_s=1)))
    finally:
        scrape.tls_context.cache_clear()
    assert len(built) == 1


async def _start_and_stop(poller: ServerCounterPoller) -> None:
    await poller.start()
    await poller.stop()


async def test_poller_records_errors_without_raising():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    poller = ServerCounterPoller(f"http://127.0.0.1:{port}", interval_s=0.05, timeout_s=1)
    await poller.start()
    view = await poller.stop()
    assert view.delta is None and view.samples == 0 and "ConnectError" in view.error


def test_one_line_descriptions():
    line = describe_window(_window())
    # rate 53/120 = 44.17 % ; D = 40 steps ; (AL 2.325 sits on a rounding edge: not asserted)
    assert "2 engine(s)" in line and "44.2%" in line and "40 steps" in line
    assert "\n" not in line
    assert describe_window(None) == "server /metrics: no sample yet"
    rec = reconcile(_window(), RunTotals(30, 40, 90))
    text = describe_reconciliation(rec)
    assert "steps +10" in text and "accepted +13" in text and "other clients" in text
    assert (
        describe_reconciliation(reconcile(_window(), RunTotals(40, 53, 120)))
        == "server counters match the per-request totals"
    )


async def test_a_restart_between_scrapes_is_counted_even_when_the_total_hides_it():
    """The window is summed scrape to scrape: a server that restarts and counts past the
    baseline again (15 drafts > the baseline's 10) was invisible to baseline -> last (5
    drafts, no reset); now the restart is counted and named."""
    pages = [
        {"0": (10, 30, 12, [6, 4, 2])},  # the baseline
        {"0": (30, 90, 40, [18, 13, 9])},  # +20 drafts, +60 tokens, +28 accepted
        {"0": (15, 45, 20, [9, 7, 4])},  # restarted: counted from zero, +15, +45, +20
    ]
    page = {"text": _exposition(pages[0])}

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        body = page["text"].encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n")
        writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    poller = ServerCounterPoller(f"http://127.0.0.1:{port}", interval_s=3600, timeout_s=5)
    try:
        await poller.start()  # the baseline
        for later in pages[1:]:
            page["text"] = _exposition(later)
            view = await poller.sample_now()
        await poller.stop()
    finally:
        server.close()
        await server.wait_closed()
    d = view.delta
    assert (d.drafts, d.draft_tokens, d.accepted) == (20 + 15, 60 + 45, 28 + 20)
    assert d.per_pos == [12 + 9, 9 + 7, 7 + 4]
    assert d.resets == 6  # drafts, draft tokens, accepted and the three positions went down
    rec = reconcile(d, RunTotals(35, 48, 105))
    assert not rec.equal and "went backwards" in rec.reasons[0]


async def test_stop_ends_the_poll_loop_when_a_scrape_swallows_the_cancel(monkeypatch):
    """Python 3.11's asyncio.wait_for (the scrape's time limit) can swallow a cancel that
    lands as the scrape completes; the poll loop then went on polling and stop(), awaiting
    it, never returned (a test hung 95 minutes on a busy core). Here every scrape swallows
    its cancel: stop() must still end, the loop with it."""
    scrapes = 0

    async def swallowing(client, url):
        nonlocal scrapes
        scrapes += 1
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            pass  # what wait_for does when the inner scrape finished at the cancel
        return scrape.parse_counters(b"# no counters\n")

    monkeypatch.setattr(scrape, "fetch_counters_async", swallowing)
    poller = ServerCounterPoller("http://127.0.0.1:9", interval_s=0.001, timeout_s=1)
    await poller.start()
    await asyncio.sleep(0.02)  # the loop is inside a scrape now
    await asyncio.wait_for(poller.stop(), 5)
    done = scrapes
    await asyncio.sleep(0.2)
    assert scrapes == done  # nothing polls after stop()
