"""Bodies a JSON parser takes but no route can use, and errors that must not cost the client
its connection: each answered 4xx naming the problem, on every route."""

import http.client
import json

import pytest

from aiayn.errors import UserError
from tests.serve.conftest import live_server, make_client, wait_ready

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

JSON = {"content-type": "application/json"}
LONE = "Das \\ud800 gut."  # as the JSON text spells it: a UTF-16 half without its pair


@pytest.mark.parametrize(
    "route, body, field",
    [
        ("/v1/translate", f'{{"text": "{LONE}"}}', "text"),
        ("/v1/translate", f'{{"text": ["gut", "{LONE}"]}}', "text[1]"),
        ("/v1/translate", f'{{"text": "gut", "model": "{LONE}"}}', "model"),
        ("/translate", f'{{"q": "{LONE}", "source": "de", "target": "en"}}', "q"),
        ("/detect", f'{{"q": "{LONE}"}}', "q"),
        ("/v1/attention", f'{{"text": "{LONE}"}}', "text"),
        ("/v1/classify", f'{{"input": "{LONE}"}}', "input"),
        ("/v1/embeddings", f'{{"input": ["{LONE}"]}}', "input[0]"),
        ("/v1/completions", f'{{"prompt": "{LONE}"}}', "prompt"),
        ("/v1/completions", f'{{"prompt": "the", "stream": true, "{LONE}": 1}}', LONE),
    ],
)
def test_a_lone_surrogate_is_422_naming_the_field(client, route, body, field):
    r = client.post(route, content=body.encode(), headers=JSON)
    assert r.status_code == (400 if route in ("/translate", "/detect") else 422), r.text
    error = r.json()["error"]
    message = error if route in ("/translate", "/detect") else error["message"]
    assert message.startswith(field) and "lone surrogate" in message, message
    if route not in ("/translate", "/detect"):
        assert error["param"] == field


def test_a_user_error_from_the_library_is_422_with_its_message(client, monkeypatch):
    served = client.app.state.registry.models["de-en"]

    def refuse(texts):
        raise UserError("text 1 is empty; give a text")

    monkeypatch.setattr(served, "token_counts", refuse)
    r = client.post("/v1/translate", json={"text": "gut"})
    assert r.status_code == 422 and r.json()["error"]["message"] == "text 1 is empty; give a text"
    r = client.post("/translate", json={"q": "gut", "source": "de", "target": "en"})
    assert r.status_code == 400 and r.json()["error"] == "text 1 is empty; give a text"


@pytest.mark.parametrize("route", ["/v1/translate", "/translate", "/v1/embeddings"])
def test_invalid_utf8_names_the_byte_and_its_position(client, route):
    body = b'{"text": "ok", "q": "gut", "input": "gut", "target": "en", "x": "\xc3\x28"}'
    r = client.post(route, content=body, headers=JSON)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    message = error if route == "/translate" else error["message"]
    position = body.index(b"\xc3")
    assert "not UTF-8: byte 0xc3" in message and f"position {position}" in message, message


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None]
)
def test_a_json_body_with_another_content_type_is_415_naming_the_type(client, content_type):
    headers = {"content-type": content_type} if content_type else {}
    r = client.post("/v1/translate", content=b'{"text": "gut"}', headers=headers)
    assert r.status_code == 415, r.text
    message = r.json()["error"]["message"]
    assert "Content-Type: application/json" in message and (content_type or "(none)") in message


def test_libretranslate_reads_json_sent_as_text_plain(client):
    body = json.dumps({"q": "Hallo", "source": "de", "target": "en"}).encode()
    r = client.post("/translate", content=body, headers={"content-type": "text/plain"})
    assert r.status_code == 200 and "translatedText" in r.json(), r.text


@pytest.mark.parametrize("levels", [65, 100_000])
@pytest.mark.parametrize("route", ["/translate", "/v1/translate"])
def test_deeply_nested_json_is_400(client, route, levels):
    body = b'{"q": ' + b"[" * levels + b"]" * levels + b', "source": "de", "target": "en"}'
    r = client.post(route, content=body, headers=JSON)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    message = error if route == "/translate" else error["message"]
    assert "nested" in message and "64 levels" in message, message


