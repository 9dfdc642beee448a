"""The client's edges (issue 19 item 5): an SSE event whose CR LF is split across two reads
stays one event; a body past --max-response-bytes is an error of its own kind; a float
option must be finite; userinfo in a --url is printed and written nowhere."""

from __future__ import annotations

import json

import pytest
from support.cli import specmon
from support.hostile_server import GOOD, HostileServer

from specmon.config import RunConfig, redact_url
from specmon.sources.load.client import SSEParser


@pytest.mark.parametrize(
    "chunks",
    [
        [b"data: x\r", b"\ndata: y\r\n\r\n"],  # the CR LF of line 1 split
        [b"data: x\r\n\r", b"\n"],  # the event's closing CR LF split
        [b"data: x\r", b"\n", b"data: y\r", b"\n\r\n"],
    ],
)
def test_a_crlf_split_across_reads_keeps_the_event_whole(chunks):
    parser = SSEParser()
    events = [event for chunk in chunks for event in parser.feed(chunk)] + parser.finish()
    joined = b"".join(chunks).replace(b"\r\n", b"\n")
    expected = b"x\ny" if b"y" in joined else b"x"  # data lines of one event, joined by LF
    assert events == [expected]


def test_a_lone_cr_still_ends_a_line():
    parser = SSEParser()
    assert parser.feed(b"data: a\r\rdata: b\r") == [b"a"]
    assert parser.feed(b"\r") == []  # held back: a CR may be the first half of a CR LF
    assert parser.feed(b"data: c\n\n") == [b"b", b"c"]  # it was not: CR CR ended "b"


@pytest.mark.e2e
def test_a_body_past_max_response_bytes_is_response_too_large(tmp_path):
    big = GOOD[:-1] + b',"pad":"' + b"x" * 200_000 + b'"}'
    out = tmp_path / "run"
    with HostileServer({"big": big, "good": GOOD}) as server:
        proc = specmon(
            "run", "--headless", "--url", server.url, "--request-count", "4",
            "--concurrency", "1", "--max-response-bytes", "100000", "--artifact-dir", str(out),
            timeout=120,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(x) for x in (out / "profile_export.jsonl").read_text().splitlines()]
    errors = [line["error"] for line in lines if line.get("error")]
    assert len(lines) == 4 and len(errors) == 2
    assert {e["type"] for e in errors} == {"response_too_large"}
    assert "over 100000 bytes" in errors[0]["message"]


@pytest.mark.e2e
@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e400", "1e8"])
def test_request_timeout_must_be_finite_and_in_range(value):
    proc = specmon(
        "run", "--headless", "--url", "http://127.0.0.1:9", f"--request-timeout={value}", timeout=60
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("specmon: error: option --request-timeout")
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.e2e
def test_userinfo_is_stripped_and_becomes_the_api_key(tmp_path, sims):
    config = RunConfig(url=["gpu=http://bob:s3cret@h:8000/v1"])
    assert config.url == ["gpu=http://h:8000/v1"] and config.api_key == "s3cret"
    assert RunConfig(url=["http://s3cret@h:8000"]).api_key == "s3cret"
    assert RunConfig(url=["http://a:b@h"], api_key="k").api_key == "k"
    assert redact_url("http://bob:s3cret@h:8000/v1") == "http://***@h:8000/v1"
    out = tmp_path / "run"
    sim = sims(["--seed", "1", "--api-key", "s3cret"])
    url = sim.url.replace("http://", "http://bob:s3cret@")
    proc = specmon(
        "run", "--headless", "--url", url, "--request-count", "3", "--artifact-dir", str(out),
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr  # the key reached the server as --api-key
    assert "s3cret" not in proc.stdout + proc.stderr
    assert not [p.name for p in out.iterdir() if "s3cret" in p.read_text()]
