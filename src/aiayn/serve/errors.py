"""Errors as the clients of each API expect them (``handled``: the one mapping from an
exception to its answer); the body size limit, what a body is (``is_form``: a form or JSON,
one decision for the middleware, the access check and the routes) and request metrics.

LibreTranslate's routes answer ``{"error": "message"}``, DeepL's (``/v2/...``, ``/v3/...``)
``{"message": "..."}``; every other route answers OpenAI's
``{"error": {"message", "type", "param", "code"}}``. Each message names the field at fault.
A ``UserError`` raised by the library is the client's input at fault (422); any other exception
is answered 500 by ``InternalErrors`` without closing the client's keep-alive connection.
"""

from __future__ import annotations

import asyncio
import logging
import time

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from aiayn.errors import UserError
from aiayn.serve.redact import query_items, without_paths

log = logging.getLogger("aiayn.serve")

# LibreTranslate's routes: its error body, and 400 where aiayn's other routes answer 422
LIBRETRANSLATE_PATHS = (
    "/translate", "/detect", "/languages", "/suggest", "/frontend/settings", "/translate_file",
)  # fmt: skip
# DeepL's routes (its API's versions): its error body, and 400 where aiayn's routes answer 422
DEEPL_PREFIXES = ("/v2/", "/v3/")


def is_deepl(path: str) -> bool:
    return path.startswith(DEEPL_PREFIXES)


