"""Smoke runs of the benchmark scripts with tiny counts: each prints its table with sane,
positive figures. No wall-clock thresholds: only that the harness measures something real.

The scripts run as real child processes against real servers on loopback (nginx for
bench_load.py, `specmon sim` for bench_tui.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks"
sys.path.insert(0, str(BENCH))

import _harness  # noqa: E402
import bench_load  # noqa: E402
import bench_sim  # noqa: E402
import bench_tui  # noqa: E402

NGINX_MISSING = "nginx not installed (apt-get install -y nginx-light)"
needs_nginx = pytest.mark.skipif(
    not (shutil.which("nginx") or Path("/usr/sbin/nginx").exists()), reason=NGINX_MISSING
)


def run_script(name: str, *args: str, timeout: float = 240) -> str:
    result = subprocess.run(
        [sys.executable, str(BENCH / name), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def parse_table(text: str) -> list[dict[str, str]]:
    """Rows of the first markdown table in `text`, keyed by header."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    headers = [cell.strip() for cell in lines[0].strip("|").split("|")]
    return [
        dict(zip(headers, (cell.strip() for cell in line.strip("|").split("|"))))
        for line in lines[2:]
    ]


def num(cell: str) -> float:
    return float(cell.replace(",", ""))


# ---------------------------------------------------------------- the fixed reply


