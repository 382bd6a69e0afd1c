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
from aiayn.serve.config import FrontendConfig
from aiayn.serve.detect import detect as detect_languages
from aiayn.serve.detect import ranked
from aiayn.serve.entry import Entry
from aiayn.serve.errors import PARSED_JSON, ServeError, handled, is_form
from aiayn.serve.inputs import (
    check_prefix,
    form_or_json,
    has_words,
    libretranslate_body,
    texts_of,
)
from aiayn.serve.languages import (  # translators: also imported from here
    detected_source,
    detected_sources,
    route_for,
    served_languages,
    translators,
)
from aiayn.serve.models import ServedModel
from aiayn.serve.pairs import Hypotheses, Route, check_glossary_route, pick_route, pivoted
from aiayn.serve.registry import Registry
from aiayn.serve.routes import Models
from aiayn.serve.routes.native import prefixes
from aiayn.serve.terminology import terms_for, terms_key

router = APIRouter()

__all__ = ["TranslateLane", "frontend_languages", "router", "translation", "translators"]


def supported_file_formats(config) -> list[str]:
    """The file extensions documents may be translated from (``/frontend/settings``'
    ``supportedFilesFormat``; ``aiayn.documents``): none with --disable-files-translation."""
    return [] if config.disable_files_translation else documents.supported_formats()