@pytest.mark.parametrize("body", [b"null", b"3", b"true", b'"text"', b"[]"])
@pytest.mark.parametrize("route", ["/translate", "/v1/translate", "/v1/completions"])
def test_a_body_that_is_not_an_object_is_4xx(client, route, body):
    r = client.post(route, content=body, headers=JSON)
    assert 400 <= r.status_code < 500, r.text
    error = r.json()["error"]
    if route == "/translate":  # LibreTranslate's answer
        assert r.status_code == 400 and error == "Invalid JSON format"
        return
    message = error["message"]
    assert "body" in message or "object" in message or "dict" in message, message


@pytest.fixture
def translator_server(model_dirs):
    """The translator served by uvicorn on 127.0.0.1: (port, served model)."""
    from aiayn.serve.app import create_app
    from aiayn.serve.models import ModelSpec

    app = create_app([ModelSpec(model_dirs["translator"], "de-en")], background=False)
    with live_server(app) as port:
        yield port, app.state.registry.models["de-en"]


def _post(conn: http.client.HTTPConnection, route: str, body: bytes):
    conn.request("POST", route, body, JSON)
    response = conn.getresponse()
    return response.status, response.getheader("connection"), json.loads(response.read())


def test_the_connection_stays_open_after_a_4xx_and_an_internal_error(
    translator_server, monkeypatch
):
    port, served = translator_server
    counts = served.token_counts

    def fails_on_boom(texts):
        if "boom" in texts:
            raise RuntimeError("a bug in the server")
        return counts(texts)

    monkeypatch.setattr(served, "token_counts", fails_on_boom)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        good = json.dumps({"text": "Hallo"}).encode()
        status, _, first = _post(conn, "/v1/translate", good)
        assert status == 200
        sock = conn.sock
        failures = [
            ("/v1/translate", f'{{"text": "{LONE}"}}'.encode(), 422),
            ("/translate", b'{"q": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400),
            ("/v1/translate", b'{"text": "\xff"}', 400),
            ("/v1/translate", b'{"text": "boom"}', 500),
            ("/translate", b'{"q": "boom", "source": "de", "target": "en"}', 500),
        ]
        for route, bad, expected in failures:
            status, connection, error = _post(conn, route, bad)
            assert status == expected, error
            assert connection != "close"
            status, _, again = _post(conn, "/v1/translate", good)  # on the same connection
            assert status == 200 and again == first
            assert conn.sock is sock
        status, _, error = _post(conn, "/v1/translate", b'{"text": "boom"}')
        assert error["error"]["message"] == "internal error: RuntimeError: a bug in the server"
        assert error["error"]["type"] == "server_error"
    finally:
        conn.close()


def test_a_translation_runs_at_most_max_new_tokens_past_its_source(model_dirs):
    with make_client({"translator": model_dirs["translator"]}, max_new_tokens=8) as client:
        wait_ready(client)
        for route in ("/v1/translate", "/v1/attention"):
            r = client.post(route, json={"text": "gut", "max_len_offset": 9})
            assert r.status_code == 422, r.text
            error = r.json()["error"]
            assert error["param"] == "max_len_offset" and "--max-new-tokens" in error["message"]
            r = client.post(route, json={"text": "gut", "max_len_offset": 8})
            assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    "route, body, field",
    [
        ("/v1/translate", {"text": "gut", "beem": 4}, "beem"),  # a misspelt beam
        ("/v1/translate", {"text": "gut", "source": "en", "target": "de"}, "source"),
        ("/v1/attention", {"text": "gut", "layers": 2}, "layers"),
        ("/v1/classify", {"input": "gut", "labels": ["a"]}, "labels"),
    ],
)
def test_aiayns_routes_refuse_a_field_they_do_not_know(client, route, body, field):
    """Ignored, the misspelt beam gave greedy search and the languages another model's
    direction without a word; the API key is a field of every route."""
    r = client.post(route, json=body)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["param"] == field and "not a field of this route" in error["message"]
    known = {k: v for k, v in body.items() if k in ("text", "input")}
    assert client.post(route, json={**known, "api_key": "anything"}).status_code == 200
