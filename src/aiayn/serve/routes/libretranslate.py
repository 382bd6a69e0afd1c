"""LibreTranslate's API: ``/languages``, ``/detect`` and ``/translate`` (JSON or form bodies),
so that its clients work unchanged."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from aiayn.serve import schemas as s
from aiayn.serve.errors import ServeError
from aiayn.serve.inputs import (
    LANGUAGE_NAMES,
    check_prefix,
    check_tokens,
    form_or_json,
    libretranslate_body,
    texts_of,
)
from aiayn.serve.models import ServedModel
from aiayn.serve.registry import Registry
from aiayn.serve.routes import Models
from aiayn.serve.routes.native import prefixes
from aiayn.serve.terminology import request_terms, terms_key

router = APIRouter()


def translators(registry: Registry) -> list[ServedModel]:
    """The translators with known languages, once the models are loaded."""
    registry.require_ready()
    return [m for m in registry.models.values() if m.is_translator and m.languages]


@router.get("/languages")
async def languages(registry: Models):
    """LibreTranslate's language list: every language with the targets it translates to."""
    pairs = [m.languages for m in translators(registry)]
    codes = list(dict.fromkeys(code for pair in pairs for code in pair))
    return [
        {
            "code": code,
            "name": LANGUAGE_NAMES.get(code, code),
            "targets": list(dict.fromkeys(t for src, t in pairs if src == code)),
        }
        for code in codes
    ]


@router.post("/detect", openapi_extra=form_or_json(s.DetectRequest))
async def detect(request: Request, registry: Models):
    """LibreTranslate's detection. This server identifies no language: it answers the
    source languages it translates from, with the confidence split evenly among them."""
    req = await libretranslate_body(request, s.DetectRequest)
    texts_of(req.q, "q", registry.config)
    sources = list(dict.fromkeys(m.languages[0] for m in translators(registry)))
    return [{"language": code, "confidence": 100.0 / len(sources)} for code in sources]


def pick_translator(registry: Registry, source: str, target: str) -> ServedModel:
    """The model translating ``source`` ('auto': any) into ``target``."""
    served = translators(registry)
    fits = [m for m in served if m.languages[1] == target and source in ("auto", m.languages[0])]
    if not fits:
        pairs = ", ".join(f"{a}->{b}" for a, b in (m.languages for m in served))
        raise ServeError(
            422,
            f"source/target: no model translates {source}->{target}; served: {pairs or 'none'}",
            "target",
        )
    sources = list(dict.fromkeys(m.languages[0] for m in fits))
    if source == "auto" and len(sources) > 1:
        raise ServeError(
            422,
            f"source: 'auto' cannot choose among {', '.join(sources)} (this server "
            "identifies no language); name the source",
            "source",
        )
    return fits[0]


@router.post("/translate", openapi_extra=form_or_json(s.LibreTranslateRequest))
async def libretranslate(request: Request, registry: Models):
    """LibreTranslate's translation: ``q`` (text or list), ``source`` ('auto' picks the
    only model into ``target``), ``target``, ``alternatives``; JSON or form body."""
    req = await libretranslate_body(request, s.LibreTranslateRequest)
    model, config = pick_translator(registry, req.source, req.target), registry.config
    terms = request_terms(model, req.glossary, config.glossary)
    if req.format == "html":
        return await _translate_html(req, model, registry, terms)
    texts = texts_of(req.q, "q", config)
    check_tokens(model, texts, req.q, "q")
    check_prefix(req.prefix, config)
    nbest = 1 + req.alternatives
    if nbest > config.max_beam:
        message = f"alternatives: at most {config.max_beam - 1} (--max-beam {config.max_beam})"
        raise ServeError(422, message, "alternatives")
    options = dict(beam=max(config.beam, nbest), nbest=nbest)
    results = await registry.run(
        model,
        texts,
        lambda items: model.translate(  # texts only
            items, scores=False, prefix=prefixes(req.prefix, items), glossary=terms, **options
        ),
        ("translate", req.prefix, tuple(sorted(options.items())), terms_key(terms)),
    )
    best = [t.text if t.hypotheses else "" for t in results]
    others = [[h.text for h in t.hypotheses[1:]] for t in results]
    single = isinstance(req.q, str)
    body: dict = {"translatedText": best[0] if single else best}
    if req.alternatives:
        body["alternatives"] = others[0] if single else others
    return _detected(body, req, model, len(texts))


def _detected(body: dict, req, model: ServedModel, n: int) -> dict:
    if req.source == "auto":
        guess = {"language": model.languages[0], "confidence": 100.0}
        body["detectedLanguage"] = guess if isinstance(req.q, str) else [guess] * n
    return body


async def _translate_html(req, model: ServedModel, registry: Registry, terms) -> dict:
    """``format`` "html": each ``q`` a page or fragment, its text translated sentence by
    sentence and its markup kept (``aiayn.data.markup``). ``--max-chars`` bounds each
    document, markup included (as LibreTranslate's character limit does)."""
    from aiayn.data import markup

    config = registry.config
    for field, given in (("alternatives", req.alternatives), ("prefix", req.prefix)):
        if given:
            raise ServeError(422, f"{field}: applies to format 'text', not 'html'", field)
    documents = texts_of(req.q, "q", config)  # the whole markup within --max-chars
    names = ["q"] if isinstance(req.q, str) else [f"q[{i}]" for i in range(len(documents))]

    limit = model.max_text_tokens

    def fits(text: str) -> bool:
        return model.token_counts([text])[0] <= limit

    try:
        sentences = await run_in_threadpool(markup.read, documents, names, fits)
    except markup.MarkupError as e:
        raise ServeError(422, str(e), "q") from None
    options = dict(beam=config.beam)
    results = []
    if sentences.texts:  # a document may hold no text at all
        results = await registry.run(
            model,
            sentences.texts,
            lambda items: model.translate(
                items, scores=False, alignment=True, glossary=terms, **options
            ),
            ("translate-aligned", tuple(sorted(options.items())), terms_key(terms)),
        )
    pages = sentences.render([(t.text, t.alignment or ()) for t in results])
    body: dict = {"translatedText": pages[0] if isinstance(req.q, str) else pages}
    return _detected(body, req, model, len(documents))
