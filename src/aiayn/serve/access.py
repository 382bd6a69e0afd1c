"""Who may run a model, and how often: the one dependency every such route passes through.

``Guarded`` (FastAPI's ``Security`` over ``guard``) is declared by every route that runs a
model (LibreTranslate's, OpenAI's and aiayn's) and by LibreTranslate's other guarded routes
(``/detect``, ``/suggest``); a new route that runs one declares it too (``TranslateLane``,
which answers a JSON ``/translate`` before FastAPI's routing, calls it as ``guard_request``). It

1. reads the caller's API key: ``Authorization: Bearer KEY`` (OpenAI's clients) or the body's
   ``api_key`` (LibreTranslate's, JSON or form); on DeepL's routes ``Authorization:
   DeepL-Auth-Key KEY`` or the older ``auth_key`` field (body or query string), and a URL
   over ``MAX_URL`` bytes is refused 414 (its fields go in the body);
2. with ``--api-keys``, refuses a wrong key (403) and a missing one (400; 403 on DeepL's
   routes, as DeepL answers), except from an ``Origin`` matching ``--require-api-key-origin``
   (unless ``--under-attack``);
3. counts the request (as many requests as it has texts, as LibreTranslate counts a batch)
   against the per-minute, per-hour and per-day limits of its key (a key's own requests per
   minute replace the server's) or its client address, with the ``limits`` library (memory,
   or Redis shared by several servers with ``--shared-storage``): 429 with ``Retry-After``
   past a limit;
4. gives the route a ``Caller``: its key and the limits its texts are checked against.

Whatever a route does, the model queues (``Registry.submit``) take work only from a request
that passed here (``admitted``): a route that forgot the dependency fails loudly instead of
running a model for anyone.
"""

from __future__ import annotations

import contextvars
import dataclasses
import hmac
import json
import logging
import math
import re
import time
from dataclasses import dataclass
from typing import Annotated

from fastapi import Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from aiayn.serve.config import ServeConfig
from aiayn.serve.errors import (
    LIBRETRANSLATE_PATHS,
    PARSED_JSON,
    ServeError,
    is_deepl,
    is_form,
    query_fields,
)
from aiayn.serve.keys import DEFAULT_DB, ApiKey, KeyStore, KeyStoreUnavailable

KEYS_WAIT = 2.0  # seconds a key lookup waits for another process's lock on the database
KEYS_RETRY_AFTER = 5  # the Retry-After of a 503 when keys or counts cannot be read

log = logging.getLogger("aiayn.serve")

# set by ``guard`` for the request it admitted; the model queues check it
admitted: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("admitted", default=None)


@dataclass(frozen=True)
class AccessConfig:
    """Access control and request limits; each field a flag of ``aiayn serve`` (the LibreTranslate
    name of a flag, where it has one, is an alias). A limit of 0 is no limit."""

    api_keys: bool = False  # require a key from the database (--api-keys)
    api_keys_db: str = DEFAULT_DB
    require_api_key_origin: str = ""  # a regex: requests from a matching Origin need no key
    under_attack: bool = False  # with --api-keys: every request needs a key, whatever its Origin
    get_api_key_link: str = ""  # named in the answer to a request without a key
    req_limit: int = 0  # requests per minute per key or client address
    hourly_req_limit: int = 0
    daily_req_limit: int = 0
    shared_storage: str = "memory://"  # where the limits count: memory://, redis://HOST:PORT
    trust_forwarded_for: bool = False  # the client address is X-Forwarded-For's last
    metrics: bool = False  # serve /metrics
    metrics_auth_token: str = ""  # /metrics needs Authorization: Bearer TOKEN

    def __post_init__(self) -> None:
        for name in ("req_limit", "hourly_req_limit", "daily_req_limit"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name}: {value!r} is not a whole number")
            if value < 0:  # LibreTranslate's -1: no limit
                object.__setattr__(self, name, 0)
        if self.require_api_key_origin:
            try:
                re.compile(self.require_api_key_origin)
            except re.error as e:
                raise ValueError(
                    f"require_api_key_origin: {self.require_api_key_origin!r} is not a regular "
                    f"expression ({e})"
                ) from None
        scheme = self.shared_storage.split("://", 1)[0]
        if "://" not in self.shared_storage or scheme not in ("memory", "redis", "rediss"):
            raise ValueError(
                f"shared_storage: {self.shared_storage!r}; give memory:// or redis://HOST:PORT"
            )
        if (self.under_attack or self.require_api_key_origin) and not self.api_keys:
            flag = "--under-attack" if self.under_attack else "--require-api-key-origin"
            raise ValueError(f"{flag} applies to API keys: add --api-keys")

    @property
    def limited(self) -> bool:
        return bool(self.req_limit or self.hourly_req_limit or self.daily_req_limit)


