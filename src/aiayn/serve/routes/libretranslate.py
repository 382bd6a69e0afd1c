"""LibreTranslate's API: ``/languages``, ``/detect``, ``/translate`` (JSON or form bodies),
``/frontend/settings``, ``/suggest`` and ``/spec``, answering as LibreTranslate does (its
status codes and messages), so that its clients and its web page's settings work unchanged."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from aiayn import documents
from aiayn.serve import schemas as s
from aiayn.serve.access import Caller, Guarded, guard_request
from aiayn.serve.errors import PARSED_JSON, ServeError, handled
from aiayn.serve.inputs import (
    LANGUAGE_NAMES,
    check_prefix,
    check_tokens,
    form_or_json,
    has_words,
    libretranslate_body,
    texts_of,
)
from aiayn.serve.models import ServedModel
from aiayn.serve.registry import Registry
from aiayn.serve.routes import Models
from aiayn.serve.routes.native import prefixes
from aiayn.serve.terminology import request_terms, terms_key

router = APIRouter()


def supported_file_formats(config) -> list[str]:
    """The file extensions documents may be translated from (``/frontend/settings``'
    ``supportedFilesFormat``; ``aiayn.documents``): none with --disable-files-translation."""
    return [] if config.disable_files_translation else documents.supported_formats()


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
async def detect(request: Request, registry: Models, caller: Guarded):
    """LibreTranslate's detection. This server identifies no language: it answers the
    source languages it translates from, with the confidence split evenly among them (for a
    list of texts, one list for them all, as LibreTranslate answers)."""
    req = await libretranslate_body(request, s.DetectRequest)
    texts_of(req.q, "q", caller)
    sources = list(dict.fromkeys(m.languages[0] for m in translators(registry)))
    return [{"language": code, "confidence": 100.0 / len(sources)} for code in sources]


def _name(code: str) -> str:
    return LANGUAGE_NAMES.get(code, code)


def pick_translator(registry: Registry, source: str, target: str) -> ServedModel:
    """The model translating ``source`` ('auto': any) into ``target``; LibreTranslate's
    answers for a language not served and a pair not served."""
    served = translators(registry)
    codes = {code for m in served for code in m.languages}
    for code in (source, target):
        if code not in codes and not (code == source == "auto"):
            raise ServeError(
                400, f"{code} is not supported", "source" if code == source else "target"
            )
    fits = [m for m in served if m.languages[1] == target and source in ("auto", m.languages[0])]
    if not fits:
        raise ServeError(
            400,
            f"{_name(target)} ({target}) is not available as a target language from "
            f"{_name(source)} ({source})",
            "target",
        )
    sources = list(dict.fromkeys(m.languages[0] for m in fits))
    if source == "auto" and len(sources) > 1:
        raise ServeError(
            400,
            f"source: 'auto' cannot choose among {', '.join(sources)} (this server "
            "identifies no language); name the source",
            "source",
        )
    return fits[0]


def libretranslate_texts(value: str | list[str], caller: Caller) -> list[str]:
    """The texts of ``q`` within the batch and character limits, refused in LibreTranslate's
    words."""
    config = caller.config
    texts = [value] if isinstance(value, str) else list(value)
    if len(texts) > config.max_texts:
        raise ServeError(
            400,
            f"Invalid request: request ({len(texts)}) exceeds text limit ({config.max_texts})",
            "q",
        )
    for text in texts:
        if len(text) > config.max_chars:
            raise ServeError(
                400,
                f"Invalid request: request ({len(text)}) exceeds text limit ({config.max_chars})",
                "q",
            )
    return texts


@router.post("/translate", openapi_extra=form_or_json(s.LibreTranslateRequest))
async def libretranslate(request: Request, registry: Models, caller: Guarded):
    """LibreTranslate's translation: ``q`` (text or list), ``source`` ('auto' picks the
    only model into ``target``), ``target``, ``alternatives``; JSON or form body. A text
    with no letters to translate (an emoji, a number, a URL) comes back as it came."""
    return await translation(request, registry, caller)


async def translation(request: Request, registry: Registry, caller: Caller) -> dict:
    """The answer of ``/translate`` (the route's, and ``TranslateLane``'s for a JSON body)."""
    req = await libretranslate_body(request, s.LibreTranslateRequest)
    texts = libretranslate_texts(req.q, caller)
    model, config = pick_translator(registry, req.source, req.target), registry.config
    terms = request_terms(model, req.glossary, request.app.state.glossary)
    if req.format == "html":
        return await _translate_html(req, model, registry, caller, terms)
    limit = request.app.state.frontend.alternatives_limit
    if limit != -1 and req.alternatives > limit:
        message = f"Invalid request: alternatives parameter must be <= {limit}"
        raise ServeError(400, message, "alternatives")
    check_prefix(req.prefix, config)
    nbest = 1 + req.alternatives
    if nbest > config.max_beam:
        message = f"alternatives: at most {config.max_beam - 1} (--max-beam {config.max_beam})"
        raise ServeError(400, message, "alternatives")
    words = [has_words(t) for t in texts]
    todo = [t for t, w in zip(texts, words, strict=True) if w]
    check_tokens(model, todo, todo[0] if len(todo) == 1 else todo, "q")
    options = dict(beam=max(config.beam, nbest), nbest=nbest)
    results = []
    if todo:
        results = await registry.run(
            model,
            todo,
            lambda items: model.translate(  # texts only
                items,
                scores=False,
                prefix=prefixes(req.prefix, items),
                glossary=terms,
                keep=config.kept,
                **options,
            ),
            ("translate", req.prefix, tuple(sorted(options.items())), terms_key(terms)),
        )
    done = iter(results)
    best, others = [], []
    for text, word in zip(texts, words, strict=True):
        if not word:  # as it came, without alternatives
            best.append(text)
            others.append([])
            continue
        t = next(done)
        best.append(t.text if t.hypotheses else "")
        others.append([h.text for h in t.hypotheses[1:]])
    single = isinstance(req.q, str)
    body: dict = {"translatedText": best[0] if single else best}
    if req.alternatives:
        body["alternatives"] = others[0] if single else others
    return _detected(body, req, model, words)


@router.get("/frontend/settings")
async def frontend_settings(request: Request, registry: Models):
    """LibreTranslate's settings for its web page: limits, whether keys and suggestions are
    on, the file formats, the languages its page starts with."""
    gate, frontend = request.app.state.gate, request.app.state.frontend
    served = translators(registry)
    source, target = served[0].languages if served else ("auto", "auto")
    formats = supported_file_formats(registry.config)
    return {
        "charLimit": registry.config.max_chars,
        "frontendTimeout": frontend.frontend_timeout,
        "apiKeys": gate.access.api_keys,
        "keyRequired": gate.access.api_keys,
        "suggestions": frontend.suggestions,
        "filesTranslation": bool(formats),
        "supportedFilesFormat": formats,
        "language": {
            "source": {"code": source, "name": _name(source)},
            "target": {"code": target, "name": _name(target)},
        },
    }


@router.post("/suggest", openapi_extra=form_or_json(s.SuggestRequest))
async def suggest(request: Request, caller: Guarded):
    """LibreTranslate's suggestions: stored with ``--suggestions`` (SQLite), 403 without."""
    store = request.app.state.suggestions
    if store is None:
        raise ServeError(403, "Suggestions are disabled on this server.")
    req = await libretranslate_body(request, s.SuggestRequest)
    for name in ("q", "s"):
        texts_of(getattr(req, name), name, caller)
    await run_in_threadpool(store.add, req.q, req.s, req.source, req.target)
    return {"success": True}


