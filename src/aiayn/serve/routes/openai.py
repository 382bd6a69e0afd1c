"""OpenAI's API: ``/v1/models``, ``/v1/completions`` (with server-sent events) and
``/v1/embeddings``, so that its clients work unchanged."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
import uuid

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from aiayn.serve import schemas as s
from aiayn.serve.access import Guarded
from aiayn.serve.errors import ServeError
from aiayn.serve.inputs import check_tokens, default_within, texts_of
from aiayn.serve.registry import DECODER, ENCODER
from aiayn.serve.routes import Models

router = APIRouter()


@router.get("/v1/models")
async def list_models(registry: Models):
    """The served models: name, family, parameters, vocabulary, languages, labels."""
    registry.require_ready()
    return {"object": "list", "data": [m.describe() for m in registry.models.values()]}


@router.get("/v1/models/{model_id:path}")
async def retrieve_model(model_id: str, registry: Models):
    """One served model, as ``/v1/models`` lists it (OpenAI's models.retrieve)."""
    return registry.get(model_id).describe()


@router.post("/v1/embeddings", response_model=s.EmbeddingResponse)
async def embeddings(req: s.EmbeddingRequest, registry: Models, caller: Guarded):
    """Pooled encoder states of each text (the vectors of ``aiayn embed``)."""
    model = registry.pick(req.model, ENCODER, "/v1/embeddings")
    texts = texts_of(req.input, "input", caller)
    counts = check_tokens(model, texts, req.input, "input")
    vectors = await registry.run(
        model,
        texts,
        lambda items: model.embed(items, normalize=req.normalize),
        ("embed", req.normalize),
    )
    if req.encoding_format == "base64":
        import numpy as np

        vectors = [base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode() for v in vectors]
    tokens = sum(counts) + len(counts)  # with each text's eos
    return s.EmbeddingResponse(
        data=[s.Embedding(index=i, embedding=v) for i, v in enumerate(vectors)],
        model=model.name,
        usage=s.Usage(prompt_tokens=tokens, total_tokens=tokens),
    )


@router.post("/v1/completions", response_model=s.CompletionResponse)
async def completions(req: s.CompletionRequest, registry: Models, caller: Guarded):
    """Continue a prompt (OpenAI's completions); ``stream`` sends server-sent events."""
    model, config = registry.pick(req.model, DECODER, "/v1/completions"), registry.config
    texts_of(req.prompt, "prompt", caller)
    req = req.model_copy(
        update={"max_tokens": default_within(req, "max_tokens", config.max_new_tokens)}
    )
    if req.max_tokens > config.max_new_tokens:
        raise ServeError(
            422,
            f"max_tokens: {req.max_tokens} is over the limit {config.max_new_tokens} "
            "(--max-new-tokens)",
            "max_tokens",
        )
    prompt = model.prompt_ids(req.prompt)
    if len(prompt) > model.context:
        raise ServeError(
            422,
            f"prompt: {len(prompt)} tokens; model {model.name} reads at most "
            f"{model.context} (its training context)",
            "prompt",
        )
    sampling = req.model_dump(include={"max_tokens", "temperature", "top_k", "top_p", "seed"})
    head = dict(id=f"cmpl-{uuid.uuid4().hex[:24]}", created=int(time.time()), model=model.name)
    if req.stream:
        return stream_completion(registry, model, prompt, sampling, head)
    ((text, n, reason),) = await registry.run(
        model, [None], lambda _: [model.complete(prompt, **sampling)]
    )
    registry.metrics.completed(model.name, n, reason)
    return s.CompletionResponse(
        **head,
        choices=[s.CompletionChoice(text=text, finish_reason=reason)],
        usage=s.Usage(prompt_tokens=len(prompt), completion_tokens=n, total_tokens=len(prompt) + n),
    )


def stream_completion(registry, model, prompt, sampling, head) -> StreamingResponse:
    """Server-sent events as OpenAI streams them: one chunk per piece of text, a last chunk
    with the finish reason, then ``data: [DONE]``. A client that goes away stops the
    generation after the current token."""
    loop = asyncio.get_running_loop()
    deltas: asyncio.Queue = asyncio.Queue()
    stop, done = threading.Event(), object()

    def emit(delta: str) -> None:
        loop.call_soon_threadsafe(deltas.put_nowait, delta)

    job, future = registry.submit(
        model, [None], lambda _: [model.complete(prompt, **sampling, emit=emit, stop=stop)]
    )

    def finished(future) -> None:
        deltas.put_nowait(done)
        if not future.cancelled() and future.exception() is None:
            ((_, n, reason),) = future.result()
            registry.metrics.completed(model.name, n, reason)

    future.add_done_callback(finished)

    async def events():
        try:
            async for chunk in completion_events(deltas, done, future, head, registry.config):
                yield chunk
            yield "data: [DONE]\n\n"
        finally:
            stop.set()
            job.cancelled = True

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


async def completion_events(deltas: asyncio.Queue, done, future, head: dict, config):
    """The events of one streamed completion, up to (not including) ``[DONE]``."""

    def event(text: str, reason: str | None) -> str:
        choice = {"text": text, "index": 0, "logprobs": None, "finish_reason": reason}
        return f"data: {json.dumps({**head, 'object': 'text_completion', 'choices': [choice]})}\n\n"

    while True:
        try:
            item = await asyncio.wait_for(deltas.get(), config.timeout)
        except TimeoutError:
            message = f"no token for {config.timeout:g} s (--timeout)"
            yield f"data: {json.dumps({'error': {'message': message, 'code': 504}})}\n\n"
            return
        if item is not done:
            yield event(item, None)
            continue
        if future.exception() is not None:
            error = {"message": f"inference failed: {future.exception()}", "code": 500}
            yield f"data: {json.dumps({'error': error})}\n\n"
        else:
            ((_, _, reason),) = future.result()
            yield event("", reason)
        return
