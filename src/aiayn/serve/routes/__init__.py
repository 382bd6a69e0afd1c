"""The server's routes, grouped by the API they speak: ``libretranslate``, ``openai`` and
aiayn's own (``native``); DeepL's are ``aiayn.serve.deepl``. Each route checks its inputs (``aiayn.serve.inputs``), picks the
model and queues the work on it (``aiayn.serve.registry``), and shapes the answer
(``aiayn.serve.schemas``); the API object the registry holds does the rest. LibreTranslate's
``/translate`` with a JSON body, the request a loaded server is made of, is answered by its
route's own function before FastAPI's routing (``libretranslate.TranslateLane``)."""

from typing import Annotated

from fastapi import Depends, Request

from aiayn.serve.registry import Registry


async def registry_of(request: Request) -> Registry:
    """The app's registry. A coroutine: FastAPI runs a plain function dependency on its
    thread pool, a hop to another thread and back on every request."""
    return request.app.state.registry


Models = Annotated[Registry, Depends(registry_of)]