class ServeError(Exception):
    """An HTTP error with a message for the client; ``param`` names the field at fault."""

    def __init__(
        self, status: int, message: str, param: str | None = None, headers: dict | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.headers = status, message, param, headers


def error_body(path: str, status: int, message: str, param: str | None = None) -> dict:
    message = _encodable(message)
    param = _encodable(param) if param is not None else None
    if path in LIBRETRANSLATE_PATHS or path.startswith("/download_file/"):
        return {"error": message}
    if is_deepl(path):
        return {"message": message}
    kind = "invalid_request_error" if status < 500 else "server_error"
    if status == 503:
        kind = "overloaded_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}


def error_response(
    path: str, status: int, message: str, param: str | None = None, headers: dict | None = None
) -> JSONResponse:
    if status == 422 and (path in LIBRETRANSLATE_PATHS or is_deepl(path)):
        status = 400  # LibreTranslate and DeepL answer every invalid request 400
    return JSONResponse(error_body(path, status, message, param), status, headers=headers)


def _encodable(text: str) -> str:
    """``text`` with any lone surrogate written as ``\\udxxx`` (a JSON answer is UTF-8)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def field_name(loc: tuple) -> str:
    """("body", "q", 2) -> "q[2]"."""
    name = ""
    for part in loc:
        if part in ("body", "query", "form") and not name:
            continue
        if isinstance(part, int):
            name += f"[{part}]"
        else:
            name += f".{part}" if name else str(part)
    return name or "body"


def validation_message(errors: list[dict]) -> tuple[int, str, str | None]:
    """(status, message, first field) of pydantic errors: 400 for a body that is not JSON."""
    if any(e.get("type") == "json_invalid" for e in errors):
        ctx = next(e for e in errors if e.get("type") == "json_invalid").get("ctx", {})
        return 400, f"body: not valid JSON ({ctx.get('error', 'parse error')})", "body"
    parts = []
    for e in errors:
        name = field_name(tuple(e.get("loc", ())))
        msg = e.get("msg", "invalid").removeprefix("Value error, ")
        if e.get("type") == "extra_forbidden":
            msg = "not a field of this route (it would be ignored; /docs lists the fields)"
        parts.append(f"{name}: {msg}")
    return 422, "; ".join(parts), field_name(tuple(errors[0].get("loc", ()))) if errors else None


def handled(path: str, method: str, exc: Exception) -> JSONResponse | None:
    """The answer to ``exc`` raised on ``method path``: to a ``ServeError``, a bad request, a
    ``UserError`` (422) and an HTTP error; None for any other exception (``InternalErrors``
    answers it 500)."""
    if isinstance(exc, ServeError):
        return error_response(path, exc.status, exc.message, exc.param, exc.headers)
    if isinstance(exc, RequestValidationError):
        status, message, param = validation_message(list(exc.errors()))
        return error_response(path, status, message, param)
    if isinstance(exc, UserError):  # the library's words, which may name a file of the host
        return error_response(path, 422, without_paths(str(exc)))
    if isinstance(exc, HTTPException):
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no route {method} {path} (see /docs)"
        return error_response(path, exc.status_code, detail, None, exc.headers)
    return None


def install_error_handlers(app: FastAPI) -> None:
    """``handled``'s answers to ``ServeError``, bad requests, ``UserError`` and unknown routes,
    and the ``InternalErrors`` middleware (added first, so the innermost) for everything else."""
    app.add_middleware(InternalErrors)

    async def answer(request: Request, exc: Exception):
        if isinstance(exc, HTTPException) and exc.status_code == 405:
            exc = HTTPException(405, exc.detail, {"Allow": allowed(request)})
        return handled(request.url.path, request.method, exc)

    for kind in (ServeError, RequestValidationError, UserError, HTTPException):
        app.add_exception_handler(kind, answer)


def allowed(request: Request) -> str:
    """The methods of every route at ``request``'s path (Starlette's 405 names the first
    route's alone, where a path has one route a method)."""
    from starlette.routing import Match

    methods: set[str] = set()
    routes = list(request.app.router.routes)
    while routes:
        route = routes.pop()
        included = getattr(route, "original_router", None)  # FastAPI's included router
        if included is not None:
            routes.extend(included.routes)
        elif getattr(route, "methods", None) and route.matches(request.scope)[0] != Match.NONE:
            methods |= route.methods
    return ", ".join(sorted(methods))


class InternalErrors:
    """ASGI middleware: an exception no handler took is logged with its traceback and answered
    500 naming its type. An exception that escapes the application makes uvicorn close the
    connection, and the client's next request on it fails; a response already begun (a
    stream) cannot be answered again, so there the exception goes on and the connection
    closes, which tells the client the answer is cut short."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def watch(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as e:
            if started:
                raise
            log.exception("internal error on %s %s", scope["method"], scope["path"])
            message = without_paths(f"internal error: {type(e).__name__}: {e}".strip())
            response = error_response(scope["path"], 500, message)
            await response(scope, receive, send)


class BodyLimit:
    """ASGI middleware: a request body over ``max_bytes`` gets 413 before any route reads it,
    one not received whole within ``timeout`` seconds 408 (a client sending a byte now and
    then would otherwise hold its connection, and the memory of its body, for good).

    The body is read here (up to the limit) and replayed to the application.
    """

    def __init__(self, app, max_bytes: int, timeout: float = 60.0) -> None:
        self.app, self.max_bytes, self.timeout = app, max_bytes, timeout

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        too_big = declared is not None and declared.isdigit() and int(declared) > self.max_bytes
        chunks, size, more = [], 0, not too_big
        deadline = asyncio.get_running_loop().time() + self.timeout
        while more:
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                response = error_response(
                    scope["path"],
                    408,
                    f"request body not received within {self.timeout:g} s (--timeout)",
                    "body",
                    {"Connection": "close"},
                )
                return await response(scope, receive, send)
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            too_big = size > self.max_bytes
            if too_big:
                break
        if too_big:
            response = error_response(
                scope["path"],
                413,
                f"request body over {self.max_bytes} bytes (--max-body-bytes)",
                "body",
            )
            return await response(scope, receive, send)
        return await self.app(scope, replaying(b"".join(chunks), receive), send)


# the scope key under which JsonBody leaves the JSON value of a body sent to LibreTranslate's
# routes, parsed once, for the access check and the route (absent: no body, or a form)
PARSED_JSON = "aiayn.json"
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def media_type(scope) -> str:
    """A request's media type, lowercased, from its first Content-Type header (the one
    Starlette reads)."""
    for name, value in scope.get("headers") or ():
        if name == b"content-type":
            return value.decode("latin-1").split(";")[0].strip().lower()
    return ""


def is_form(scope) -> bool:
    """Whether a request's body is read as a form: LibreTranslate's and DeepL's routes take
    forms as their clients send them; every other body is JSON. The one decision JsonBody, the
    access check and the routes all follow."""
    path = scope["path"]
    return (path in LIBRETRANSLATE_PATHS or is_deepl(path)) and media_type(scope) in FORM_TYPES


def query_fields(scope) -> list[tuple[str, str]]:
    """The fields of a request's query string on LibreTranslate's routes, which it reads as a
    form's (Flask's ``request.values``) unless the body is JSON: a form's fields, or those of a
    request without a body, may come there (``POST /translate?q=Hallo&source=de&target=en``).
    A field the form also has is the form's. Read by ``query_items`` (what the access log
    redacts keys by); a field that is not UTF-8 once percent-decoded is a 400 naming it."""
    if scope["path"] not in LIBRETRANSLATE_PATHS or PARSED_JSON in scope:
        return []
    query = scope.get("query_string", b"").decode("latin-1")
    try:
        return [(name, value) for _, name, value in query_items(query)]
    except UnicodeDecodeError:
        pass
    for sent, name, _ in query_items(query, errors="replace"):  # the first one at fault
        try:
            query_items(sent)
        except UnicodeDecodeError:
            what = "a field name is" if "\ufffd" in name else f"{name} is"
            raise ServeError(
                400,
                f"Invalid request: {what} not valid UTF-8 (in the query string); "
                "percent-encode its text's UTF-8 bytes",
                name,
            ) from None
    return []


def replaying(body: bytes, receive):
    """An ASGI ``receive`` that gives ``body`` (already read by a middleware) as one message,
    then hands over to ``receive`` (a disconnect, say)."""
    replayed = False

    async def replay():
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class RequestMetrics:
    """ASGI middleware counting requests and timing them, by route and status."""

    def __init__(self, app, metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start, status = time.perf_counter(), [500]

        async def record(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, record)
        finally:
            route = scope.get("route")
            name = getattr(route, "path", None) or "unmatched"
            self.metrics.requests.labels(name, str(status[0])).inc()
            self.metrics.latency.labels(name).observe(time.perf_counter() - start)
