"""aiayn's own API: n-best translations with scores, attention maps, class probabilities;
the page, health and metrics."""

from __future__ import annotations

import functools
from importlib import resources

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from aiayn.serve import schemas as s
from aiayn.serve.access import Guarded, check_metrics_token
from aiayn.serve.errors import ServeError
from aiayn.serve.inputs import (
    check_beam,
    check_output_length,
    check_prefix,
    check_tokens,
    default_within,
    rounded,
    texts_of,
)
from aiayn.serve.registry import ENCODER, TRANSLATOR
from aiayn.serve.routes import Models
from aiayn.serve.terminology import terms_for, terms_key

router = APIRouter()


@functools.cache
def page() -> str:
    return resources.files("aiayn.serve").joinpath("static/index.html").read_text("utf-8")


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def index(request: Request):
    if request.app.state.frontend.disable_web_ui:
        raise ServeError(404, "no web page here (--disable-web-ui); the API is at /docs")
    return HTMLResponse(page())


@router.get("/health")
async def health(registry: Models):
    """200 ``{"status": "ok"}`` (LibreTranslate's answer) once every model is loaded; 503
    while loading; 500 if loading failed."""
    if registry.ready.is_set():
        return {"status": "ok"}  # LibreTranslate's answer; the models: /v1/models
    if registry.error:
        return JSONResponse({"status": "failed", "error": registry.shown_error}, 500)
    return JSONResponse({"status": "loading"}, 503, headers={"Retry-After": "2"})


metrics_router = APIRouter()  # with --metrics


@metrics_router.get("/metrics", include_in_schema=False)
async def metrics(request: Request, registry: Models):
    """Prometheus' text format: to ``--metrics-auth-token``'s holder, or to anyone with
    ``--metrics-open`` (401 otherwise)."""
    check_metrics_token(request, request.app.state.gate.access)
    return Response(generate_latest(registry.metrics.registry), media_type=CONTENT_TYPE_LATEST)


@router.post("/v1/translate", response_model=s.TranslateResponse)
async def translate(req: s.TranslateRequest, request: Request, registry: Models, caller: Guarded):
    """n-best translations with their scores (greedy search when ``beam`` is 1: no score)."""
    model = await registry.pick(req.model, TRANSLATOR, "/v1/translate")
    texts = texts_of(req.text, "text", caller)
    check_beam(req.beam, registry.config)
    offset = default_within(req, "max_len_offset", registry.config.max_new_tokens)
    req = req.model_copy(update={"max_len_offset": offset})
    check_output_length(req.max_len_offset, registry.config)
    check_tokens(model, texts, req.text, "text")
    check_prefix(req.prefix, registry.config)
    terms = await terms_for(model, req.glossary, request.app.state.glossary)
    options = req.model_dump(exclude={"model", "text", "prefix", "glossary", "api_key"})
    greedy = req.beam == 1 and req.nbest == 1  # answered without scores
    results = await registry.run(
        model,
        texts,
        lambda items: model.translate(
            items,
            scores=not greedy,
            prefix=prefixes(req.prefix, items),
            glossary=terms,
            keep=registry.config.kept,
            **options,
        ),  # fmt: skip
        ("translate", req.prefix, tuple(sorted(options.items())), terms_key(terms)),
    )

    def hypothesis(h) -> s.Hypothesis:
        return s.Hypothesis(text=h.text, score=None if greedy else h.score)

    translations = [
        s.Translation(
            text=t.text,
            score=None if greedy else t.score,
            nbest=[hypothesis(h) for h in t.hypotheses],
            alignment=list(t.alignment) if t.alignment is not None else None,
            unmet=list(t.unmet),
        )
        for t in results
    ]
    return s.TranslateResponse(model=model.name, translations=translations)


def prefixes(prefix: str, items: list[str]) -> list[str] | None:
    """A request's one prefix for each of the texts batched with it (None: no prefix)."""
    return [prefix] * len(items) if prefix else None


@router.post("/v1/attention", response_model=s.AttentionResponse)
async def attention(req: s.AttentionRequest, registry: Models, caller: Guarded):
    """One sentence's translation with every layer's and head's attention weights."""
    model = await registry.pick(req.model, TRANSLATOR, "/v1/attention")
    texts_of(req.text, "text", caller)
    check_beam(req.beam, registry.config)
    offset = default_within(req, "max_len_offset", registry.config.max_new_tokens)
    req = req.model_copy(update={"max_len_offset": offset})
    check_output_length(req.max_len_offset, registry.config)
    check_tokens(model, [req.text], req.text, "text")
    options = req.model_dump(exclude={"model", "text", "early_stop", "api_key"})

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


@router.post("/v1/classify", response_model=s.ClassifyResponse)
async def classify(req: s.ClassifyRequest, registry: Models, caller: Guarded):
    """Class probabilities of each text under a classifier."""
    model = await registry.pick(req.model, ENCODER, "/v1/classify")
    if not model.is_classifier:
        raise ServeError(422, f"model {model.name!r} has no classifier head", "model")
    texts = texts_of(req.input, "input", caller)
    check_tokens(model, texts, req.input, "input")
    probs = await registry.run(model, texts, model.classify, ("classify",))
    results = []
    for row in probs:
        best = max(range(len(row)), key=row.__getitem__)
        scores = [
            s.LabelScore(label=label, score=p) for label, p in zip(model.labels, row, strict=True)
        ]
        results.append(
            s.ClassifyResult(label=model.labels[best], score=row[best], probabilities=scores)
        )
    return s.ClassifyResponse(model=model.name, results=results)
