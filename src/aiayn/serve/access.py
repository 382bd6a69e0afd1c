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
   (unless ``--under-attack``); with ``--require-api-key-origin`` and no key database,
   refuses every key (as LibreTranslate's empty one does) and every request without one from
   another ``Origin``; a client address that gave ``--key-failures-limit`` wrong keys in the
   last minute has every key it gives refused (429 with ``Retry-After``), a right one too: a
   key that passed there would tell a guesser it is right;
3. counts the request (as many requests as the texts a model decodes for it: ``texts_in``)
   against the per-minute, per-hour and per-day limits of its key (a key's own requests per
   minute replace the server's) or its client address, with the ``limits`` library (memory,
   or Redis shared by several servers with ``--shared-storage``): 429 with ``Retry-After``
   past a limit, 400 for a request of more texts than a limit allows at all;
4. gives the route a ``Caller``: its key and the limits its texts are checked against.

Whatever a route does, the model queues (``Registry.submit``) take work only from a request
that passed here (``admitted``): a route that forgot the dependency fails loudly instead of
running a model for anyone.
"""

from __future__ import annotations

import contextvars
import dataclasses
import hmac
import logging
import math
import os
import re
import time
from dataclasses import dataclass
from typing import Annotated

from fastapi import Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from aiayn.serve.config import ServeConfig
from aiayn.serve.errors import LIBRETRANSLATE_PATHS, ServeError, is_deepl
from aiayn.serve.keys import DEFAULT_DB, ApiKey, KeyStore, KeyStoreUnavailable
from aiayn.serve.redact import masked_url, without_secret
from aiayn.serve.request_fields import Cost, body_fields, check_url, deepl_key, texts_in

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
    # a regex: requests from a matching Origin need no key, others do (with or without
    # --api-keys; the database is then read where it exists)
    require_api_key_origin: str = ""
    under_attack: bool = False  # with --api-keys: every request needs a key, whatever its Origin
    get_api_key_link: str = ""  # named in the answer to a request without a key
    req_limit: int = 0  # requests per minute per key or client address
    hourly_req_limit: int = 0
    daily_req_limit: int = 0
    key_failures_limit: int = 10  # wrong API keys per minute per client address (429 above)
    shared_storage: str = "memory://"  # where the limits count: memory://, redis://HOST:PORT
    trust_forwarded_for: bool = False  # the client address is X-Forwarded-For's last
    metrics: bool = False  # serve /metrics (401 to every request, unless one of these two)
    metrics_auth_token: str = ""  # /metrics needs Authorization: Bearer TOKEN
    metrics_open: bool = False  # /metrics answers anyone

    def __post_init__(self) -> None:
        for name in ("req_limit", "hourly_req_limit", "daily_req_limit", "key_failures_limit"):
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
                f"shared_storage: {masked_url(self.shared_storage)!r}; give memory:// or "
                "redis://HOST:PORT"
            )
        for flag, given in (
            ("--metrics-auth-token", self.metrics_auth_token),
            ("--metrics-open", self.metrics_open),
        ):
            if given and not self.metrics:
                raise ValueError(f"{flag} applies to /metrics, which is off: add --metrics")
        if self.metrics_open and self.metrics_auth_token:
            raise ValueError(
                "--metrics-open and --metrics-auth-token: give one (/metrics open to anyone, "
                "or to the token's holder)"
            )
        if self.under_attack and not self.checks_keys:
            raise ValueError("--under-attack applies to API keys: add --api-keys")

    @property
    def limited(self) -> bool:
        return bool(self.req_limit or self.hourly_req_limit or self.daily_req_limit)

    @property
    def checks_keys(self) -> bool:
        """Whether a request may be asked for a key: ``--api-keys``, or an origin-only
        server (``--require-api-key-origin``)."""
        return self.api_keys or bool(self.require_api_key_origin)


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
        self.keys = None
        if os.path.exists(access.api_keys_db) or not access.require_api_key_origin:
            if access.checks_keys:  # --api-keys alone without the file: refused, named
                self.keys = KeyStore(access.api_keys_db, create=False, timeout=KEYS_WAIT)
        else:  # origin-only, no database (LibreTranslate's would be empty): no key is valid
            log.info(
                "no API key database (%s): requests without a key are served from an Origin "
                "matching --require-api-key-origin only",
                access.api_keys_db,
            )
        self.limiter = None
        self.storage = None
        self.key_failures = None  # wrong keys a minute per address, counted as requests are
        if access.limited or access.checks_keys:
            from limits import RateLimitItemPerMinute
            from limits.storage import storage_from_string
            from limits.strategies import MovingWindowRateLimiter

            try:
                self.storage = storage_from_string(access.shared_storage, wrap_exceptions=True)
            except ValueError as e:  # a port that is no number, say
                raise ValueError(
                    f"--shared-storage {self.shown_storage}: {self._hidden(e)}"
                ) from None
            self.limiter = MovingWindowRateLimiter(self.storage)
            if access.checks_keys and access.key_failures_limit:
                self.key_failures = RateLimitItemPerMinute(access.key_failures_limit)
        self.remote = not access.shared_storage.startswith("memory://")
        if access.metrics and not (access.metrics_auth_token or access.metrics_open):
            log.warning(
                "/metrics answers 401 to every request: give Prometheus a token with "
                "--metrics-auth-token TOKEN, or serve it to anyone with --metrics-open"
            )
        self._origin = (
            re.compile(access.require_api_key_origin) if access.require_api_key_origin else None
        )

    def check_storage(self) -> None:
        """Fail at start-up, naming the address, if the shared storage does not answer."""
        if self.storage is not None and self.remote and not self.storage.check():
            raise ValueError(
                f"--shared-storage {self.shown_storage}: no answer (is redis-server running there?)"
            )

    @property
    def shown_storage(self) -> str:
        """``--shared-storage`` as errors and the log show it: its password masked."""
        return masked_url(self.access.shared_storage)

    def _hidden(self, error: Exception) -> str:
        """An error of the shared storage, without its password."""
        return without_secret(str(error), self.access.shared_storage)

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
        key, address = None, self.address(request)
        if self.access.checks_keys:
            wrong = given is None and value not in (None, "")  # 12345, true
            if given or wrong:  # a key attempt: none while this address guesses too often
                await self._check_key_failures(address, lt)
            if given:
                key = await run_in_threadpool(self._lookup, given)
            if wrong or (given and key is None):  # (no key is one: a wrong key, as
                await self._key_failed(address)  # LibreTranslate answers it)
                message = "Invalid API key" if lt else f"{name}: invalid API key"
                if deepl:
                    message = "Invalid API key: not one of this server's (aiayn keys list)"
                raise ServeError(403, message, name)
            if not given and self._needs_key(request):
                raise ServeError(403 if deepl else 400, self._missing_key(lt, deepl), name)
        if self.limiter is not None:
            identity = f"key:{key.digest}" if key is not None else f"ip:{address}"
            await self._count(identity, key, lt, texts_in(fields))
        config, chars_by = self.config, "--max-chars"
        if key is not None and key.char_limit is not None and key.char_limit < config.max_chars:
            config = dataclasses.replace(config, max_chars=key.char_limit)
            chars_by = "this API key's limit"
        return Caller(key, address, config, chars_by)

    def _lookup(self, given: str) -> ApiKey | None:
        """``given``'s record; 503 when the key database cannot be read (no request that
        needs a key is served then), logged without the key."""
        if self.keys is None:  # origin-only, no database: no key is one
            return None
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

    async def _count(self, identity: str, key: ApiKey | None, lt: bool, cost: Cost) -> None:
        items = self.limits_of(key)
        if not items:
            return
        for item in items:  # a batch no window could ever take: 400, not a 429 forever
            if cost.texts > item.amount:
                message = f"{cost.texts} texts in one request{cost.how}; the limit is {item}"
                raise ServeError(400, f"Invalid request: {message}" if lt else message, cost.field)
        refused = await self._stored(self._hit, items, identity, cost.texts)
        if refused is None:
            return
        item, reset = refused
        retry = _seconds_to(reset)
        message = f"Slowdown: {item}" if lt else f"rate limit: {item} (retry after {retry} s)"
        raise ServeError(429, message, None, headers={"Retry-After": str(retry)})

    async def _stored(self, count, *args):
        """``count(*args)`` on the limits' storage (off the event loop where it is Redis);
        503 when the storage does not answer: nothing counted, nothing served."""
        from limits.errors import StorageError

        try:
            if self.remote:
                return await run_in_threadpool(count, *args)
            return count(*args)
        except StorageError as e:  # Redis gone: nothing counted, nothing served
            log.error(
                "request limits cannot be counted (--shared-storage %s): %s",
                self.shown_storage,
                self._hidden(e),
            )
            raise ServeError(
                503,
                "request limits cannot be counted now; try again later",
                None,
                headers={"Retry-After": str(KEYS_RETRY_AFTER)},
            ) from None

    async def _check_key_failures(self, address: str, lt: bool) -> None:
        """429 for a key from ``address`` once it gave ``--key-failures-limit`` wrong keys
        within a minute, whether this key is right or not (a right one let through would
        tell a guesser which guess was right); counted where the request limits are."""
        item, identity = self.key_failures, f"key-failures:{address}"
        if item is None:
            return

        def reset_if_spent() -> float | None:
            if self.limiter.test(item, identity):
                return None
            return self.limiter.get_window_stats(item, identity).reset_time

        reset = await self._stored(reset_if_spent)
        if reset is None:
            return
        retry = _seconds_to(reset)
        message = (
            f"Slowdown: too many invalid API keys ({item})"
            if lt
            else f"api_key: too many invalid API keys from this address ({item}; retry after "
            f"{retry} s)"
        )
        raise ServeError(429, message, "api_key", headers={"Retry-After": str(retry)})

    async def _key_failed(self, address: str) -> None:
        if self.key_failures is not None:
            await self._stored(self.limiter.hit, self.key_failures, f"key-failures:{address}")

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


def _text(value) -> str | None:
    return value if isinstance(value, str) and value else None


def _seconds_to(reset: float) -> int:
    """A ``Retry-After``: whole seconds until ``reset`` (a time), at least 1."""
    return max(1, math.ceil(reset - time.time()))


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


def check_metrics_token(request: Request, access: AccessConfig) -> None:
    """``/metrics``: 401 without ``--metrics-auth-token``'s bearer token, to every request
    where neither it nor ``--metrics-open`` is given."""
    if access.metrics_open:
        return
    if not access.metrics_auth_token:
        raise ServeError(
            401,
            "Unauthorized: this server gives /metrics to none (serve it with "
            "--metrics-auth-token TOKEN, or --metrics-open)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    given = request.headers.get("authorization", "")
    if not hmac.compare_digest(given.encode(), f"Bearer {access.metrics_auth_token}".encode()):
        raise ServeError(401, "Unauthorized", headers={"WWW-Authenticate": "Bearer"})