@router.get("/spec", include_in_schema=False)
async def spec(request: Request):
    """The OpenAPI document where LibreTranslate serves its own (``/openapi.json`` too)."""
    return request.app.openapi()


def _detected(body: dict, req, model: ServedModel, words: list[bool]) -> dict:
    """``source`` 'auto': the model's source language, confidence 0 for a text without words."""
    if req.source == "auto":
        guesses = [
            {"language": model.languages[0], "confidence": 100.0 if w else 0.0} for w in words
        ]
        body["detectedLanguage"] = guesses[0] if isinstance(req.q, str) else guesses
    return body


async def _translate_html(
    req, model: ServedModel, registry: Registry, caller: Caller, terms
) -> dict:
    """``format`` "html": each ``q`` a page or fragment, its text translated sentence by
    sentence and its markup kept (``aiayn.data.markup``). ``--max-chars`` bounds each
    document, markup included (as LibreTranslate's character limit does)."""
    from aiayn.data import markup

    config = registry.config
    for field, given in (("alternatives", req.alternatives), ("prefix", req.prefix)):
        if given:
            raise ServeError(400, f"{field}: applies to format 'text', not 'html'", field)
    documents = texts_of(req.q, "q", caller)  # the whole markup within --max-chars
    names = ["q"] if isinstance(req.q, str) else [f"q[{i}]" for i in range(len(documents))]

    limit = model.max_text_tokens

    def fits(text: str) -> bool:
        return model.token_counts([text])[0] <= limit

    try:
        sentences = await run_in_threadpool(markup.read, documents, names, fits)
    except markup.MarkupError as e:
        raise ServeError(400, str(e), "q") from None
    options = dict(beam=config.beam)
    results = []
    if sentences.texts:  # a document may hold no text at all
        results = await registry.run(
            model,
            sentences.texts,
            lambda items: model.translate(
                items, scores=False, alignment=True, glossary=terms, keep=config.kept, **options
            ),
            ("translate-aligned", tuple(sorted(options.items())), terms_key(terms)),
        )
    pages = sentences.render([(t.text, t.alignment or ()) for t in results])
    body: dict = {"translatedText": pages[0] if isinstance(req.q, str) else pages}
    return _detected(body, req, model, [True] * len(documents))


class TranslateLane:
    """ASGI middleware: LibreTranslate's ``POST /translate`` with a JSON body (the requests a
    loaded server is made of) answered by the route's own ``translation``, without FastAPI's
    routing and dependency resolution, which took half of the event loop's time a request
    (docs/serving.md). It gets what the route gets: the access check (``guard``, which
    ``Guarded`` resolves for the route), the body as ``JsonBody`` checked and parsed it,
    errors answered as the route's are (``handled``; any other exception goes on to
    ``InternalErrors``), and the route's name in the metrics. A form, or any other request,
    goes on to FastAPI."""

    def __init__(self, app) -> None:
        self.app = app
        # the route's own object, which the metrics name (as FastAPI sets it when routing)
        (self._route,) = (
            r for r in router.routes if r.path == "/translate" and "POST" in r.methods
        )

    async def __call__(self, scope, receive, send):
        if not (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"] == "/translate"
            and PARSED_JSON in scope  # a JSON body (JsonBody's), not a form
        ):
            return await self.app(scope, receive, send)
        scope["route"] = self._route
        request = Request(scope, receive)
        try:
            caller = await guard_request(request)
            response = JSONResponse(await translation(request, request.app.state.registry, caller))
        except Exception as e:
            response = handled(scope["path"], "POST", e)
            if response is None:
                raise
        await response(scope, receive, send)
