"""server/models.py, the one way specmon asks a server what it serves: the listing read by
hand-written documents, and real GETs over loopback (a plain http.server on a thread)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import orjson
import pytest

from specmon.server.models import HTTPError, get_models, list_models, model_cards, model_ids


def test_model_ids_of_hand_written_listings():
    listing = {"data": [{"id": "a"}, {"id": "b", "owned_by": "sglang"}, {"object": "model"}]}
    assert model_ids(listing) == ["a", "b"]  # a card without an id lists nothing
    assert model_ids({"data": [{"id": 7}]}) == ["7"]
    assert model_cards({"data": ["x", {"id": "c"}]}) == [{"id": "c"}]  # not a card: skipped
    for odd in (None, [], "text", {"data": None}, {"data": {"id": "a"}}, {}):
        assert model_ids(odd) == []


class Models(http.server.BaseHTTPRequestHandler):
    """/v1/models with one model for the right key; 401 otherwise; not JSON on /bad."""

    def do_GET(self) -> None:
        if self.path == "/bad/v1/models":
            body, status = b"<html>", 200
        elif self.headers.get("Authorization") != "Bearer k":
            body, status = b'{"error": "no key"}', 401
        else:
            body, status = orjson.dumps({"data": [{"id": "m1"}, {"id": "m2"}]}), 200
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def base() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Models)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_real_listing_over_loopback(base):
    assert list_models(base, "k") == ["m1", "m2"]
    assert list_models(base + "/", "k") == ["m1", "m2"]  # a trailing slash is the same base
    assert model_ids(get_models(base, "k")) == ["m1", "m2"]


def test_what_a_readiness_poll_and_the_preflight_each_see_of_a_failure(base):
    assert list_models(base, "wrong") == []  # a poll: not ready
    with pytest.raises(HTTPError) as caught:  # the preflight words the status itself
        get_models(base, "wrong")
    assert caught.value.code == 401
    assert list_models(base + "/bad", "k") == []  # not JSON: not ready
    with pytest.raises(orjson.JSONDecodeError):
        get_models(base + "/bad", "k")
    assert list_models("http://127.0.0.1:9", timeout=1) == []  # nothing listens: not ready