@dataclass(frozen=True)
class Caller:
    """The client a request came from: its key (if any), its address, and the limits its
    texts are checked against (``config``: the server's, a key's characters per text within)."""

    key: ApiKey | None
    address: str
    config: ServeConfig
    chars_by: str = "--max-chars"  # what set config.max_chars, for the error message


class Gate:
    """The server's keys and counters; ``admit`` decides on one request."""

    def __init__(self, access: AccessConfig, config: ServeConfig) -> None:
        self.access, self.config = access, config
        self.keys = (
            KeyStore(access.api_keys_db, create=False, timeout=KEYS_WAIT)
            if access.api_keys
            else None
        )
        self.limiter = None
        self.storage = None
        if access.limited or access.api_keys:
            from limits.storage import storage_from_string
            from limits.strategies import MovingWindowRateLimiter

            self.storage = storage_from_string(access.shared_storage, wrap_exceptions=True)
            self.limiter = MovingWindowRateLimiter(self.storage)
        self.remote = not access.shared_storage.startswith("memory://")
        self._origin = (
            re.compile(access.require_api_key_origin) if access.require_api_key_origin else None
        )

    def check_storage(self) -> None:
        """Fail at start-up, naming the address, if the shared storage does not answer."""
        if self.storage is not None and self.remote and not self.storage.check():
            raise ValueError(
                f"--shared-storage {self.access.shared_storage}: no answer (is redis-server "
                "running there?)"
            )

    def address(self, request: Request) -> str:
        if self.access.trust_forwarded_for:  # the address the proxy in front of us added:
            forwarded = ",".join(request.headers.getlist("x-forwarded-for"))  # the last one
            last = forwarded.rsplit(",", 1)[-1].strip()  # (earlier ones the client may write)
            if last:
                return last
        return request.client.host if request.client else "unknown"

    async def admit(self, request: Request, bearer: str | None) -> Caller:
        lt = request.scope["path"] in LIBRETRANSLATE_PATHS  # as the middleware read it
        deepl = is_deepl(request.scope["path"])
        if deepl:
            check_url(request)
        fields = await body_fields(request)
        name = "auth_key" if deepl else "api_key"  # the field a key may come in
        value = fields.get(name)
        if deepl and value is None:  # DeepL's older clients send it in the query string too
            value = request.query_params.get(name)
        given = bearer or (deepl_key(request) if deepl else None) or _text(value)
        key = None
        if self.keys is not None:
            wrong = "Invalid API key" if lt else f"{name}: invalid API key"
            if deepl:
                wrong = "Invalid API key: not one of this server's (aiayn keys list)"
            if given is None and value not in (None, ""):  # 12345, true
                # no key is one: a wrong key, as LibreTranslate answers it
                raise ServeError(403, wrong, name)
            if given:
                key = await run_in_threadpool(self._lookup, given)
                if key is None:
                    raise ServeError(403, wrong, name)
            elif self._needs_key(request):
                raise ServeError(403 if deepl else 400, self._missing_key(lt, deepl), name)
        address = self.address(request)
        if self.limiter is not None:
            identity = f"key:{key.digest}" if key is not None else f"ip:{address}"
            await self._count(identity, key, lt, cost=texts_in(fields))
        config, chars_by = self.config, "--max-chars"
        if key is not None and key.char_limit is not None and key.char_limit < config.max_chars:
            config = dataclasses.replace(config, max_chars=key.char_limit)
            chars_by = "this API key's limit"
        return Caller(key, address, config, chars_by)

    def _lookup(self, given: str) -> ApiKey | None:
        """``given``'s record; 503 when the key database cannot be read (no request that
        needs a key is served then), logged without the key."""
        try:
            return self.keys.lookup(given)
        except KeyStoreUnavailable as e:
            log.error("API keys cannot be checked: %s", e)
            raise ServeError(
                503,
                "API keys cannot be checked now; try again later",
                "api_key",
                headers={"Retry-After": str(KEYS_RETRY_AFTER)},
            ) from None

    def _needs_key(self, request: Request) -> bool:
        if self.access.under_attack or self._origin is None:
            return True
        return self._origin.fullmatch(request.headers.get("origin", "")) is None

    def _missing_key(self, lt: bool, deepl: bool = False) -> str:
        link = self.access.get_api_key_link
        message = (
            f"Visit {link} to get an API key"
            if link
            else "Please contact the server operator to get an API key"
        )
        if lt:
            return message
        if deepl:
            return "This server requires an API key (Authorization: DeepL-Auth-Key KEY). " + message
        return f"api_key: this server requires an API key (Authorization: Bearer KEY). {message}"

    def limits_of(self, key: ApiKey | None) -> list:
        """The limits a request counts against: a key's own per minute replaces the server's
        (and its hourly and daily limits, which a per-minute limit implies)."""
        from limits import RateLimitItemPerDay, RateLimitItemPerHour, RateLimitItemPerMinute

        if key is not None and key.req_limit is not None:
            return [RateLimitItemPerMinute(key.req_limit)]
        a = self.access
        return [
            item(n)
            for item, n in (
                (RateLimitItemPerMinute, a.req_limit),
                (RateLimitItemPerHour, a.hourly_req_limit),
                (RateLimitItemPerDay, a.daily_req_limit),
            )
            if n > 0
        ]

    async def _count(self, identity: str, key: ApiKey | None, lt: bool, cost: int) -> None:
        items = self.limits_of(key)
        if not items:
            return
        for item in items:  # a batch no window could ever take: 400, not a 429 forever
            if cost > item.amount:
                message = f"{cost} texts in one request; the limit is {item}"
                raise ServeError(400, f"Invalid request: {message}" if lt else message, "q")
        from limits.errors import StorageError

        try:
            if self.remote:
                refused = await run_in_threadpool(self._hit, items, identity, cost)
            else:
                refused = self._hit(items, identity, cost)
        except StorageError as e:  # Redis gone: nothing counted, nothing served
            log.error("request limits cannot be counted (--shared-storage): %s", e)
            raise ServeError(
                503,
                "request limits cannot be counted now; try again later",
                None,
                headers={"Retry-After": str(KEYS_RETRY_AFTER)},
            ) from None
        if refused is None:
            return
        item, reset = refused
        retry = max(1, math.ceil(reset - time.time()))
        message = f"Slowdown: {item}" if lt else f"rate limit: {item} (retry after {retry} s)"
        raise ServeError(429, message, None, headers={"Retry-After": str(retry)})

    def _hit(self, items: list, identity: str, cost: int):
        """Count a request (``cost``: its texts) against every limit, or against none if one
        has not that many left: the first such limit and when its window frees a request."""
        for item in items:
            if not self.limiter.test(item, identity, cost=cost):
                return item, self.limiter.get_window_stats(item, identity).reset_time
        for item in items:
            if not self.limiter.hit(item, identity, cost=cost):  # taken meanwhile
                return item, self.limiter.get_window_stats(item, identity).reset_time
        return None

    def close(self) -> None:
        if self.keys is not None:
            self.keys.close()