def test_reply_is_a_32_event_vllm_stream_with_the_stats_once():
    events = bench_load.sse_reply().decode().split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    bodies = [json.loads(event[len("data: ") :]) for event in events[:-2]]
    assert len(bodies) == 32
    assert bodies[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert bodies[-2]["choices"][0]["finish_reason"] == "length"
    carrying = [body for body in bodies if "metrics" in body]
    assert carrying == [bodies[-1]] and bodies[-1]["choices"] == []  # only the usage chunk
    # 28 steps accepting 0,1,2,3,0,1,... drafts: histogram [7,7,7,7];
    # accepted = 0*7+1*7+2*7+3*7 = 42; drafted = 28*3 = 84; AL = 1 + 42/28 = 2.5; rate = 42/84.
    assert bodies[-1]["metrics"]["speculative_decoding"] == {
        "mean_acceptance_length": 2.5,
        "draft_acceptance_rate": 0.5,
        "acceptance_histogram": [7, 7, 7, 7],
        "num_spec_steps": 28,
        "num_accepted_draft_tokens": 42,
        "num_draft_tokens": 84,
        "num_spec_tokens": 3,
    }
    # completion tokens = 1 prefill + 28 bonus tokens + 42 accepted = 71, and the content
    # chunks carry exactly that many tokens (" The" then " tok" per token).
    assert bodies[-1]["usage"] == {"prompt_tokens": 16, "total_tokens": 87, "completion_tokens": 71}
    text = "".join(body["choices"][0]["delta"].get("content", "") for body in bodies[:-1])
    assert len(text.split()) == 71


@pytest.mark.e2e
@needs_nginx
def test_nginx_serves_the_reply_to_post_and_the_model_list():
    server = bench_load.Nginx()
    with server as url:
        post = urllib.request.Request(
            url + "/v1/chat/completions",
            data=b'{"stream": true}',
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(post, timeout=5) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"] == "text/event-stream"
            assert resp.read() == bench_load.sse_reply()
        with urllib.request.urlopen(url + "/v1/models", timeout=5) as resp:
            assert json.loads(resp.read())["data"][0]["id"] == bench_load.MODEL
    with pytest.raises(OSError):  # stopped on exit: nothing listens any more
        urllib.request.urlopen(url + "/v1/models", timeout=2)
    assert not server.prefix.exists()  # its temp dir (config, files, logs) is gone


# ---------------------------------------------------------------- harness arithmetic


def _result(
    requests: int, cpu_s: float, rss_mb: float, wall_s: float = 1.0
) -> bench_load.RunResult:
    usage = _harness.ChildUsage(0, wall_s, cpu_s, rss_mb, "", "")
    return bench_load.RunResult(requests, 0, 1000.0, 2.5, usage)


def test_two_point_row_takes_marginal_costs():
    row = bench_load.two_point_row(
        "specmon", 64, _result(100, 1.0, 50.0, wall_s=1.0), _result(400, 2.5, 53.0, wall_s=1.6)
    )
    # CPU per request = (2.5 - 1.0) / (400 - 100) = 0.005 s -> 5.0 s per 1,000 requests;
    # start-up = 1.0 - 0.005 * 100 = 0.5 s; memory = (53 - 50) MB * 1024 / 300 = 10.24 KB/request
    assert row.cpu_per_1k == pytest.approx(5.0)
    assert row.startup_cpu == pytest.approx(0.5)
    assert row.kb_per_request == pytest.approx(10.24)
    assert row.wall_req_per_s == pytest.approx(500.0)  # (400 - 100) requests / (1.6 - 1.0) s
    cells = dict(zip(bench_load.LOAD_HEADERS, row.cells()))
    assert cells["SSE events/s"] == pytest.approx(1000.0 * 32)  # req/s * 32 events a reply
    assert cells["req/s"] == 1000.0  # the tool's own export figure, as it reported it


def test_two_point_row_leaves_wall_rate_out_when_start_up_noise_swamps_it():
    row = bench_load.two_point_row(
        "aiperf 0.13",
        64,
        _result(100, 5.0, 240.0, wall_s=9.0),
        _result(400, 6.0, 240.0, wall_s=8.5),
    )
    assert row.wall_req_per_s is None
    assert dict(zip(bench_load.LOAD_HEADERS, row.cells()))["wall req/s"] is None


def test_verdicts_name_the_target_and_the_ratio_to_aiperf():
    ours = bench_load.two_point_row("specmon", 64, _result(100, 1.0, 50.0), _result(400, 2.5, 53.0))
    peer = bench_load.two_point_row(
        "aiperf 0.13", 64, _result(100, 1.0, 50.0), _result(400, 2.5, 53.0)
    )
    peer.req_per_s = 250.0
    lines = bench_load.verdicts([ours, peer], target=3000, target_concurrency=64)
    # 1000 req/s < 3000: missed; 5.0 CPU s/1k -> 1000/5 = 200 req/s per core; 1000/3000 = 0.33
    assert lines[0] == "target >= 3,000 req/s at concurrency 64: MISSED (1,000 req/s)"
    assert lines[1].startswith("CPU-bound ceiling at concurrency 64: 200 req/s per core")
    assert lines[1].endswith("the target needs <= 0.33)")
    assert lines[2] == "concurrency 64: specmon/AIPerf = 4.00x"  # 1000 / 250


def test_two_point_row_refuses_runs_that_did_not_grow():
    with pytest.raises(_harness.BenchError):
        bench_load.two_point_row("specmon", 1, _result(100, 1.0, 50.0), _result(100, 1.1, 50.0))


def test_markdown_table_layout():
    table = _harness.markdown_table(["tool", "req/s", "x"], [["a", 1234.5, 2], ["bb", 0.5, None]])
    assert table.splitlines() == [
        "| tool | req/s | x   |",
        "| ---- | ----- | --- |",
        "| a    | 1,234 |   2 |",
        "| bb   |  0.50 | n/a |",
    ]


def test_proc_cpu_s_reads_this_process():
    end = time.process_time() + 0.3
    while time.process_time() < end:  # burn some CPU so the figure is well above zero
        pass
    from_proc, from_clock = bench_tui.proc_cpu_s(os.getpid()), time.process_time()
    assert from_proc > 0.25
    assert abs(from_proc - from_clock) < 0.1  # /proc counts in 10 ms ticks


@pytest.mark.e2e
def test_run_measured_reports_a_childs_cpu_and_exit_status():
    burn = (
        "import time\nend = time.process_time() + 0.4\n"
        "while time.process_time() < end: pass\nraise SystemExit(3)"
    )
    usage = _harness.run_measured([sys.executable, "-c", burn], timeout_s=60)
    assert usage.returncode == 3
    assert usage.cpu_s >= 0.4
    assert usage.maxrss_mb > 1


# ---------------------------------------------------------------- the scripts


@pytest.mark.e2e
@needs_nginx
def test_bench_load_prints_the_specmon_table():
    # 250 then 1,000 requests: enough that the 750 extra requests' CPU (about 0.3 s) stands
    # well clear of the start-up noise the two-point difference cancels
    out = run_script(
        "bench_load.py", "--concurrency", "1,8", "--request-count", "1000", "--no-aiperf"
    )
    rows = parse_table(out)
    assert [(row["tool"], row["concurrency"]) for row in rows] == [
        ("specmon", "1"),
        ("specmon", "8"),
    ], out
    for row in rows:
        assert num(row["requests"]) == 1000 and num(row["errors"]) == 0
        # CPU per 1k requests is a two-point difference: on a busy machine it can read a
        # little below 0 (-0.04 with one core kept busy), so only its sign-free size is held
        assert num(row["req/s"]) > 0 and num(row["peak RSS MB"]) > 1
        assert -0.5 < num(row["CPU s/1k req"]) < 100
        # every reply is 32 events, so events/s = 32 * req/s (both rounded in the table)
        assert num(row["SSE events/s"]) == pytest.approx(32 * num(row["req/s"]), rel=0.02)
        assert row["accept. length"] == "2.50"  # specmon read the payload: 1 + 42/28
    assert "AIPerf columns skipped: --no-aiperf" in out


@pytest.mark.e2e
@needs_nginx
def test_bench_load_clients_mode_compares_clients():
    out = run_script(
        "bench_load.py",
        "--clients",
        "--concurrency",
        "4",
        "--request-count",
        "40",
        "--client-kinds",
        "aiohttp-uvloop,httpx-shared,httpx-per-slot",
    )
    rows = parse_table(out)
    assert [row["client"] for row in rows] == [
        "aiohttp-uvloop",
        "httpx-shared",
        "httpx-per-slot",
    ], out
    for row in rows:
        assert num(row["requests"]) == 40 and num(row["errors"]) == 0
        assert num(row["req/s"]) > 0 and num(row["CPU s/1k req"]) > 0
        assert num(row["SSE events/s"]) == pytest.approx(32 * num(row["req/s"]), rel=0.02)
    assert "note: client" not in out  # no client failed or miscounted events


def _aiperf_or_reason() -> str | None:
    found = bench_load.AIPerf.locate()
    return found if isinstance(found, str) else None


@pytest.mark.acceptance  # AIPerf and specmon each drive real load through nginx
@pytest.mark.e2e
@needs_nginx
def test_bench_load_runs_aiperf_beside_specmon():
    reason = _aiperf_or_reason()
    if reason:
        pytest.skip(f"AIPerf peer unavailable: {reason}")
    out = run_script("bench_load.py", "--concurrency", "2", "--request-count", "20", timeout=400)
    rows = {row["tool"]: row for row in parse_table(out)}
    assert set(rows) == {"specmon", "aiperf 0.13"}, out  # the notes say why a tool failed
    for row in rows.values():
        assert num(row["requests"]) == 20 and num(row["req/s"]) > 0 and num(row["peak RSS MB"]) > 1
        assert row["accept. length"] == "2.50"  # both tools read the same payload the same way
    assert "concurrency 2: specmon/AIPerf = " in out


@pytest.mark.acceptance  # the headless and TUI benchmarks, each on real load
@pytest.mark.e2e
@pytest.mark.skipif(not shutil.which("tmux"), reason="tmux not installed (apt-get install -y tmux)")
def test_bench_tui_prints_headless_and_tui_rows():
    out = run_script("bench_tui.py", "--duration", "2", "--concurrency", "2", "--show-screen")
    rows = parse_table(out)
    modes = ["headless", "tui 100x30", "tui 100x30, 3 (charts)"]
    assert [row["mode"] for row in rows] == modes, out
    for row in rows:
        assert num(row["requests"]) > 0 and num(row["req/s"]) > 0
        assert num(row["specmon CPU s"]) > 0 and num(row["CPU ms/request"]) > 0
        assert num(row["sim CPU s"]) > 0  # the simulator did the serving
    assert "request rate, tui/headless: " in out and "CPU per request, tui/headless: " in out
    # the monitor really drew: the headline and the histogram panel, shown at every size
    # (100x30 is the compact layout, without the Spec Decode table)
    screen, charts = out.split("last TUI screen:")[1].split("TUI screen with charts:")
    assert "tok-wtd AL" in screen and "Accepted drafts per step" in screen
    # the third run had panel 3 maximized: the series as charts with axes
    assert "time since start (s)" in charts and "output tok/s · now" in charts
    assert "specmon CPU s, charts/sparklines: " in out
    assert "panel 3's four charts at 160x48: " in out and " CPU ms per repaint" in out


def test_bench_sim_rows_name_the_last_rung_that_held():
    held = bench_sim.Rung(4.0, 8459.4, 0.007, 13.44, 0.987)
    behind = bench_sim.Rung(1.0, 20175.0, 0.622, 13.4, 1.0)
    assert bench_sim.row(16, 3, held, behind) == [
        16, 3, "4", "8,459", "0.7%", "13.4", "0.99", "1 ms", "62.2%"
    ]  # fmt: skip
    assert bench_sim.row(1, 0, None, behind)[2:] == [
        "none held", "-", "-", "-", "-", "1 ms", "62.2%"
    ]  # fmt: skip
    assert bench_sim.expected_tokens(3) == pytest.approx(1 + 0.7 + 0.49 + 0.343)


@pytest.mark.e2e
def test_bench_sim_prints_its_table():
    # one cell, one coarse rung (20 ms steps hold on any machine: the lag column is printed,
    # not asserted), a second of load: a real sim serves a real client
    out = run_script(
        "bench_sim.py", "--concurrency", "4", "--k", "3", "--step-ms", "20",
        "--duration", "1", "--warmup", "0.3", "--max-tokens", "32",
    )  # fmt: skip
    (row,) = parse_table(out)
    assert (row["C"], row["k"]) == ("4", "3")
    assert "load average before:" in out
    if row["at formula: step ms"] != "none held":
        assert row["at formula: step ms"] == "20" and num(row["tok/s"]) > 0
        # 4 clients of 32-token streams at 20 ms steps: 4 * E(3) tokens per step on average,
        # + ~3% prefill tokens (one per request of ~13 steps) + the draws' spread in a second
        assert num(row["tok/s"]) <= 4 * bench_sim.expected_tokens(3) / 0.020 * 1.2
        assert 0 < num(row["busy"]) <= 1.05  # formula seconds per wall second, one engine
