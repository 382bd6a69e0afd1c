"""The FastAPI application of ``aiayn serve``: the registry of models, the middleware, the
stores DeepL's API needs, and the routers of the APIs it speaks (``aiayn.serve.routes``)."""

from __future__ import annotations

import asyncio
import functools
import os
from contextlib import asynccontextmanager

from fastapi import FastAPI

from aiayn.data.terminology import Glossary
from aiayn.serve import deepl, docs, files
from aiayn.serve.access import KEYS_WAIT, AccessConfig, Gate
from aiayn.serve.config import FrontendConfig, ServeConfig
from aiayn.serve.errors import BodyLimit, RequestMetrics, install_error_handlers
from aiayn.serve.glossaries import GlossaryStore, store_path
from aiayn.serve.inputs import JsonBody
from aiayn.serve.jobs import DocumentJobs
from aiayn.serve.models import ModelSpec
from aiayn.serve.openapi import install_openapi
from aiayn.serve.registry import HeldModels, Registry
from aiayn.serve.routes import libretranslate, native, openai
from aiayn.serve.suggestions import SuggestionStore
from aiayn.serve.terminology import check_glossary
from aiayn.serve.usage import CharacterUsage

# the headers LibreTranslate adds to every answer, so that pages elsewhere may call the API
CORS_HEADERS = [
    (b"access-control-allow-origin", b"*"),
    (b"access-control-allow-headers", b"Authorization, Content-Type"),
    (b"access-control-expose-headers", b"Authorization"),
    (b"access-control-allow-methods", b"GET, POST"),
    (b"access-control-allow-credentials", b"true"),
    (b"access-control-max-age", str(60 * 60 * 24 * 20).encode()),
]


def create_app(
    specs: list[ModelSpec],
    config: ServeConfig | None = None,
    background: bool = True,
    access: AccessConfig | None = None,
    frontend: FrontendConfig | None = None,
) -> FastAPI:
    """The FastAPI application serving ``specs``; the models are checked, and those
    ``config.preload`` names loaded, at start-up (in the background unless ``background`` is
    False; ``/health`` says when that is done), the others when a request first needs them.
    ``access``: API keys and request limits (``aiayn.serve.access``); ``frontend``:
    LibreTranslate's other settings."""
    config = config or ServeConfig()
    access, frontend = access or AccessConfig(), frontend or FrontendConfig()
    gate = Gate(access, config)
    gate.check_storage()
    suggestions = (
        SuggestionStore(frontend.suggestions_db, frontend.suggestions_max_rows)
        if frontend.suggestions
        else None
    )
    registry = Registry(specs, config)
    # the server's glossary, read once now: a bad file fails before any model loads
    glossary = Glossary.read(config.glossary) if config.glossary else None
    if glossary is not None:  # its terms for each model's languages usable, or no start
        registry.check = functools.partial(check_glossary, glossary)
    stored = files.claimed(config)  # a --files-dir is one process's: refused now if taken
    # DeepL's stores, beside the keys: characters a month in the keys' file, glossaries next
    # to it (in memory without keys), documents in translation in this process
    # (an origin-only server without a key database keeps none: no file is made for it)
    keyed = access.api_keys and os.path.exists(access.api_keys_db)
    usage = CharacterUsage(access.api_keys_db, timeout=KEYS_WAIT) if keyed else None
    glossaries = GlossaryStore(store_path(access.api_keys_db) if keyed else None)
    jobs = DocumentJobs(config.file_expiry)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if background:
            registry.load_in_background()
        else:
            registry.load()
        yield
        await asyncio.to_thread(registry.close)
        gate.close()
        jobs.close()
        glossaries.close()
        if suggestions is not None:
            suggestions.close()
        files.close(app)

    app = FastAPI(
        title="aiayn",
        summary="Transformer models over HTTP: translation, completion, classification, "
        "embeddings and attention maps.",
        lifespan=lifespan,
        docs_url=None,  # docs.router serves /docs with local files
        redoc_url=None,  # its script would come from a CDN
    )
    app.state.registry, app.state.gate, app.state.files = registry, gate, stored
    app.state.frontend, app.state.suggestions = frontend, suggestions
    app.state.glossary = glossary
    app.state.usage, app.state.glossaries, app.state.jobs = usage, glossaries, jobs
    app.add_middleware(libretranslate.TranslateLane)  # inside InternalErrors
    app.add_middleware(HeldModels)  # a model a request picks by name: held until it is answered
    install_error_handlers(app)
    app.include_router(docs.router)
    app.add_middleware(JsonBody)  # inside BodyLimit: reads only bodies within the limit
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes, timeout=config.timeout)
    app.add_middleware(RequestMetrics, metrics=registry.metrics)
    app.add_middleware(Cors)  # outermost: every answer, errors included
    for router in (native.router, libretranslate.router, openai.router, files.router, deepl.router):
        app.include_router(router)
    if access.metrics:
        app.include_router(native.metrics_router)
    install_openapi(app, registry)
    return app


class Cors:
    """ASGI middleware: LibreTranslate's CORS headers on every answer; a browser's preflight
    (OPTIONS with Access-Control-Request-Method) is answered 200 with them."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        if scope["method"] == "OPTIONS" and b"access-control-request-method" in headers:
            await send({"type": "http.response.start", "status": 200, "headers": CORS_HEADERS})
            return await send({"type": "http.response.body", "body": b""})

        async def with_cors(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *CORS_HEADERS]}
            await send(message)

        await self.app(scope, receive, with_cors)