# a route's limits on its form (Starlette's defaults elsewhere: 1000 files, 1000 fields)
FORM_LIMITS = {
    "/translate_file": {"max_files": 1, "max_fields": 16},
    "/v2/document": {"max_files": 1, "max_fields": 32},  # DeepL's upload
}


async def body_fields(request: Request) -> dict:
    """The fields of a request's body (JSON or, on LibreTranslate's routes, a form); {} for
    a body that is not an object, which the route then refuses."""
    if request.method not in ("POST", "PUT", "PATCH"):
        return {}
    pairs = None
    if is_form(request.scope):
        await request.body()  # kept by the request: the route reads it again
        # parsed once (the request keeps it for the route): with the route's own limits
        form = await request.form(**FORM_LIMITS.get(request.scope["path"], {}))
        pairs = [(k, v) for k, v in form.multi_items() if isinstance(v, str)]
    elif request.scope["path"] in LIBRETRANSLATE_PATHS and PARSED_JSON not in request.scope:
        pairs = []  # no body: the query string's fields alone
    if pairs is not None:  # and the query string's, as LibreTranslate reads them
        given = {k for k, _ in pairs}
        pairs += [(k, v) for k, v in query_fields(request.scope) if k not in given]
        fields: dict = {}
        for name, value in pairs:
            fields.setdefault(name, []).append(value)
        return {k: v if len(v) > 1 else v[0] for k, v in fields.items()}
    if PARSED_JSON in request.scope:  # JsonBody's, on LibreTranslate's routes
        data = request.scope[PARSED_JSON]
    else:
        body = await request.body()  # kept by the request: the route reads it again
        try:
            data = json.loads(body) if body.strip() else None
        except ValueError:  # JsonBody answers it
            return {}
    return data if isinstance(data, dict) else {}


