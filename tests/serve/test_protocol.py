"""What a hostile client can hold of the server: a request head bounded in bytes (431) and in
time (408, the connection closed), a body within the request timeout (408), while other
clients are served; uvicorn on 127.0.0.1 with the settings ``aiayn serve`` gives it."""

import socket
import time
from contextlib import contextmanager

import pytest

from tests.serve.conftest import live_server

pytest.importorskip("uvicorn")


async def _echo(scope, receive, send):
    """An ASGI app that reads the whole body and answers its length (``/client``: the
    client's address as the app sees it)."""
    if scope["type"] != "http":
        return
    if scope["path"] == "/client":
        body = scope["client"][0].encode()
        headers = [(b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        return await send({"type": "http.response.body", "body": body})
    size, more = 0, True
    while more:
        message = await receive()
        size += len(message.get("body", b""))
        more = message.get("more_body", False)
    body = str(size).encode()
    headers = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@contextmanager
def _served(monkeypatch, http: str):
    from aiayn.serve import protocol
    from aiayn.serve.config import ServeConfig
    from aiayn.serve.errors import BodyLimit
    from aiayn.serve.server import server_config

    monkeypatch.setattr(protocol, "HEAD_TIMEOUT", 0.5)
    if http == "h11":  # the protocol where httptools is not installed
        monkeypatch.setattr(protocol, "protocol_class", protocol._bounded_h11)
        monkeypatch.setattr("aiayn.serve.server.protocol_class", protocol._bounded_h11)
    app = BodyLimit(_echo, max_bytes=1_000_000, timeout=0.5)
    settings = server_config(app, ServeConfig(), "127.0.0.1", 0, log_level="critical")
    with live_server(app, settings) as port:
        yield port


def _answer(sock: socket.socket, seconds: float = 5.0) -> bytes:
    """What the server sends until it closes the connection (or ``seconds`` pass)."""
    sock.settimeout(seconds)
    out = b""
    try:
        while chunk := sock.recv(65536):
            out += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return out


def _ok(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nHallo"
        )
        return _answer(s)


@pytest.mark.parametrize("http", ["httptools", "h11"])
def test_heads_are_bounded_in_bytes_and_time_and_others_are_served(monkeypatch, http):
    if http == "httptools":
        pytest.importorskip("httptools")
    with _served(monkeypatch, http) as port:
        idle = socket.create_connection(("127.0.0.1", port))  # sends nothing
        trickle = socket.create_connection(("127.0.0.1", port))  # a head a byte at a time
        trickle.sendall(b"GET / HTTP/1.1\r\n")
        slow_body = socket.create_connection(("127.0.0.1", port))
        slow_body.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        assert _ok(port).endswith(b"\r\n\r\n5")  # served meanwhile
        for _ in range(2):  # within the deadline, which data does not put off
            time.sleep(0.1)
            trickle.sendall(b"X")
        # closed with a 408 within the deadline, though it kept sending
        for sock in (idle, trickle):
            answer = _answer(sock, 3.0)
            assert answer.startswith(b"HTTP/1.1 408 "), answer
            assert b"request head not received within 0.5 s" in answer
            sock.close()
        answer = _answer(slow_body, 3.0)
        assert answer.startswith(b"HTTP/1.1 408 ") and b"request body not received" in answer
        slow_body.close()
        with socket.create_connection(("127.0.0.1", port)) as big:  # one head, 1 MB long
            try:
                big.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 1_000_000)
            except (BrokenPipeError, ConnectionResetError):
                pass  # refused while still sending
            answer = _answer(big, 3.0)
        assert answer == b"" or answer.startswith((b"HTTP/1.1 431 ", b"HTTP/1.1 400 ")), answer
        if http == "httptools":  # h11 takes a head whole that came in one read (<= 256 KB)
            with socket.create_connection(("127.0.0.1", port)) as big:  # 70 KB in one piece
                big.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n")
                answer = _answer(big, 3.0)
            assert answer.startswith(b"HTTP/1.1 431 "), answer
        with socket.create_connection(("127.0.0.1", port)) as s:  # a keep-alive client's
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")  # second request, after a pause
            time.sleep(0.3)
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert _answer(s).count(b"HTTP/1.1 200 OK") == 2
        assert _ok(port).endswith(b"\r\n\r\n5")


def test_a_client_on_this_host_cannot_name_its_address(monkeypatch):
    """X-Forwarded-For is read by ``--trust-forwarded-for`` alone (uvicorn's own default
    believes it from 127.0.0.1, where a proxy passing a client's header on connects from)."""
    with _served(monkeypatch, "h11") as port:
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(
                b"GET /client HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.7\r\n"
                b"Connection: close\r\n\r\n"
            )
            answer = _answer(s)
    assert answer.endswith(b"\r\n\r\n127.0.0.1"), answer