@router.get("/languages")
async def languages(registry: Models):
    """LibreTranslate's language list: every language with the targets it translates to,
    directly or through a pivot language (``aiayn.serve.pairs``), itself among them, as
    LibreTranslate lists them."""
    registry.require_ready()
    pairs = registry.pairs
    return [  # every language its own target too: a text in it comes back as it is
        {"code": code, "name": pairs.name(code), "targets": pairs.targets(code)}
        for code in pairs.codes
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


def libretranslate_texts(value: str | list[str], caller: Caller, field: str = "q") -> list[str]:
    """The texts of ``field`` within the batch and character limits, refused in
    LibreTranslate's words."""
    config = caller.config
    texts = [value] if isinstance(value, str) else list(value)
    if len(texts) > config.max_texts:
        raise ServeError(
            400,
            f"Invalid request: request ({len(texts)}) exceeds text limit ({config.max_texts})",
            field,
        )
    for text in texts:
        if len(text) > config.max_chars:
            raise ServeError(
                400,
                f"Invalid request: request ({len(text)}) exceeds text limit ({config.max_chars})",
                field,
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
    """The answer of ``/translate`` (the route's, and ``TranslateLane``'s for a JSON body).
    The texts are grouped by their source language (under 'auto' each text's own, detected;
    a text without words in none), each group translated along its route (``pick_route``:
    directly or through a pivot); a group in the target language, or in none, comes back as
    it came."""
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
        # a text no language was found in (one without words) comes back as it came
        sources = [code if confidence > 0 else None for code, confidence in found]
    else:
        found, sources = None, [req.source] * len(texts)
    groups: dict[str | None, list[int]] = {}
    for i, source in enumerate(sources):
        groups.setdefault(source, []).append(i)
    # every group's route found (or refused) before any translates
    routes = [route_for(registry, source, req.target) for source in groups]
    for route in routes:
        if route is not None:
            check_glossary_route(route, req.glossary)
    if req.format == "html":
        if req.prefix:
            raise ServeError(400, "prefix: applies to format 'text', not 'html'", "prefix")
        texts_of(req.q, "q", caller)  # the whole markup within --max-chars
    else:
        check_prefix(req.prefix, registry.config)
    glossary = request.app.state.glossary
    single = isinstance(req.q, str)
    # each text's hypotheses ((text, score), best first); None: as it came
    outputs: list[Hypotheses | None] = [None] * len(texts)
    for route, indices in zip(routes, groups.values(), strict=True):
        if route is None:
            continue
        part = [texts[i] for i in indices]
        if req.format == "html":
            names = ["q"] if single else [f"q[{i}]" for i in indices]
            pages = await _html_route(registry, route, part, names, req.glossary, glossary)
            done = [[(page, 0.0)] for page in pages]  # no alternatives for a page
        else:
            done = await _text_route(
                registry, route, part, 1 + req.alternatives, req.prefix, req.glossary, glossary
            )
        for i, hypotheses in zip(indices, done, strict=True):
            outputs[i] = hypotheses
    best = [text if hs is None else hs[0][0] for text, hs in zip(texts, outputs, strict=True)]
    body: dict = {"translatedText": best[0] if single else best}
    if req.alternatives:  # none for a page (as LibreTranslate answers) or a text as it came
        others = [
            [] if hs is None else _unique([t for t, _ in hs[1:]], best[i])
            for i, hs in enumerate(outputs)
        ]
        body["alternatives"] = others[0] if single else others
    if found is not None:
        guesses = [{"language": code, "confidence": c} for code, c in found]
        body["detectedLanguage"] = guesses[0] if single else guesses
    return body


async def _text_route(
    registry: Registry,
    route: Route,
    texts: list[str],
    nbest: int,
    prefix: str,
    given,
    glossary,
) -> list[Hypotheses]:
    """Each of ``texts``' ``nbest`` hypotheses along ``route``: after the first leg, then
    through the pivot each of them translated again (``pivoted``); ``prefix`` begins the
    last leg's translation, ``given`` (a request's glossary) applies to a direct pair."""
    last = len(route.legs) - 1
    ranked = await _text_leg(
        registry, route.legs[0], texts, nbest, prefix if last == 0 else "", given, glossary
    )
    if route.pivot is not None:
        between = [_unique_hypotheses(hs) for hs in ranked]
        flat = [text for hs in between for text, _ in hs]
        again = await _text_leg(
            registry, route.legs[1], flat, nbest, prefix, None, glossary, pivoted=True
        )
        ranked = pivoted(between, again, nbest)
    return ranked


async def _text_leg(
    registry: Registry,
    name: str,
    texts: list[str],
    nbest: int,
    prefix: str,
    given,
    glossary,
    pivoted: bool = False,
) -> list[Hypotheses]:
    """``texts`` translated by model ``name`` (loaded if it is not, and held meanwhile),
    line by line and sentence by sentence: each text's ``nbest`` hypotheses, hypothesis k
    each sentence's k-th (its last where it has fewer) joined, as LibreTranslate joins them,
    scored by the sum of its sentences' scores (as Argos Translate sums them). ``pivoted``:
    the texts are a first model's translations, whose words the model reads as far as it can
    (a word past its limit is not the client's to fix)."""
    config = registry.config
    async with registry.holding(name) as model:
        terms = await terms_for(model, given, glossary)
        if config.kept or model.split_sentences:  # more than a glance at each line: off the loop
            passages = await run_in_threadpool(_sentences, model, texts, config.kept, pivoted)
        else:
            passages = _sentences(model, texts, None, pivoted)
        # --beam 0 (the default): each model's own search (ServedModel.translate)
        options = dict(beam=config.beam and max(config.beam, nbest), nbest=nbest)

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
        if prefix:  # the translation of each text begins with it: its first sentence's
            heads = [i for i, first in enumerate(passages.first) if first]
            rest = [i for i, first in enumerate(passages.first) if not first]
            decoded = await asyncio.gather(
                decode([sentences[i] for i in heads], prefix),
                decode([sentences[i] for i in rest], ""),
            )
            results: list = [None] * len(sentences)
            for indices, found in zip((heads, rest), decoded, strict=True):
                for i, t in zip(indices, found, strict=True):
                    results[i] = t
        else:
            results = await decode(sentences, "")
    hypotheses = [[(h.text, h.score) for h in t.hypotheses] or [("", 0.0)] for t in results]
    joined = []
    for k in range(nbest):
        kth = [h[min(k, len(h) - 1)] for h in hypotheses]
        scores = [0.0] * len(texts)
        for i, (_, score) in zip(passages.passage, kth, strict=True):
            scores[i] += score
        joined.append(list(zip(passages.join([text for text, _ in kth]), scores, strict=True)))
    return [[joined[k][i] for k in range(nbest)] for i in range(len(texts))]


def _unique_hypotheses(hypotheses: Hypotheses) -> Hypotheses:
    """``hypotheses`` without a text repeated (the first kept)."""
    seen: set[str] = set()
    return [h for h in hypotheses if not (h[0] in seen or seen.add(h[0]))]


def _sentences(
    model: ServedModel, texts: list[str], keep: list[str] | None = None, pivoted: bool = False
) -> Passages:
    """``texts`` cut into the sentences ``model`` reads (their lines kept; a span ``keep``
    matches never cut); a word too long for the model to read whole is refused (``pivoted``:
    read as far as the model reads)."""
    counts: dict[str, int] = {}

    def tokens(text: str) -> int:
        if text not in counts:
            counts[text] = model.token_counts([text])[0]
        return counts[text]

    limit = model.max_text_tokens
    passages = Passages(
        texts, lambda text: tokens(text) <= limit, has_words, keep, model.split_sentences
    )
    for text in [] if pivoted else passages.texts:
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
    on, the file formats, the languages its page starts with (``frontend_languages``)."""
    gate, frontend = request.app.state.gate, request.app.state.frontend
    source, target = frontend_languages(
        translators(registry), frontend, request.headers.get("accept-language", "")
    )
    formats = supported_file_formats(registry.config)
    return {
        "charLimit": registry.config.max_chars,
        "frontendTimeout": frontend.frontend_timeout,
        "apiKeys": gate.keys is not None,  # a key may be given (a database is read)
        "keyRequired": gate.access.checks_keys,
        "suggestions": frontend.suggestions,
        "filesTranslation": bool(formats),
        "supportedFilesFormat": formats,
        "language": {
            "source": {
                "code": source,
                "name": "Auto Detect" if source == "auto" else registry.pairs.name(source),
            },
            "target": {"code": target, "name": registry.pairs.name(target)},
        },
    }


def frontend_languages(
    served: list[Entry], frontend: FrontendConfig, accept_language: str
) -> tuple[str, str]:
    """The (source, target) a page starts with, from ``--frontend-language-source`` and
    ``-target``: a served code as given (with a source given, a target it translates into),
    "locale" the browser's first language served (``accept_language``), "auto" as given
    (each text's language is detected among the served ones, as LibreTranslate's "auto"
    is); anything else the first translator's, as LibreTranslate falls back to its first
    languages."""
    if not served:
        return "auto", "auto"
    pairs = [m.languages for m in served]
    source = frontend.frontend_language_source
    fixed = source if any(s == source for s, _ in pairs) else None
    targets = list(dict.fromkeys(t for s, t in pairs if fixed in (None, s)))
    wanted = frontend.frontend_language_target
    if wanted == "locale":
        wanted = next((c for c in accepted_languages(accept_language, targets)), "")
    target = wanted if wanted in targets else (targets[0] if fixed else pairs[0][1])
    if fixed or source == "auto":
        return fixed or "auto", target
    return next(s for s, t in pairs if t == target), target


def accepted_languages(header: str, codes: list[str]) -> list[str]:
    """The ``codes`` an Accept-Language ``header`` names, most wanted first (its q values;
    "de-CH" names "de" too, after "de-ch" itself)."""
    ranked = []
    for i, part in enumerate(header.split(",")[:32]):  # a browser sends a few
        tag, *params = (field.strip() for field in part.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if tag and q > 0:
            ranked.append((-q, i, tag.lower()))
    found = []
    for _, _, tag in sorted(ranked):
        for code in (tag, tag.split("-")[0]):
            if code in codes and code not in found:
                found.append(code)
    return found


@router.post("/suggest", openapi_extra=form_or_json(s.SuggestRequest))
async def suggest(request: Request, registry: Models, caller: Guarded):
    """LibreTranslate's suggestions: stored with ``--suggestions`` (SQLite, the newest
    ``--suggestions-max-rows``), 403 without. ``q`` and ``s`` are texts within the limits of
    ``/translate``'s; ``source`` and ``target`` a pair this server translates, refused in
    ``/translate``'s words (``source`` 'auto' is stored as the language ``q`` is found in,
    ``detected_source``)."""
    store = request.app.state.suggestions
    if store is None:
        raise ServeError(403, "Suggestions are disabled on this server.")
    req = await libretranslate_body(request, s.SuggestRequest)
    for name in ("q", "s"):
        libretranslate_texts(getattr(req, name), caller, name)
    if req.source == "auto":
        source = await detected_source(registry, req.q, req.target)
    else:
        source = pick_route(registry, req.source, req.target).source
    await run_in_threadpool(store.add, req.q, req.s, source, req.target)
    return {"success": True}


@router.get("/spec", include_in_schema=False)
async def spec(request: Request):
    """The OpenAPI document where LibreTranslate serves its own (``/openapi.json`` too)."""
    return request.app.openapi()


async def _html_route(
    registry: Registry, route: Route, pages: list[str], names: list[str], given, glossary
) -> list[str]:
    """``format`` "html": each of ``pages`` (texts of ``q``, called ``names`` in errors) a
    page or fragment, its text translated sentence by sentence and its markup kept
    (``aiayn.data.markup``) along ``route``: through a pivot, the pages in the pivot
    language translated again. ``--max-chars`` bounds each document, markup included (as
    LibreTranslate's character limit does)."""
    for name in route.legs:
        pages = await _html_leg(registry, name, pages, names, given, glossary)
    return pages


async def _html_leg(
    registry: Registry, name: str, pages: list[str], names: list[str], given, glossary
) -> list[str]:
    """``pages`` (HTML) translated by model ``name`` (loaded if it is not, and held
    meanwhile), their markup placed by each sentence's word alignment."""
    from aiayn.data import markup

    config = registry.config
    async with registry.holding(name) as model:
        terms = await terms_for(model, given, glossary)
        limit = model.max_text_tokens

        def fits(text: str) -> bool:
            return model.token_counts([text])[0] <= limit

        try:
            sentences = await run_in_threadpool(markup.read, pages, names, fits, config.kept)
        except markup.MarkupError as e:
            raise ServeError(400, str(e), "q") from None
        options = dict(beam=config.beam)
        results = []
        if sentences.texts:  # a document may hold no text at all
            results = await registry.run(
                model,
                sentences.texts,
                lambda items: model.translate(
                    items,
                    scores=False,
                    alignment=True,
                    glossary=terms,
                    keep=config.kept,
                    **options,
                ),  # fmt: skip
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
