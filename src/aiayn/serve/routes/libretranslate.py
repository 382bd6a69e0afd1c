"""LibreTranslate's API: ``/languages``, ``/detect``, ``/translate`` (JSON or form bodies),
``/frontend/settings``, ``/suggest`` and ``/spec``, answering as LibreTranslate does (its
status codes and messages), so that its clients and its web page's settings work unchanged."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from aiayn import documents
from aiayn.data.passages import Passages
from aiayn.serve import schemas as s
from aiayn.serve.access import Caller, Guarded, guard_request
from aiayn.serve.detect import detect as detect_languages
from aiayn.serve.detect import ranked
from aiayn.serve.errors import PARSED_JSON, ServeError, handled, is_form
from aiayn.serve.inputs import (
    check_prefix,
    form_or_json,
    has_words,
    libretranslate_body,
    texts_of,
)
from aiayn.serve.languages import (  # pick_translator, translators: also imported from here
    detected_sources,
    language_name,
    model_for,
    pick_translator,
    served_languages,
    translators,
)
from aiayn.serve.models import ServedModel
from aiayn.serve.registry import Registry
from aiayn.serve.routes import Models
from aiayn.serve.routes.native import prefixes
from aiayn.serve.terminology import terms_for, terms_key

router = APIRouter()

__all__ = ["TranslateLane", "pick_translator", "router", "translation", "translators"]


def supported_file_formats(config) -> list[str]:
    """The file extensions documents may be translated from (``/frontend/settings``'
    ``supportedFilesFormat``; ``aiayn.documents``): none with --disable-files-translation."""
    return [] if config.disable_files_translation else documents.supported_formats()


@router.get("/languages")
async def languages(registry: Models):
    """LibreTranslate's language list: every language with the targets it translates to
    (itself among them, as LibreTranslate lists it)."""
    pairs = [m.languages for m in translators(registry)]
    codes = served_languages(registry)
    return [  # every language its own target too: a text in it comes back as it is
        {
            "code": code,
            "name": language_name(code),
            "targets": list(dict.fromkeys([code, *(t for src, t in pairs if src == code)])),
        }
        for code in codes
    ]


@router.post("/detect", openapi_extra=form_or_json(s.DetectRequest))
async def detect(request: Request, registry: Models, caller: Guarded):
    """LibreTranslate's detection: the language of ``q`` among those this server lists
    (``/languages``), with its confidence (0-100; ``aiayn.serve.detect``). For a list of
    texts, one list for them all, as LibreTranslate answers: each text detected on its own,
    the languages ranked by how much of the text is in them (``ranked``)."""
    req = await libretranslate_body(request, s.DetectRequest)
    texts = texts_of(req.q, "q", caller)
    candidates = served_languages(registry)
    if not candidates:
        return []
    found = await run_in_threadpool(detect_languages, texts, candidates)
    return [{"language": code, "confidence": c} for code, c in ranked(texts, found)]


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
    """LibreTranslate's translation: ``q`` (text or list), ``source`` ('auto': each text's
    language detected on its own, ``aiayn.serve.detect``), ``target``, ``alternatives``; JSON
    or form body. A text with no letters to translate (an emoji, a number, a URL) comes back
    as it came."""
    return await translation(request, registry, caller)


async def translation(request: Request, registry: Registry, caller: Caller) -> dict:
    """The answer of ``/translate`` (the route's, and ``TranslateLane``'s for a JSON body)."""
    req = await libretranslate_body(request, s.LibreTranslateRequest, empty_q=True)
    if is_form(request.scope):  # a text area's lines end "\r\n": "\n", as LibreTranslate reads them
        q = (
            req.q.replace("\r\n", "\n")
            if isinstance(req.q, str)
            else [t.replace("\r\n", "\n") for t in req.q]
        )
        req = req.model_copy(update={"q": q})
    texts = libretranslate_texts(req.q, caller)
    limit = request.app.state.frontend.alternatives_limit
    if limit != -1 and req.alternatives > limit:
        message = f"Invalid request: alternatives parameter must be <= {limit}"
        raise ServeError(400, message, "alternatives")
    if req.alternatives >= registry.config.max_beam:
        max_beam = registry.config.max_beam
        message = f"alternatives: at most {max_beam - 1} (--max-beam {max_beam})"
        raise ServeError(400, message, "alternatives")
    if req.source == "auto":
        found = await detected_sources(req, registry, caller, texts)
        # a text no language was found for (one without words) comes back as it came
        sources = [code if confidence > 0 else None for code, confidence in found]
    else:
        found, sources = None, [req.source] * len(texts)
    groups: dict[str | None, list[int]] = {}
    for i, source in enumerate(sources):
        groups.setdefault(source, []).append(i)
    # every group's model found (or refused) before any translates
    models = [model_for(registry, source, req.target) for source in groups]
    done = await asyncio.gather(
        *(
            _from(request, registry, caller, req, model, texts, indices)
            for model, indices in zip(models, groups.values(), strict=True)
        )
    )
    outputs: list = [None] * len(texts)
    for indices, results in zip(groups.values(), done, strict=True):
        for i, result in zip(indices, results, strict=True):
            outputs[i] = result
    single = isinstance(req.q, str)
    body: dict = {"translatedText": outputs[0][0] if single else [t for t, _ in outputs]}
    if req.alternatives:
        body["alternatives"] = outputs[0][1] if single else [a for _, a in outputs]
    if found is not None:
        guesses = [{"language": code, "confidence": c} for code, c in found]
        body["detectedLanguage"] = guesses[0] if single else guesses
    return body


async def _from(
    request: Request,
    registry: Registry,
    caller: Caller,
    req,
    model: ServedModel | None,
    texts: list[str],
    indices: list[int],
) -> list[tuple[str, list[str]]]:
    """(translation, alternatives) of ``texts`` at ``indices`` by ``model`` (None: as they
    came, without alternatives)."""
    config = registry.config
    names = ["q"] if isinstance(req.q, str) else [f"q[{i}]" for i in indices]
    texts = [texts[i] for i in indices]
    if model is None:
        check_prefix(req.prefix, config)
        return [(text, []) for text in texts]
    terms = await terms_for(model, req.glossary, request.app.state.glossary)
    if req.format == "html":
        pages = await _translate_html(req, texts, names, model, registry, caller, terms)
        return [(page, []) for page in pages]  # no alternatives for a page, as LibreTranslate
    check_prefix(req.prefix, config)
    nbest = 1 + req.alternatives
    if config.kept:  # kept spans looked for in every line: off the event loop
        passages = await run_in_threadpool(_sentences, model, texts, config.kept)
    else:
        passages = _sentences(model, texts)
    options = dict(beam=max(config.beam, nbest), nbest=nbest)

    async def decode(items: list[str], prefix: str) -> list:
        if not items:
            return []
        return await registry.run(
            model,
            items,
            lambda items: model.translate(  # texts only
                items,
                scores=False,
                prefix=prefixes(prefix, items),
                glossary=terms,
                keep=config.kept,
                **options,
            ),
            ("translate", prefix, tuple(sorted(options.items())), terms_key(terms)),
        )

    sentences = passages.texts
    if req.prefix:  # the translation of each text begins with it: its first sentence's
        heads = [i for i, first in enumerate(passages.first) if first]
        rest = [i for i, first in enumerate(passages.first) if not first]
        decoded = await asyncio.gather(
            decode([sentences[i] for i in heads], req.prefix),
            decode([sentences[i] for i in rest], ""),
        )
        results: list = [None] * len(sentences)
        for found, translated in zip((heads, rest), decoded, strict=True):
            for i, t in zip(found, translated, strict=True):
                results[i] = t
    else:
        results = await decode(sentences, "")
    hypotheses = [[h.text for h in t.hypotheses] or [""] for t in results]
    best = passages.join([h[0] for h in hypotheses])
    # alternative k: each sentence's k-th hypothesis (its last where it has fewer), as
    # LibreTranslate joins them; none equal to the translation or to another
    ranked = [passages.join([h[min(k, len(h) - 1)] for h in hypotheses]) for k in range(1, nbest)]
    return [(best[i], _unique([r[i] for r in ranked], best[i])) for i in range(len(texts))]


def _sentences(model: ServedModel, texts: list[str], keep: list[str] | None = None) -> Passages:
    """``texts`` cut into the sentences ``model`` reads (their lines kept; a span ``keep``
    matches never cut); a word too long for the model to read whole is refused."""
    counts: dict[str, int] = {}

    def tokens(text: str) -> int:
        if text not in counts:
            counts[text] = model.token_counts([text])[0]
        return counts[text]

    limit = model.max_text_tokens
    passages = Passages(texts, lambda text: tokens(text) <= limit, has_words, keep)
    for text in passages.texts:
        if tokens(text) > limit:  # one word over the limit (a sentence is cut between words)
            raise ServeError(
                400,
                f"q: {text[:40]!r} is {tokens(text)} tokens, with no space to cut it at; model "
                f"{model.name} reads at most {limit} (its max_len {model.config.max_len}, with eos)",
                "q",
            )
    return passages


def _unique(texts: list[str], translation: str) -> list[str]:
    """``texts`` without repeats, without the translation and without empty ones."""
    seen = {translation, ""}
    return [t for t in texts if not (t in seen or seen.add(t))]


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
            "source": {"code": source, "name": language_name(source)},
            "target": {"code": target, "name": language_name(target)},
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


async def _translate_html(
    req,
    documents: list[str],
    names: list[str],
    model: ServedModel,
    registry: Registry,
    caller: Caller,
    terms,
) -> list[str]:
    """``format`` "html": each of ``documents`` (texts of ``q``, called ``names`` in errors) a
    page or fragment, its text translated sentence by sentence and its markup kept
    (``aiayn.data.markup``). ``--max-chars`` bounds each document, markup included (as
    LibreTranslate's character limit does)."""
    from aiayn.data import markup

    config = registry.config
    if req.prefix:
        raise ServeError(400, "prefix: applies to format 'text', not 'html'", "prefix")
    texts_of(req.q, "q", caller)  # the whole markup within --max-chars
    limit = model.max_text_tokens

    def fits(text: str) -> bool:
        return model.token_counts([text])[0] <= limit

    try:
        sentences = await run_in_threadpool(markup.read, documents, names, fits, config.kept)
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
    return sentences.render([(t.text, t.alignment or ()) for t in results])


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
