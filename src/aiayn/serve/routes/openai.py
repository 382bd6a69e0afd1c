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

from aiayn.api.generator import stop_strings
from aiayn.serve import schemas as s
from aiayn.serve.access import Guarded
from aiayn.serve.errors import ServeError, error_body
from aiayn.serve.inputs import check_ids, check_tokens, default_within, texts_or_ids
from aiayn.serve.registry import DECODER, ENCODER
from aiayn.serve.routes import Models

router = APIRouter()
PATH = "/v1/completions"  # whose errors a stream sends as events, in OpenAI's error body


@router.get("/v1/models")
async def list_models(registry: Models):
    """The served models: name, family, parameters, vocabulary, languages, labels; whether
    each is loaded, how often it was and how long its last load took."""
    registry.require_ready()
    return {"object": "list", "data": [e.describe() for e in registry.entries.values()]}


@router.get("/v1/models/{model_id:path}")
async def retrieve_model(model_id: str, registry: Models):
    """One served model, as ``/v1/models`` lists it (OpenAI's models.retrieve)."""
    return registry.entry(model_id).describe()


@router.post("/v1/embeddings", response_model=s.EmbeddingResponse)
async def embeddings(req: s.EmbeddingRequest, registry: Models, caller: Guarded):
    """Pooled encoder states of each text (the vectors of ``aiayn embed``), or of each list
    of token ids."""
    model = await registry.pick(req.model, ENCODER, "/v1/embeddings")
    inputs = texts_or_ids(req.input, "input", caller)
    if req.dimensions is not None and req.dimensions != model.config.d_model:
        raise ServeError(
            422,
            f"dimensions: model {model.name} gives vectors of {model.config.d_model} "
            "dimensions only (its d_model; it was not trained to be shortened)",
            "dimensions",
        )
    if isinstance(inputs[0], list):  # token ids
        check_ids(model, inputs, req.input, "input", "max_text_tokens")
        counts = [len(ids) for ids in inputs]
        vectors = await registry.run(
            model, inputs, lambda items: model.embed_ids(items, normalize=req.normalize)
        )
    else:
        counts = check_tokens(model, inputs, req.input, "input")
        vectors = await registry.run(
            model,
            inputs,
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
    """Continue each prompt ``n`` times (OpenAI's completions); ``stream`` sends server-sent
    events. Choice ``i * n + j`` is prompt i's j-th."""
    model, config = await registry.pick(req.model, DECODER, "/v1/completions"), registry.config
    prompts = texts_or_ids("" if req.prompt is None else req.prompt, "prompt", caller)
    n = req.n or 1
    if n * len(prompts) > config.max_texts:
        raise ServeError(
            422,
            f"n: {n} choices of {len(prompts)} prompts are {n * len(prompts)}; at most "
            f"{config.max_texts} per request (--max-texts)",
            "n",
        )
    max_tokens = default_within(req, "max_tokens", config.max_new_tokens)
    if max_tokens > config.max_new_tokens:
        raise ServeError(
            422,
            f"max_tokens: {max_tokens} is over the limit {config.max_new_tokens} "
            "(--max-new-tokens)",
            "max_tokens",
        )
    if isinstance(prompts[0], list):
        check_ids(model, prompts, req.prompt, "prompt", "context")
        ids = prompts
    else:
        ids = [model.prompt_ids(p) for p in prompts]
        for i, one in enumerate(ids):
            if len(one) > model.context:
                name = "prompt" if isinstance(req.prompt, str) else f"prompt[{i}]"
                raise ServeError(
                    422,
                    f"{name}: {len(one)} tokens; model {model.name} reads at most "
                    f"{model.context} (its training context)",
                    name,
                )
    sampling = {
        "max_tokens": max_tokens,
        **{f: given(req, f) for f in ("temperature", "top_k", "top_p")},
        "stop": () if req.stop is None else stop_strings(req.stop),
    }
    seed = req.seed
    jobs = [  # (prompt ids, echo, seed) of each choice
        (one, echoed(model, req, prompts[i], one), None if seed is None else (seed + j) % 2**63)
        for i, one in enumerate(ids)
        for j in range(n)
    ]
    head = dict(id=f"cmpl-{uuid.uuid4().hex[:24]}", created=int(time.time()), model=model.name)
    usage = s.Usage(prompt_tokens=sum(len(one) for one in ids), total_tokens=0)
    if req.stream:
        with_usage = bool(req.stream_options and req.stream_options.include_usage)
        return stream_completion(registry, model, jobs, sampling, head, usage, with_usage)
    results = await registry.run(
        model, jobs, lambda items: [model.complete(p, **sampling, seed=sd) for p, _, sd in items]
    )
    choices = []
    for k, ((_, echo, _), (text, generated, reason)) in enumerate(zip(jobs, results, strict=True)):
        registry.metrics.completed(model.name, generated, reason)
        choices.append(s.CompletionChoice(index=k, text=echo + text, finish_reason=reason))
        usage.completion_tokens += generated
    usage.total_tokens = usage.prompt_tokens + usage.completion_tokens
    return s.CompletionResponse(**head, choices=choices, usage=usage)


def given(req, field: str):
    """``req.field``, or its default where the client sent null."""
    value = getattr(req, field)
    return type(req).model_fields[field].default if value is None else value


def echoed(model, req: s.CompletionRequest, prompt: str | list[int], ids: list[int]) -> str:
    """The text a choice begins with: its prompt with ``echo``, else nothing."""
    if not req.echo:
        return ""
    return prompt if isinstance(prompt, str) else model.text_of(ids)


def stream_completion(
    registry, model, jobs, sampling, head, usage, with_usage
) -> StreamingResponse:
    """Server-sent events as OpenAI streams them: chunks of each choice's text (its
    ``index`` says whose), a chunk with each choice's finish reason as it ends, with
    ``with_usage`` a last chunk of the usage (no choices; ``usage`` null in the others), then
    ``data: [DONE]``. A client that goes away stops the generation after the current token."""
    loop = asyncio.get_running_loop()
    deltas: asyncio.Queue = asyncio.Queue()
    cancel, done = threading.Event(), object()

    def put(item) -> None:
        loop.call_soon_threadsafe(deltas.put_nowait, item)

    def emitter(k: int):
        return lambda delta: put((k, delta, None))

    def run(items):
        results = []
        for k, (prompt, echo, seed) in enumerate(items):
            if cancel.is_set():  # the client went away: no more choices
                results.append(("", 0, "cancelled"))
                continue
            if echo:
                put((k, echo, None))
            result = model.complete(prompt, **sampling, seed=seed, emit=emitter(k), cancel=cancel)
            if not cancel.is_set():
                put((k, "", result[2]))
            results.append(result)
        return results

    job, future = registry.submit(model, jobs, run)

    def finished(future) -> None:
        deltas.put_nowait(done)
        if not future.cancelled() and future.exception() is None:
            for _, generated, reason in future.result():
                registry.metrics.completed(model.name, generated, reason)
                usage.completion_tokens += generated

    future.add_done_callback(finished)

    async def events():
        try:
            chunks = completion_events(deltas, done, job, head, registry.config, with_usage)
            async for chunk in chunks:
                yield chunk
            if with_usage and future.done() and not future.exception():
                usage.total_tokens = usage.prompt_tokens + usage.completion_tokens
                chunk = {
                    **head,
                    "object": "text_completion",
                    "choices": [],
                    "usage": usage.model_dump(),
                }
                yield f"data: {json.dumps(chunk)}\n\n"
            yield "data: [DONE]\n\n"
        finally:
            cancel.set()  # a generation running stops after its current token
            registry.queues[model.name].cancel(job)  # one still queued never runs

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


async def completion_events(deltas: asyncio.Queue, done, job, head: dict, config, with_usage):
    """The events of one streamed completion, up to (not including) the usage and ``[DONE]``:
    an error event once no token came for ``--timeout`` seconds since the generation began
    or the token before (the time waiting in the queue is not counted)."""
    extra = {"usage": None} if with_usage else {}
    future = job.future

    def event(index: int, text: str, reason: str | None) -> str:
        choice = {"text": text, "index": index, "logprobs": None, "finish_reason": reason}
        chunk = {**head, "object": "text_completion", "choices": [choice], **extra}
        return f"data: {json.dumps(chunk)}\n\n"

    timeout = config.timeout
    last, left = None, timeout  # when the last token came (None: none yet)
    while True:
        try:
            item = await asyncio.wait_for(deltas.get(), left)
        except TimeoutError:
            since = last if last is not None else job.started_at  # None: still queued
            left = timeout if since is None else since + timeout - time.monotonic()
            if left > 0:
                continue
            message = f"no token for {timeout:g} s (--timeout)"
            yield f"data: {json.dumps(error_body(PATH, 504, message))}\n\n"
            return
        last, left = time.monotonic(), timeout
        if item is not done:
            yield event(*item)
            continue
        if future.exception() is not None:
            message = f"inference failed: {type(future.exception()).__name__}: {future.exception()}"
            yield f"data: {json.dumps(error_body(PATH, 500, message))}\n\n"
        return
