"""The HTTP routes of ``aiayn serve`` (FastAPI): LibreTranslate's and OpenAI's shapes, and
aiayn's own. Routes only: each checks its inputs (``inputs``), picks the model and queues the
work (``registry``), and shapes the answer (``schemas``)."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
import uuid
from contextlib import asynccontextmanager
from importlib import resources

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from aiayn.serve import docs
from aiayn.serve import schemas as s
from aiayn.serve.config import ServeConfig
from aiayn.serve.errors import BodyLimit, RequestMetrics, ServeError, install_error_handlers
from aiayn.serve.inputs import (
    LANGUAGE_NAMES,
    JsonBody,
    check_beam,
    check_output_length,
    check_tokens,
    form_or_json,
    libretranslate_body,
    rounded,
    texts_of,
)
from aiayn.serve.models import ModelSpec, ServedModel
from aiayn.serve.registry import DECODER, ENCODER, TRANSLATOR, Registry


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
    page = resources.files("aiayn.serve").joinpath("static/index.html").read_text("utf-8")

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def index():
        return HTMLResponse(page)

    @app.get("/health")
    async def health():
        """200 once every model is loaded; 503 while loading; 500 if loading failed."""
        if registry.ready.is_set():
            return {"status": "ok", "models": list(registry.models)}
        if registry.error:
            return JSONResponse({"status": "failed", "error": registry.error}, 500)
        return JSONResponse({"status": "loading"}, 503, headers={"Retry-After": "2"})

    @app.get("/v1/models")
    async def list_models():
        """The served models: name, family, parameters, vocabulary, languages, labels."""
        registry.require_ready()
        return {"object": "list", "data": [m.describe() for m in registry.models.values()]}

    @app.get("/v1/models/{model_id:path}")
    async def retrieve_model(model_id: str):
        """One served model, as ``/v1/models`` lists it (OpenAI's models.retrieve)."""
        return registry.get(model_id).describe()

    @app.get("/metrics", include_in_schema=False)
    async def metrics():
        return Response(generate_latest(registry.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    # --- LibreTranslate ------------------------------------------------------------------

    def translators() -> list[ServedModel]:
        registry.require_ready()
        return [m for m in registry.models.values() if m.is_translator and m.languages]

    def source_languages() -> list[str]:
        return list(dict.fromkeys(m.languages[0] for m in translators()))

    @app.get("/languages")
    async def languages():
        """LibreTranslate's language list: every language with the targets it translates to."""
        pairs = [m.languages for m in translators()]
        codes = list(dict.fromkeys(code for pair in pairs for code in pair))
        return [
            {
                "code": code,
                "name": LANGUAGE_NAMES.get(code, code),
                "targets": list(dict.fromkeys(t for src, t in pairs if src == code)),
            }
            for code in codes
        ]

    @app.post("/detect", openapi_extra=form_or_json(s.DetectRequest))
    async def detect(request: Request):
        """LibreTranslate's detection. This server identifies no language: it answers the
        source languages it translates from, with the confidence split evenly among them."""
        req = await libretranslate_body(request, s.DetectRequest)
        texts_of(req.q, "q", config)
        sources = source_languages()
        return [{"language": code, "confidence": 100.0 / len(sources)} for code in sources]

    @app.post("/translate", openapi_extra=form_or_json(s.LibreTranslateRequest))
    async def libretranslate(request: Request):
        """LibreTranslate's translation: ``q`` (text or list), ``source`` ('auto' picks the
        only model into ``target``), ``target``, ``alternatives``; JSON or form body."""
        req = await libretranslate_body(request, s.LibreTranslateRequest)
        if req.format != "text":
            raise ServeError(422, "format: only 'text' is supported (no HTML)", "format")
        fits = [
            m
            for m in translators()
            if m.languages[1] == req.target and req.source in ("auto", m.languages[0])
        ]
        if not fits:
            served = ", ".join(f"{a}->{b}" for a, b in (m.languages for m in translators()))
            raise ServeError(
                422,
                f"source/target: no model translates {req.source}->{req.target}; "
                f"served: {served or 'none'}",
                "target",
            )
        sources = list(dict.fromkeys(m.languages[0] for m in fits))
        if req.source == "auto" and len(sources) > 1:
            raise ServeError(
                422,
                f"source: 'auto' cannot choose among {', '.join(sources)} (this server "
                "identifies no language); name the source",
                "source",
            )
        model = fits[0]
        texts = texts_of(req.q, "q", config)
        check_tokens(model, texts, req.q, "q")
        nbest = 1 + req.alternatives
        if nbest > config.max_beam:
            message = f"alternatives: at most {config.max_beam - 1} (--max-beam {config.max_beam})"
            raise ServeError(422, message, "alternatives")
        beam = max(config.beam, nbest)
        options = dict(beam=beam, nbest=nbest)
        results = await registry.run(
            model,
            texts,
            lambda items: model.translate(items, **options),
            ("translate", tuple(sorted(options.items()))),
        )
        best = [hyps[0][0] if hyps else "" for hyps in results]
        others = [[t for t, _ in hyps[1:]] for hyps in results]
        single = isinstance(req.q, str)
        body: dict = {"translatedText": best[0] if single else best}
        if req.alternatives:
            body["alternatives"] = others[0] if single else others
        if req.source == "auto":
            guess = {"language": model.languages[0], "confidence": 100.0}
            body["detectedLanguage"] = guess if single else [guess] * len(texts)
        return body

    # --- aiayn's own and OpenAI's shapes ----------------------------------------------------

    @app.post("/v1/translate", response_model=s.TranslateResponse)
    async def translate(req: s.TranslateRequest):
        """n-best translations with their scores (greedy search when ``beam`` is 1)."""
        model = registry.pick(req.model, TRANSLATOR, "/v1/translate")
        texts = texts_of(req.text, "text", config)
        check_beam(req.beam, config)
        check_output_length(req.max_len_offset, config)
        check_tokens(model, texts, req.text, "text")
        options = req.model_dump(exclude={"model", "text"})
        results = await registry.run(
            model,
            texts,
            lambda items: model.translate(items, **options),
            ("translate", tuple(sorted(options.items()))),
        )
        translations = [
            s.Translation(
                text=hyps[0][0],
                score=hyps[0][1],
                nbest=[s.Hypothesis(text=t, score=sc) for t, sc in hyps],
            )
            for hyps in results
        ]
        return s.TranslateResponse(model=model.name, translations=translations)

    @app.post("/v1/attention", response_model=s.AttentionResponse)
    async def attention(req: s.AttentionRequest):
        """One sentence's translation with every layer's and head's attention weights."""
        model = registry.pick(req.model, TRANSLATOR, "/v1/attention")
        texts_of(req.text, "text", config)
        check_beam(req.beam, config)
        check_output_length(req.max_len_offset, config)
        check_tokens(model, [req.text], req.text, "text")
        options = req.model_dump(exclude={"model", "text", "early_stop"})

        def run(items: list[str]) -> list[dict]:
            att = model.attention(items[0], **options)
            return [
                dict(
                    model=model.name,
                    translation=att.translation,
                    source_tokens=att.source,
                    output_tokens=att.output,
                    decoder_input_tokens=att.decoder_input,
                    cross=[rounded(w) for w in att.cross],
                    encoder=[rounded(w) for w in att.encoder],
                    decoder=[rounded(w) for w in att.decoder_self],
                )
            ]

        (result,) = await registry.run(model, [req.text], run)
        return result

    @app.post("/v1/classify", response_model=s.ClassifyResponse)
    async def classify(req: s.ClassifyRequest):
        """Class probabilities of each text under a classifier."""
        model = registry.pick(req.model, ENCODER, "/v1/classify")
        if not model.is_classifier:
            raise ServeError(422, f"model {model.name!r} has no classifier head", "model")
        texts = texts_of(req.input, "input", config)
        check_tokens(model, texts, req.input, "input")
        probs = await registry.run(model, texts, model.classify, ("classify",))
        results = []
        for row in probs:
            best = max(range(len(row)), key=row.__getitem__)
            pairs = zip(model.labels, row, strict=True)
            scores = [s.LabelScore(label=label, score=p) for label, p in pairs]
            result = s.ClassifyResult(
                label=model.labels[best], score=row[best], probabilities=scores
            )
            results.append(result)
        return s.ClassifyResponse(model=model.name, results=results)

    @app.post("/v1/embeddings", response_model=s.EmbeddingResponse)
    async def embeddings(req: s.EmbeddingRequest):
        """Mean-pooled encoder states of each text (the vectors of ``aiayn embed``)."""
        model = registry.pick(req.model, ENCODER, "/v1/embeddings")
        texts = texts_of(req.input, "input", config)
        counts = check_tokens(model, texts, req.input, "input")
        vectors = await registry.run(
            model,
            texts,
            lambda items: model.embed(items, normalize=req.normalize),
            ("embed", req.normalize),
        )
        if req.encoding_format == "base64":
            import numpy as np

            vectors = [
                base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode() for v in vectors
            ]
        tokens = sum(counts) + len(counts)  # with each text's eos
        return s.EmbeddingResponse(
            data=[s.Embedding(index=i, embedding=v) for i, v in enumerate(vectors)],
            model=model.name,
            usage=s.Usage(prompt_tokens=tokens, total_tokens=tokens),
        )

    @app.post("/v1/completions", response_model=s.CompletionResponse)
    async def completions(req: s.CompletionRequest):
        """Continue a prompt (OpenAI's completions); ``stream`` sends server-sent events."""
        model = registry.pick(req.model, DECODER, "/v1/completions")
        texts_of(req.prompt, "prompt", config)
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
        if not req.stream:
            ((text, n, reason),) = await registry.run(
                model, [None], lambda _: [model.complete(prompt, **sampling)]
            )
            registry.metrics.completed(model.name, n, reason)
            return s.CompletionResponse(
                **head,
                choices=[s.CompletionChoice(text=text, finish_reason=reason)],
                usage=s.Usage(
                    prompt_tokens=len(prompt), completion_tokens=n, total_tokens=len(prompt) + n
                ),
            )
        return _stream_completion(registry, model, prompt, sampling, head, config.timeout)

    return app


def _stream_completion(registry, model, prompt, sampling, head, timeout) -> StreamingResponse:
    """Server-sent events as OpenAI streams them: one chunk per piece of text, a last chunk
    with the finish reason, then ``data: [DONE]``. A client that goes away stops the
    generation after the current token."""
    loop = asyncio.get_running_loop()
    deltas: asyncio.Queue = asyncio.Queue()
    stop = threading.Event()
    done = object()

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

    def event(text: str, reason: str | None) -> str:
        choice = {"text": text, "index": 0, "logprobs": None, "finish_reason": reason}
        chunk = {**head, "object": "text_completion", "choices": [choice]}
        return f"data: {json.dumps(chunk)}\n\n"

    async def events():
        try:
            while True:
                try:
                    item = await asyncio.wait_for(deltas.get(), timeout)
                except TimeoutError:
                    message = f"no token for {timeout:g} s (--timeout)"
                    yield f"data: {json.dumps({'error': {'message': message, 'code': 504}})}\n\n"
                    break
                if item is not done:
                    yield event(item, None)
                    continue
                if future.exception() is not None:
                    error = {"message": f"inference failed: {future.exception()}", "code": 500}
                    yield f"data: {json.dumps({'error': error})}\n\n"
                else:
                    ((_, _, reason),) = future.result()
                    yield event("", reason)
                break
            yield "data: [DONE]\n\n"
        finally:
            stop.set()
            job.cancelled = True

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)