MAX_URL = 8192  # bytes of a DeepL route's path and query string (414 above)


def check_url(request: Request) -> None:
    """A DeepL route's URL within ``MAX_URL`` bytes: 414 above, as DeepL refuses one."""
    scope = request.scope
    if len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"") > MAX_URL:
        raise ServeError(
            414, f"URI too long: over {MAX_URL} bytes; send the fields in the body (POST)"
        )


def deepl_key(request: Request) -> str | None:
    """The key of ``Authorization: DeepL-Auth-Key KEY`` (DeepL's clients), or None."""
    scheme, _, value = request.headers.get("authorization", "").strip().partition(" ")
    return (value.strip() or None) if scheme.lower() == "deepl-auth-key" else None


def _text(value) -> str | None:
    return value if isinstance(value, str) and value else None


def texts_in(fields: dict) -> int:
    """What a request costs against the request limits: its texts (a batch of 10 counts as
    10 requests, as LibreTranslate counts them), at least 1."""
    for name in ("q", "text", "input"):
        if isinstance(fields.get(name), list):
            return max(1, len(fields[name]))
    return 1


_bearer = HTTPBearer(auto_error=False, description="an API key (aiayn keys add)")


async def guard(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)] = None,
) -> Caller:
    """The access check and request count of every route that runs a model (see the module)."""
    gate: Gate = request.app.state.gate
    caller = await gate.admit(request, credentials.credentials if credentials else None)
    admitted.set(caller)
    return caller


Guarded = Annotated[Caller, Security(guard)]


async def guard_request(request: Request) -> Caller:
    """``guard`` for a request answered without FastAPI's dependencies (LibreTranslate's
    ``TranslateLane``): the bearer token read as ``Security`` reads it for the routes."""
    return await guard(request, await _bearer(request))


def require_admitted(where: str) -> None:
    """Called by the model queues: work only for a request ``guard`` admitted."""
    if admitted.get() is None:
        raise ServeError(500, f"internal error: {where} runs a model without the access check")


def check_metrics_token(request: Request, token: str) -> None:
    """``/metrics`` behind ``--metrics-auth-token``: 401 without the right bearer token."""
    if not token:
        return
    given = request.headers.get("authorization", "")
    if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
        raise ServeError(401, "Unauthorized", headers={"WWW-Authenticate": "Bearer"})
