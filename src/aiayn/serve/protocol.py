"""uvicorn's HTTP protocols with the bounds a server open to many clients needs and uvicorn
lacks: a request's head (request line and headers) at most ``MAX_HEAD_BYTES`` (431 above),
and received whole within ``HEAD_TIMEOUT`` seconds of the connection opening or of the
previous answer (408 then, and the connection closed).

Without them one client could hold the server: httptools keeps a header however long it
grows (all of it held in the server's memory), and uvicorn closes an idle
connection only after it has answered a request on it, so a connection that sends nothing, or
its headers a byte at a time, stayed open for good; a few thousand of them take every file
descriptor the process may open, and then no client is served. A slow body is bounded by
``errors.BodyLimit`` (``--timeout``).
"""

from __future__ import annotations

import asyncio

MAX_HEAD_BYTES = 64 * 1024  # nginx answers 400 past 4 buffers of 8 KB
HEAD_TIMEOUT = 10.0  # seconds; nginx's client_header_timeout is 60, LibreTranslate's waitress 120


class _Refused(Exception):
    """Raised from a parser callback to stop parsing a request already answered."""


_REASONS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}


class _HeadBounds:
    """What both protocols share: a deadline for the head, and the refusal."""

    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    _head_timer: asyncio.TimerHandle | None = None

    def _await_head(self) -> None:
        """A new request's head is due: count its bytes and start its deadline."""
        self._head_bytes = 0
        self._head_pending = True
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(HEAD_TIMEOUT, self._head_too_slow)

    def _head_received(self) -> None:
        self._head_pending = False
        self._cancel_head_timer()

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _count_head(self, data: bytes) -> None:
        """After ``data`` was parsed: refuse the request if its head is still incomplete and
        already over the limit."""
        if not self._head_pending or self.transport.is_closing():
            return
        self._head_bytes += len(data)
        if self._head_bytes > MAX_HEAD_BYTES:
            self._refuse(431, f"request head over {MAX_HEAD_BYTES} bytes")

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self._head_pending and not self.transport.is_closing():
            self._refuse(408, f"request head not received within {HEAD_TIMEOUT:g} s")

    def _refuse(self, status: int, message: str) -> None:
        body = message.encode("ascii")
        head = b"HTTP/1.1 %d %s\r\n" % (status, _REASONS[status])
        head += b"content-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
        head += b"content-length: %d\r\n\r\n" % len(body)
        self.transport.write(head + body)
        self.transport.close()
        self._head_received()


def protocol_class():
    """The bounded protocol over the parser uvicorn would choose: httptools where it imports
    (the serve extra), else h11."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return _bounded_h11()

    class BoundedHttpTools(_HeadBounds, HttpToolsProtocol):
        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._await_head()

        def data_received(self, data: bytes) -> None:
            try:
                super().data_received(data)
            except _Refused:
                return
            self._count_head(data)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._head_pending, self._head_bytes = True, 0  # counted, even while the
            # previous request runs (its deadline starts once that one is answered)

        def on_headers_complete(self) -> None:
            size = len(self.url) + sum(len(k) + len(v) for k, v in self.headers)
            if size > MAX_HEAD_BYTES:  # a head that came in one read, counted whole
                self._refuse(431, f"request head over {MAX_HEAD_BYTES} bytes")
                raise _Refused
            self._head_received()
            super().on_headers_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            # the next head is due, unless a pipelined request (head received) runs now
            if not self.transport.is_closing() and self.cycle.response_complete:
                self._await_head()

        def connection_lost(self, exc) -> None:
            self._cancel_head_timer()
            super().connection_lost(exc)

    return BoundedHttpTools


def _bounded_h11():
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class BoundedH11(_HeadBounds, H11Protocol):
        """h11 bounds the head's size itself (``h11_max_incomplete_event_size``)."""

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._await_head()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:
                self._head_received()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self._await_head()

        def connection_lost(self, exc) -> None:
            self._cancel_head_timer()
            super().connection_lost(exc)

    return BoundedH11
