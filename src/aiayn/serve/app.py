"""The FastAPI application of ``aiayn serve``: the registry of models, the middleware, and
the routers of the APIs it speaks (``aiayn.serve.routes``)."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

from fastapi import FastAPI

from aiayn.serve import docs, files
from aiayn.serve.config import ServeConfig
from aiayn.serve.errors import BodyLimit, RequestMetrics, install_error_handlers
from aiayn.serve.inputs import JsonBody
from aiayn.serve.models import ModelSpec
from aiayn.serve.openapi import install_openapi
from aiayn.serve.registry import Registry
from aiayn.serve.routes import libretranslate, native, openai


def create_app(
    specs: list[ModelSpec], config: ServeConfig | None = None, background: bool = True
) -> FastAPI:
    """The FastAPI application serving ``specs``; models load at start-up (in the
    background unless ``background`` is False; ``/health`` says when they are ready)."""
    config = config or ServeConfig()
    registry = Registry(specs, config)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if background:
            registry.load_in_background()
        else:
            registry.load()
        yield
        await asyncio.to_thread(registry.close)
        files.close(app)

    app = FastAPI(
        title="aiayn",
        summary="Transformer models over HTTP: translation, completion, classification, "
        "embeddings and attention maps.",
        lifespan=lifespan,
        docs_url=None,  # docs.router serves /docs with local files
        redoc_url=None,  # its script would come from a CDN
    )
    app.state.registry = registry
    install_error_handlers(app)
    app.include_router(docs.router)
    app.add_middleware(JsonBody)  # inside BodyLimit: reads only bodies within the limit
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes)
    app.add_middleware(RequestMetrics, metrics=registry.metrics)
    for router in (native.router, libretranslate.router, openai.router, files.router):
        app.include_router(router)
    install_openapi(app, registry)
    return app
